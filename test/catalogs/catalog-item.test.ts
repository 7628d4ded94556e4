import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/platform/config.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { bearer, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';
import { bodyOrRaw, callApi } from '../helpers/http.js';

let env: TestEnv;
let ws: SeededWorkspace;
let other: SeededWorkspace;
let catalogId: string;

const FIELDS = [
  { name: 'Name', type: 'string' },
  { name: 'Rating', type: 'number' },
  { name: 'Open', type: 'boolean' },
  { name: 'Opened_At', type: 'time' },
  { name: 'Location', type: 'object' },
  { name: 'Top_Dishes', type: 'array' },
];

interface ErrorEntry {
  id: string;
  message: string;
  parameters: string[];
  parameter_values: unknown[];
}

async function makeCatalog(workspaceId: string, name: string, fields: unknown = FIELDS): Promise<string> {
  const { rows } = await env.ctx.pool.query<{ id: string }>(
    `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, $2, $3::jsonb) RETURNING id`,
    [workspaceId, name, JSON.stringify(fields)],
  );
  return rows[0]!.id;
}

const call = (method: 'GET' | 'PUT' | 'POST' | 'DELETE', url: string, body?: unknown, key: string | null = ws.apiKey) =>
  callApi(env.app, method, url, { key, ...(body === undefined ? {} : bodyOrRaw(body)) });

const ids = (body: { errors: ErrorEntry[] }) => body.errors.map((e) => e.id);
const one = (fields: Record<string, unknown>) => ({ items: [fields] });

async function rows(catalog = catalogId) {
  const { rows } = await env.ctx.pool.query(
    `SELECT item_id, data, deleted FROM catalog_items WHERE catalog_id = $1 ORDER BY item_id`,
    [catalog],
  );
  return rows;
}

const nested = (levels: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < levels; i++) v = { k: v };
  return v;
};

beforeAll(async () => {
  // This file makes far more than 50 synchronous calls a minute; the limit itself is tested at the end.
  env = await createTestEnv({ RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '100000' });
  ws = await seedWorkspace(env.ctx.pool);
  other = await seedWorkspace(env.ctx.pool);
  catalogId = await makeCatalog(ws.workspaceId, 'restaurants');
});
afterAll(async () => env?.close());

