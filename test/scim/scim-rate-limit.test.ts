import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { ERROR_SCHEMA, scimCall, seedScimCompany, userBody, type ScimCompany } from '../helpers/scim.js';

let env: TestEnv;
let a: ScimCompany;
let b: ScimCompany;

beforeAll(async () => {
  env = await createTestEnv({ RATE_LIMIT_SCIM_PER_DAY: '3' });
  a = await seedScimCompany(env, 'a');
  b = await seedScimCompany(env, 'b');
});
afterAll(async () => env?.close());

describe('the daily SCIM limit', () => {
  it('is one budget per company shared by POST, GET, PUT and DELETE; a refused call changes nothing', async () => {
    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('limited@example.com'));
    expect(created.status).toBe(201);
    expect(created.headers['x-ratelimit-limit']).toBe('3');
    expect(created.headers['x-ratelimit-remaining']).toBe('2');
    const id = created.body.id;

    const got = await scimCall(env, 'GET', `/scim/v2/Users/${id}`, a.token);
    expect(got.status).toBe(200);
    expect(got.headers['x-ratelimit-remaining']).toBe('1');

    const put = await scimCall(
      env,
      'PUT',
      `/scim/v2/Users/${id}`,
      a.token,
      userBody('limited@example.com', { department: 'finance' }),
    );
    expect(put.status).toBe(200);
    expect(put.headers['x-ratelimit-remaining']).toBe('0');

    const del = await scimCall(env, 'DELETE', `/scim/v2/Users/${id}`, a.token);
    expect(del.status).toBe(429);
    expect(del.headers['content-type']).toMatch(/^application\/scim\+json/);
    expect(del.body).toMatchObject({ schemas: [ERROR_SCHEMA], status: 429 });
    expect(del.body.detail).toMatch(/3 requests per day/);
    const retryAfter = Number(del.headers['retry-after']);
    // A sliding day in sub-windows of 1,440 s: the first call stops counting a day after the end of its sub-window.
    expect(retryAfter).toBeGreaterThanOrEqual(86_399);
    expect(retryAfter).toBeLessThanOrEqual(86_400 + 1_440);

    const list = await scimCall(env, 'GET', '/scim/v2/Users', a.token);
    expect(list.status).toBe(429);
    const post = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('second@example.com'));
    expect(post.status).toBe(429);

    const { rows } = await env.ctx.pool.query(
      `SELECT user_name, department FROM dashboard_users WHERE company_id = $1`,
      [a.companyId],
    );
    expect(rows).toEqual([{ user_name: 'limited@example.com', department: 'finance' }]);

    // Another company has its own budget.
    const other = await scimCall(env, 'GET', '/scim/v2/Users', b.token);
    expect(other.status).toBe(200);
    expect(other.headers['x-ratelimit-remaining']).toBe('2');
  });
});
