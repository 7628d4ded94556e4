import { describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi, statusAndBody, type Method } from '../helpers/http.js';
import { createKey } from '../helpers/seed.js';
import {
  catalogNotFoundBody,
  catalogState,
  CREATE_ITEMS,
  CREATE_RESTAURANTS,
  drainCatalogQueue,
  RESTAURANT_FIELDS,
} from '../helpers/catalogs.js';

const env = useTestEnv({ config: { RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '100000' }, workspaces: ['ws', 'other'] });

const call = (method: Method, url: string, body?: unknown, key: string | null = env.ws.apiKey) =>
  callApi(env.app, method, url, { key, ...(body === undefined ? {} : bodyOrRaw(body)) });

const ids = (body: { errors: Array<{ id: string }> }) => body.errors.map((e) => e.id);

const catalogOf = (name: string, fields: unknown[], description = 'd') => ({
  catalogs: [{ name, description, fields }],
});

describe('POST /catalogs (the public API example)', () => {
  it('creates the catalog: 201 with the catalog as the example answer shows it', async () => {
    const res = await call('POST', '/catalogs', CREATE_RESTAURANTS);
    expect(res.status).toBe(201);
    expect(res.headers['x-ratelimit-limit']).toBe('100000');
    expect(res.body).toEqual({
      catalogs: [
        {
          description: 'My Restaurants',
          fields: RESTAURANT_FIELDS,
          name: 'restaurants',
          num_items: 0,
          updated_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}\+00:00$/),
        },
      ],
      message: 'success',
    });
  });

  it('refuses a second catalog of the name with the example error body, and changes nothing', async () => {
    const before = await catalogState(env, env.ws.workspaceId);
    const res = await call('POST', '/catalogs', CREATE_RESTAURANTS);
    expect(statusAndBody(res)).toEqual({
      status: 400,
      body: {
        errors: [
          {
            id: 'catalog-name-already-exists',
            message: 'A catalog with that name already exists',
            parameters: ['name'],
            parameter_values: ['restaurants'],
          },
        ],
        message: 'Invalid Request',
      },
    });
    expect(await catalogState(env, env.ws.workspaceId)).toEqual(before);
  });

  it('lets another workspace have a catalog of the same name', async () => {
    const res = await call('POST', '/catalogs', CREATE_RESTAURANTS, env.other.apiKey);
    expect(res.status).toBe(201);
  });
});

describe('POST /catalogs: each refusal with its error id, nothing created', () => {
  const long = 'a'.repeat(251);
  const id = { name: 'id', type: 'string' };
  const cases: Array<[string, unknown, string[]]> = [
    ['body not an object', [1], ['catalog-array-invalid']],
    ['catalogs missing', {}, ['catalog-array-invalid']],
    ['catalogs empty', { catalogs: [] }, ['catalog-array-invalid']],
    ['catalogs of strings', { catalogs: ['x'] }, ['catalog-array-invalid']],
    [
      'two catalogs',
      { catalogs: [catalogOf('a', [id]).catalogs[0], catalogOf('b', [id]).catalogs[0]] },
      ['too-many-catalog-atoms'],
    ],
    ['bad name', catalogOf('my catalog!', [id]), ['invalid-catalog-name']],
    ['name not a string', catalogOf(7 as unknown as string, [id]), ['invalid-catalog-name']],
    ['name too long', catalogOf(long, [id]), ['catalog-name-too-large']],
    ['description too long', catalogOf('c1', [id], long), ['description-too-long']],
    ['description missing', { catalogs: [{ name: 'c1', fields: [id] }] }, ['invalid-request']],
    ['id not first', catalogOf('c1', [{ name: 'Name', type: 'string' }, id]), ['id-not-first-column']],
    ['id not a string', catalogOf('c1', [{ name: 'id', type: 'number' }]), ['id-not-first-column']],
    ['no fields at all', catalogOf('c1', []), ['id-not-first-column']],
    ['fields not an array', catalogOf('c1', 'id' as unknown as unknown[]), ['invalid-fields']],
    ['a field not an object', catalogOf('c1', [id, 'Name']), ['invalid-fields']],
    ['bad field name', catalogOf('c1', [id, { name: 'Na.me', type: 'string' }]), ['invalid-field-names']],
    ['field name too long', catalogOf('c1', [id, { name: long, type: 'string' }]), ['field-names-too-large']],
    ['bad field type', catalogOf('c1', [id, { name: 'Name', type: 'text' }]), ['invalid-field-types']],
    [
      'repeated field',
      catalogOf('c1', [id, { name: 'Name', type: 'string' }, { name: 'Name', type: 'number' }]),
      ['field-names-not-unique'],
    ],
    [
      'too many fields',
      catalogOf('c1', [id, ...Array.from({ length: 500 }, (_, i) => ({ name: `f${i}`, type: 'string' }))]),
      ['too-many-fields'],
    ],
    [
      'several problems at once',
      catalogOf('bad name', [{ name: 'x', type: 'nope' }], long),
      ['invalid-catalog-name', 'description-too-long', 'id-not-first-column', 'invalid-field-types'],
    ],
  ];
  for (const [what, body, expected] of cases) {
    it(what, async () => {
      const before = await catalogState(env, env.ws.workspaceId);
      const res = await call('POST', '/catalogs', body);
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(res.body.message).toBe('Invalid Request');
      expect(ids(res.body)).toEqual(expected);
      expect(await catalogState(env, env.ws.workspaceId)).toEqual(before);
    });
  }

  it('malformed JSON: 400 in the catalog body', async () => {
    const res = await call('POST', '/catalogs', '{"catalogs": [');
    expect(res.status).toBe(400);
    expect(res.body.message).toBe('Invalid Request');
    expect(Array.isArray(res.body.errors)).toBe(true);
  });
});