describe('PUT /catalogs/{name}/items/{id}', () => {
  it('creates a missing item (200), then replaces it whole; values converted to the field types', async () => {
    const created = await call(
      'PUT',
      '/catalogs/restaurants/items/restaurant1',
      one({ Name: 'Restaurant', Rating: '5', Open: 'FALSE', Opened_At: '2021-09-03' }),
    );
    expect(created.status).toBe(200);
    expect(created.body).toEqual({ message: 'success' });
    expect(created.headers['x-ratelimit-limit']).toBe('100000');
    expect((await call('GET', '/catalogs/restaurants/items/restaurant1')).body).toEqual({
      items: [{ id: 'restaurant1', Name: 'Restaurant', Rating: 5, Open: false, Opened_At: '2021-09-03T00:00:00.000Z' }],
      message: 'success',
    });
    const replaced = await call(
      'PUT',
      '/catalogs/restaurants/items/restaurant1',
      one({ Top_Dishes: ['Soup'], Location: { City: 'Paris' } }),
    );
    expect(replaced.status).toBe(200);
    expect((await call('GET', '/catalogs/restaurants/items/restaurant1')).body.items).toEqual([
      { id: 'restaurant1', Top_Dishes: ['Soup'], Location: { City: 'Paris' } },
    ]);
  });

  it('accepts the boundaries: a 250-character id, 5,000 characters, 50 levels', async () => {
    const longId = 'b'.repeat(250);
    expect((await call('PUT', `/catalogs/restaurants/items/${longId}`, one({ Name: 'x'.repeat(4_989) }))).status).toBe(
      200,
    );
    expect((await call('GET', `/catalogs/restaurants/items/${longId}`)).body.items[0].Name).toHaveLength(4_989);
    expect((await call('PUT', '/catalogs/restaurants/items/deep50', one({ Location: nested(50) }))).status).toBe(200);
  });

  const cases: Array<[string, string, unknown, string, number?]> = [
    ['catalog-not-found', '/catalogs/nope/items/a', one({ Name: 'a' }), 'catalog-not-found', 404],
    ['invalid-ids', '/catalogs/restaurants/items/bad%20id', one({ Name: 'a' }), 'invalid-ids'],
    ['ids-too-large (251)', `/catalogs/restaurants/items/${'c'.repeat(251)}`, one({ Name: 'a' }), 'ids-too-large'],
    ['ids-too-large (2,000)', `/catalogs/restaurants/items/${'c'.repeat(2_000)}`, one({ Name: 'a' }), 'ids-too-large'],
    ['id-in-body', '/catalogs/restaurants/items/a', one({ id: 'a', Name: 'a' }), 'id-in-body'],
    ['items-too-large (5,001)', '/catalogs/restaurants/items/a', one({ Name: 'x'.repeat(4_990) }), 'items-too-large'],
    [
      'too-deep-nesting-in-value-object (51)',
      '/catalogs/restaurants/items/a',
      one({ Location: nested(51) }),
      'too-deep-nesting-in-value-object',
    ],
    ['invalid-fields', '/catalogs/restaurants/items/a', one({ Nope: 1 }), 'invalid-fields'],
    [
      'invalid-keys-in-value-object',
      '/catalogs/restaurants/items/a',
      one({ Location: { $where: 1 } }),
      'invalid-keys-in-value-object',
    ],
    ['unable-to-coerce-value', '/catalogs/restaurants/items/a', one({ Open: 'maybe' }), 'unable-to-coerce-value'],
    ['item-array-invalid (empty)', '/catalogs/restaurants/items/a', { items: [] }, 'item-array-invalid'],
    ['item-array-invalid (object)', '/catalogs/restaurants/items/a', { items: { Name: 'a' } }, 'item-array-invalid'],
    ['item-array-invalid (element)', '/catalogs/restaurants/items/a', { items: [['Name']] }, 'item-array-invalid'],
    ['item-array-invalid (no body)', '/catalogs/restaurants/items/a', undefined, 'item-array-invalid'],
    [
      'request-includes-too-many-items',
      '/catalogs/restaurants/items/a',
      { items: [{ Name: 'a' }, { Name: 'b' }] },
      'request-includes-too-many-items',
    ],
  ];
  for (const [name, url, body, id, status = 400] of cases) {
    it(`${name}: ${status} with exactly that error, nothing written`, async () => {
      const before = await rows();
      const res = await call('PUT', url, body);
      expect(res.status).toBe(status);
      expect(res.body.message).toBe('Invalid Request');
      expect(ids(res.body)).toEqual([id]);
      expect(res.body.errors[0].parameter_values).toHaveLength(res.body.errors[0].parameters.length);
      expect(await rows()).toEqual(before);
    });
  }

  it('lists several errors together', async () => {
    const res = await call('PUT', `/catalogs/restaurants/items/${'d'.repeat(251)}`, {
      items: [{ id: 'x', Nope: 1, Rating: 'many', Location: { 'a.b': nested(60) } }, { Name: 'second' }],
    });
    expect(res.status).toBe(400);
    expect(ids(res.body)).toEqual([
      'ids-too-large',
      'request-includes-too-many-items',
      'id-in-body',
      'invalid-fields',
      'invalid-keys-in-value-object',
      'too-deep-nesting-in-value-object',
      'unable-to-coerce-value',
    ]);
  });

  it('an unexpected failure is a 500 arbitrary-error that leaks nothing, and the item is unchanged', async () => {
    await call('PUT', '/catalogs/restaurants/items/stable', one({ Name: 'before' }));
    // A real fault: the table the write needs is away for a moment.
    await env.ctx.pool.query('ALTER TABLE catalog_items RENAME TO catalog_items_away');
    let res;
    try {
      res = await call('PUT', '/catalogs/restaurants/items/stable', one({ Name: 'after' }));
    } finally {
      await env.ctx.pool.query('ALTER TABLE catalog_items_away RENAME TO catalog_items');
    }
    expect(res.status).toBe(500);
    expect(ids(res.body)).toEqual(['arbitrary-error']);
    expect(JSON.stringify(res.body)).not.toMatch(/catalog_items|relation|SELECT|INSERT/i);
    expect((await call('GET', '/catalogs/restaurants/items/stable')).body.items).toEqual([
      { id: 'stable', Name: 'before' },
    ]);
  });
});

