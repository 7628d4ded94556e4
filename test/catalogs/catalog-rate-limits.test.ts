import { describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { callApi, type Method } from '../helpers/http.js';
import { catalogState, CREATE_RESTAURANTS } from '../helpers/catalogs.js';

/**
 * The catalog buckets as the public API shares them: the synchronous catalog routes share one (50 a minute by
 * default), the field and selection routes another (50). Over the limit: 429 with a JSON body and Retry-After, and
 * nothing done.
 */
const env = useTestEnv({
  config: { RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '3', RATE_LIMIT_CATALOG_FIELDS_SELECTIONS_PER_MINUTE: '2' },
  workspaces: ['ws'],
});

const call = (method: Method, url: string, body?: unknown) =>
  callApi(env.app, method, url, { key: env.ws.apiKey, body });

describe('catalog rate limits', () => {
  it('list, create, delete and the single-item routes share the synchronous bucket', async () => {
    expect((await call('POST', '/catalogs', CREATE_RESTAURANTS)).headers['x-ratelimit-remaining']).toBe('2');
    expect((await call('GET', '/catalogs')).status).toBe(200);
    expect((await call('PATCH', '/catalogs/restaurants/items/r1', { items: [{ Name: 'x' }] })).status).toBe(404);
    const before = await catalogState(env, env.ws.workspaceId);
    const over = await call('DELETE', '/catalogs/restaurants');
    expect(over.status).toBe(429);
    expect(over.body.message).toMatch(/Rate limit of 3 requests per minute/);
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    expect(await catalogState(env, env.ws.workspaceId)).toEqual(before);
  });

  it('fields and selections share their own bucket; item batches are not in it', async () => {
    const fields = await call('POST', '/catalogs/restaurants/fields', { fields: [{ name: 'Open', type: 'boolean' }] });
    expect(fields.status).toBe(202);
    expect(fields.headers['x-ratelimit-limit']).toBe('2');
    expect((await call('DELETE', '/catalogs/restaurants/selections/none')).status).toBe(404);
    const before = await catalogState(env, env.ws.workspaceId);
    const over = await call('POST', '/catalogs/restaurants/selections', { selection: { name: 's1' } });
    expect(over.status).toBe(429);
    expect(await catalogState(env, env.ws.workspaceId)).toEqual(before);
    const items = await call('POST', '/catalogs/restaurants/items', { items: [{ id: 'r1', Name: 'x' }] });
    expect(items.status).toBe(202);
    expect(items.headers['x-ratelimit-limit']).toBe('16000');
  });
});