describe('credentials and permissions', () => {
  it('no key, an unknown key, a key without the permission: 401, nothing done', async () => {
    const before = await catalogState(env, env.ws.workspaceId);
    const body = catalogOf('nope', [{ name: 'id', type: 'string' }]);
    expect((await call('POST', '/catalogs', body, null)).status).toBe(401);
    expect((await call('POST', '/catalogs', body, 'ces_key_unknown000000000000000000000000')).status).toBe(401);
    const bare = await call('POST', '/catalogs', body, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('catalogs.create');
    const reader = await createKey(env.ctx.pool, env.ws.workspaceId, 'reader', ['catalogs.get']);
    expect((await call('DELETE', '/catalogs/restaurants', undefined, reader)).status).toBe(401);
    expect((await call('GET', '/catalogs', undefined, env.ws.bareKey)).status).toBe(401);
    expect((await call('GET', '/catalogs', undefined, reader)).status).toBe(200);
    expect(await catalogState(env, env.ws.workspaceId)).toEqual(before);
  });
});

describe('GET /catalogs', () => {
  it('lists the workspace catalogs, id first, with their item counts', async () => {
    const put = await call('POST', '/catalogs/restaurants/items', CREATE_ITEMS);
    expect(put.status).toBe(202);
    await drainCatalogQueue(env);
    const res = await call('GET', '/catalogs?');
    expect(res.status).toBe(200);
    expect(res.body.message).toBe('success');
    const restaurants = res.body.catalogs.find((c: { name: string }) => c.name === 'restaurants');
    expect(restaurants).toEqual({
      description: 'My Restaurants',
      fields: RESTAURANT_FIELDS,
      name: 'restaurants',
      num_items: 3,
      updated_at: expect.any(String),
    });
    // The other workspace's catalog of the same name is its own, still empty.
    const theirs = await call('GET', '/catalogs', undefined, env.other.apiKey);
    expect(theirs.body.catalogs).toEqual([expect.objectContaining({ name: 'restaurants', num_items: 0 })]);
  });
});

describe('DELETE /catalogs/{name}', () => {
  it('deletes the catalog and its items: 200 {"message": "success"}; then 404 with the example body', async () => {
    const res = await call('DELETE', '/catalogs/restaurants');
    expect(statusAndBody(res)).toEqual({ status: 200, body: { message: 'success' } });
    const { rows } = await env.ctx.pool.query(
      `SELECT count(*)::int AS n FROM catalogs WHERE workspace_id = $1 AND name = 'restaurants'`,
      [env.ws.workspaceId],
    );
    expect(rows[0].n).toBe(0);
    expect((await call('GET', '/catalogs/restaurants/items')).status).toBe(404);
    const again = await call('DELETE', '/catalogs/restaurants');
    expect(statusAndBody(again)).toEqual({ status: 404, body: catalogNotFoundBody('restaurants') });
    // The other workspace's catalog is untouched.
    const theirs = await call('GET', '/catalogs', undefined, env.other.apiKey);
    expect(theirs.body.catalogs).toHaveLength(1);
  });

  it('a change queued before the delete is dropped when its job runs', async () => {
    expect((await call('POST', '/catalogs', CREATE_RESTAURANTS)).status).toBe(201);
    expect((await call('POST', '/catalogs/restaurants/items', CREATE_ITEMS)).status).toBe(202);
    expect((await call('DELETE', '/catalogs/restaurants')).status).toBe(200);
    expect((await call('POST', '/catalogs', CREATE_RESTAURANTS)).status).toBe(201);
    await drainCatalogQueue(env);
    const res = await call('GET', '/catalogs/restaurants/items');
    expect(res.body.items).toEqual([]);
  });
});