describe('POST /catalogs/{name}/items/{id} (create only)', () => {
  it('creates (201), then refuses the same id with item-already-exists and leaves the item as it was', async () => {
    const created = await call('POST', '/catalogs/restaurants/items/fresh', one({ Name: 'first' }));
    expect(created.status).toBe(201);
    expect(created.body).toEqual({ message: 'success' });
    const again = await call('POST', '/catalogs/restaurants/items/fresh', one({ Name: 'second' }));
    expect(again.status).toBe(400);
    expect(again.body.errors).toEqual([
      {
        id: 'item-already-exists',
        message: 'The item already exists',
        parameters: ['id'],
        parameter_values: ['fresh'],
      },
    ]);
    expect((await call('GET', '/catalogs/restaurants/items/fresh')).body.items).toEqual([
      { id: 'fresh', Name: 'first' },
    ]);
  });

  it('creates again after a delete; shares the validation of PUT', async () => {
    await call('POST', '/catalogs/restaurants/items/phoenix', one({ Name: 'one' }));
    expect((await call('DELETE', '/catalogs/restaurants/items/phoenix')).status).toBe(202);
    expect((await call('POST', '/catalogs/restaurants/items/phoenix', one({ Name: 'two' }))).status).toBe(201);
    expect((await call('GET', '/catalogs/restaurants/items/phoenix')).body.items).toEqual([
      { id: 'phoenix', Name: 'two' },
    ]);
    const bad = await call('POST', '/catalogs/restaurants/items/phoenix', one({ id: 'phoenix', Rating: 'x' }));
    expect(ids(bad.body)).toEqual(['id-in-body', 'unable-to-coerce-value']);
  });

  it('two creates of one id at once: exactly one wins', async () => {
    const results = await Promise.all(
      Array.from({ length: 6 }, (_, i) => call('POST', '/catalogs/restaurants/items/race', one({ Name: `n${i}` }))),
    );
    expect(results.filter((r) => r.status === 201)).toHaveLength(1);
    expect(results.filter((r) => r.status === 400 && r.body.errors[0].id === 'item-already-exists')).toHaveLength(5);
  });
});

describe('GET /catalogs/{name}/items/{id}', () => {
  it('404s: catalog-not-found, item-not-found (also for ids that cannot exist), and another workspace\u2019s catalog', async () => {
    await call('PUT', '/catalogs/restaurants/items/mine', one({ Name: 'mine' }));
    const noCatalog = await call('GET', '/catalogs/nope/items/mine');
    expect(noCatalog.status).toBe(404);
    expect(noCatalog.body.errors).toEqual([
      {
        id: 'catalog-not-found',
        message: 'Could not find catalog',
        parameters: ['catalog_name'],
        parameter_values: ['nope'],
      },
    ]);
    for (const id of ['missing', 'bad%20id', 'e'.repeat(251)]) {
      const res = await call('GET', `/catalogs/restaurants/items/${id}`);
      expect(res.status, id).toBe(404);
      expect(ids(res.body)).toEqual(['item-not-found']);
    }
    expect(ids((await call('GET', '/catalogs/restaurants/items/mine', undefined, other.apiKey)).body)).toEqual([
      'catalog-not-found',
    ]);
  });
});

describe('DELETE /catalogs/{name}/items/{id}', () => {
  it('deletes now (202); a second delete and a read are item-not-found', async () => {
    await call('PUT', '/catalogs/restaurants/items/gone', one({ Name: 'x' }));
    const res = await call('DELETE', '/catalogs/restaurants/items/gone');
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ message: 'success' });
    expect((await call('GET', '/catalogs/restaurants/items/gone')).status).toBe(404);
    const again = await call('DELETE', '/catalogs/restaurants/items/gone');
    expect(again.status).toBe(404);
    expect(ids(again.body)).toEqual(['item-not-found']);
    expect(ids((await call('DELETE', '/catalogs/nope/items/gone')).body)).toEqual(['catalog-not-found']);
  });

  it('another workspace cannot delete this workspace\u2019s item', async () => {
    await call('PUT', '/catalogs/restaurants/items/kept', one({ Name: 'x' }));
    await makeCatalog(other.workspaceId, 'restaurants');
    const res = await call('DELETE', '/catalogs/restaurants/items/kept', undefined, other.apiKey);
    expect(res.status).toBe(404);
    expect(ids(res.body)).toEqual(['item-not-found']);
    expect((await call('GET', '/catalogs/restaurants/items/kept')).status).toBe(200);
  });
});

describe('GET /catalogs/{name}/items (list)', () => {
  it('pages 50 items at a time in id order with a relative Link header, never repeating or skipping', async () => {
    const listId = await makeCatalog(ws.workspaceId, 'paged', [{ name: 'n', type: 'number' }]);
    await env.ctx.pool.query(
      `INSERT INTO catalog_items (catalog_id, item_id, data, deleted)
       SELECT $1, 'it_' || lpad(g::text, 3, '0'), jsonb_build_object('n', g), g % 40 = 0 FROM generate_series(1, 123) g`,
      [listId],
    );
    const seen: string[] = [];
    let url: string | undefined = '/catalogs/paged/items?';
    const sizes: number[] = [];
    while (url) {
      const res = await call('GET', url);
      expect(res.status).toBe(200);
      expect(res.body.message).toBe('success');
      sizes.push(res.body.items.length);
      seen.push(...res.body.items.map((i: { id: string }) => i.id));
      const link = res.headers.link as string | undefined;
      if (link) expect(link).toMatch(/^<\/catalogs\/paged\/items\?cursor=[A-Za-z0-9_-]+>; rel="next"$/);
      url = link ? /^<([^>]+)>/.exec(link)![1] : undefined;
    }
    // 123 rows, 3 of them deleted (40, 80, 120).
    expect(sizes).toEqual([50, 50, 20]);
    expect(seen).toHaveLength(120);
    expect(new Set(seen).size).toBe(120);
    expect([...seen].sort()).toEqual(seen);
    expect(seen).not.toContain('it_040');
    const first = await call('GET', '/catalogs/paged/items');
    expect(first.body.items[0]).toEqual({ id: 'it_001', n: 1 });
  });

  it('an empty catalog is one empty page without Link; unknown catalog 404; a forged cursor 400', async () => {
    await makeCatalog(ws.workspaceId, 'empty');
    const empty = await call('GET', '/catalogs/empty/items');
    expect(empty.status).toBe(200);
    expect(empty.body).toEqual({ items: [], message: 'success' });
    expect(empty.headers.link).toBeUndefined();
    expect(ids((await call('GET', '/catalogs/nope/items')).body)).toEqual(['catalog-not-found']);
    for (const cursor of ['%%%', 'not-base64!', Buffer.from('bad id').toString('base64url')]) {
      const res = await call('GET', `/catalogs/empty/items?cursor=${cursor}`);
      expect(res.status, cursor).toBe(400);
      expect(res.body.errors[0].message).toMatch(/cursor/);
    }
  });
});

describe('single-item endpoints: bad requests, credentials, permissions', () => {
  it('malformed JSON is a 400 and writes nothing', async () => {
    const before = await rows();
    for (const method of ['PUT', 'POST'] as const) {
      const res = await call(method, '/catalogs/restaurants/items/a', '{"items": [{"Name": ');
      expect(res.status).toBe(400);
      expect(res.body.errors[0].message).toMatch(/JSON/);
    }
    expect(await rows()).toEqual(before);
  });

  it('missing key and a key without the permission: 401, naming the permission', async () => {
    const endpoints: Array<['GET' | 'PUT' | 'POST' | 'DELETE', string, string, unknown?]> = [
      ['PUT', '/catalogs/restaurants/items/a', 'catalogs.replace_item', one({ Name: 'a' })],
      ['POST', '/catalogs/restaurants/items/a', 'catalogs.create_item', one({ Name: 'a' })],
      ['GET', '/catalogs/restaurants/items/a', 'catalogs.get_item'],
      ['DELETE', '/catalogs/restaurants/items/a', 'catalogs.delete_item'],
      ['GET', '/catalogs/restaurants/items', 'catalogs.get_items'],
    ];
    const before = await rows();
    for (const [method, url, permission, body] of endpoints) {
      const none = await call(method, url, body, null);
      expect(none.status, `${method} ${url}`).toBe(401);
      const bare = await call(method, url, body, ws.bareKey);
      expect(bare.status).toBe(401);
      expect(bare.body.message).toContain(permission);
    }
    expect(await rows()).toEqual(before);
  });
});

describe('catalog rate limits', () => {
  let limited: TestEnv;
  let lws: SeededWorkspace;
  beforeAll(async () => {
    limited = await createTestEnv({
      RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '3',
      RATE_LIMIT_CATALOG_ASYNC_PER_MINUTE: '2',
    });
    lws = await seedWorkspace(limited.ctx.pool);
    await limited.ctx.pool.query(
      `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, 'c', '[{"name":"Name","type":"string"}]')`,
      [lws.workspaceId],
    );
  });
  afterAll(async () => limited?.close());

  const send = (method: string, url: string, body?: unknown) =>
    limited.app.inject({
      method: method as 'GET',
      url,
      headers: { ...bearer(lws.apiKey), 'content-type': 'application/json' },
      ...(body === undefined ? {} : { payload: body as object }),
    });

  it('defaults to the spec: 50 a minute for the synchronous endpoints, 16,000 for the asynchronous', () => {
    const defaults = loadConfig({});
    expect(defaults.RATE_LIMIT_CATALOG_SYNC_PER_MINUTE).toBe(50);
    expect(defaults.RATE_LIMIT_CATALOG_ASYNC_PER_MINUTE).toBe(16_000);
  });

  it('the synchronous endpoints share one bucket, the asynchronous another; 429 is JSON with Retry-After and applies nothing', async () => {
    expect((await send('PUT', '/catalogs/c/items/a', one({ Name: 'a' }))).statusCode).toBe(200);
    expect((await send('GET', '/catalogs/c/items/a')).statusCode).toBe(200);
    expect((await send('GET', '/catalogs/c/items')).statusCode).toBe(200);
    const over = await send('PUT', '/catalogs/c/items/a', one({ Name: 'changed' }));
    expect(over.statusCode).toBe(429);
    expect(over.json().message).toMatch(/Rate limit/);
    expect(Number(over.headers['retry-after'])).toBeGreaterThan(0);
    const { rows: stored } = await limited.ctx.pool.query(`SELECT data FROM catalog_items`);
    expect(stored).toEqual([{ data: { Name: 'a' } }]);

    expect((await send('PUT', '/catalogs/c/items', { items: [{ id: 'b', Name: 'b' }] })).statusCode).toBe(202);
    expect((await send('DELETE', '/catalogs/c/items', { items: [{ id: 'b' }] })).statusCode).toBe(202);
    const asyncOver = await send('PUT', '/catalogs/c/items', { items: [{ id: 'b', Name: 'b' }] });
    expect(asyncOver.statusCode).toBe(429);
    expect(asyncOver.headers['x-ratelimit-limit']).toBe('2');
  });
});
