import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogBatchJob } from '../../jobs/catalog-batch.js';
import { CATALOG_BATCH_QUEUE } from '../../src/platform/queues/catalog-batch.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { bearer, createKey, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';
import { bodyOrRaw, callApi, statusAndBody } from '../helpers/http.js';

let env: TestEnv;
let ws: SeededWorkspace;
let other: SeededWorkspace;

const FIELDS = [
  { name: 'Name', type: 'string' },
  { name: 'Rating', type: 'number' },
  { name: 'Open', type: 'boolean' },
  { name: 'Opened_At', type: 'time' },
  { name: 'Location', type: 'object' },
  { name: 'Top_Dishes', type: 'array' },
];

async function makeCatalog(workspaceId: string, name: string, fields: unknown = FIELDS): Promise<string> {
  const { rows } = await env.ctx.pool.query<{ id: string }>(
    `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, $2, $3::jsonb) RETURNING id`,
    [workspaceId, name, JSON.stringify(fields)],
  );
  return rows[0]!.id;
}

interface ErrorEntry {
  id: string;
  message: string;
  parameters: string[];
  parameter_values: unknown[];
}

const put = (catalog: string, body: unknown, key = ws.apiKey) =>
  callApi(env.app, 'PUT', `/catalogs/${catalog}/items`, { key, ...bodyOrRaw(body) });

const del = (catalog: string, body: unknown, key = ws.apiKey) =>
  callApi(env.app, 'DELETE', `/catalogs/${catalog}/items`, { key, ...bodyOrRaw(body) }).then(statusAndBody);

const getItem = (catalog: string, id: string, key = ws.apiKey) =>
  callApi(env.app, 'GET', `/catalogs/${catalog}/items/${id}`, { key }).then(statusAndBody);

const ids = (body: { errors: ErrorEntry[] }) => body.errors.map((e) => e.id);

async function rowsOf(catalogId: string) {
  const { rows } = await env.ctx.pool.query(
    `SELECT item_id, data, deleted FROM catalog_items WHERE catalog_id = $1 ORDER BY item_id`,
    [catalogId],
  );
  return rows;
}

/** Every job the catalog queue has seen (completed ones are kept), to prove a refused request queued nothing. */
async function jobTotal(): Promise<number> {
  const counts = await env.ctx.queues
    .get(CATALOG_BATCH_QUEUE)
    .getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized');
  return Object.values(counts).reduce((a, b) => a + b, 0);
}

async function until<T>(fn: () => Promise<T | undefined>, what: string, timeoutMs = 15_000): Promise<T> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value !== undefined) return value;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** Starts the worker, waits until the queue is drained, stops it (each test owns when jobs run). */
async function runQueuedJobs(): Promise<void> {
  const queue = env.ctx.queues.get(CATALOG_BATCH_QUEUE);
  const workers = env.startWorkers([catalogBatchJob]);
  await until(async () => {
    const c = await queue.getJobCounts('waiting', 'active', 'delayed', 'prioritized');
    return Object.values(c).every((n) => n === 0) ? true : undefined;
  }, 'the catalog batch queue to drain');
  await workers.close(5_000);
}

const item = (id: string, extra: Record<string, unknown> = {}) => ({
  id,
  Name: `Restaurant ${id}`,
  Rating: 4,
  ...extra,
});
const nested = (levels: number): unknown => {
  let v: unknown = 'leaf';
  for (let i = 0; i < levels; i++) v = { k: v };
  return v;
};

beforeAll(async () => {
  // Reads go through the synchronous bucket (50 a minute by default); the async bucket keeps its default of 16,000.
  env = await createTestEnv({ RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '100000' });
  ws = await seedWorkspace(env.ctx.pool);
  other = await seedWorkspace(env.ctx.pool);
});
afterAll(async () => env?.close());

describe('PUT /catalogs/{name}/items: accepted batches', () => {
  it('answers 202 once queued, and a worker then creates and replaces every item, visible through GET', async () => {
    const catalogId = await makeCatalog(ws.workspaceId, 'restaurants');
    const first = await put('restaurants', {
      items: [
        {
          id: 'restaurant1',
          Name: 'Restaurant',
          Rating: '4.5',
          Open: 'true',
          Opened_At: '2021-09-03T09:03:19.967+02:00',
          Location: { Latitude: 33.6112, Longitude: -117.8711 },
          Top_Dishes: ['Hamburger', 'Deluxe Cheeseburger'],
        },
        { id: 'restaurant-2', Name: 7 },
      ],
    });
    expect(first.status).toBe(202);
    expect(first.body).toEqual({ message: 'success' });
    expect(first.headers['x-ratelimit-limit']).toBe('16000');
    // Queued, not applied: nothing is written by the request itself.
    expect(await rowsOf(catalogId)).toEqual([]);
    expect((await getItem('restaurants', 'restaurant1')).status).toBe(404);

    await runQueuedJobs();
    const got = await getItem('restaurants', 'restaurant1');
    expect(got.status).toBe(200);
    expect(got.body).toEqual({
      items: [
        {
          id: 'restaurant1',
          Name: 'Restaurant',
          Rating: 4.5,
          Open: true,
          Opened_At: '2021-09-03T07:03:19.967Z',
          Location: { Latitude: 33.6112, Longitude: -117.8711 },
          Top_Dishes: ['Hamburger', 'Deluxe Cheeseburger'],
        },
      ],
      message: 'success',
    });
    expect((await getItem('restaurants', 'restaurant-2')).body.items).toEqual([{ id: 'restaurant-2', Name: '7' }]);

    // A replace is whole: fields not sent are gone.
    expect((await put('restaurants', { items: [{ id: 'restaurant1', Rating: 1 }] })).status).toBe(202);
    await runQueuedJobs();
    expect((await getItem('restaurants', 'restaurant1')).body.items).toEqual([{ id: 'restaurant1', Rating: 1 }]);
  });

  it('accepts the boundaries: 50 items, 250-character ids, 5,000 characters, 50 levels of nesting', async () => {
    const catalogId = await makeCatalog(ws.workspaceId, 'bounds', [
      { name: 'Name', type: 'string' },
      { name: 'Deep', type: 'object' },
    ]);
    const longId = 'a'.repeat(250);
    // {"Name":"xxx..."} is 11 characters plus the string: 4,989 characters of string make exactly 5,000.
    const bigName = 'é'.repeat(4_989);
    const items = Array.from({ length: 50 }, (_, i) => ({ id: `item_${i}`, Name: `n${i}` }));
    items[0] = { id: longId, Name: bigName };
    items[1] = { id: 'deep', Deep: nested(50) } as never;
    const res = await put('bounds', { items });
    expect(res.status, JSON.stringify(res.body)).toBe(202);
    await runQueuedJobs();
    const rows = await rowsOf(catalogId);
    expect(rows).toHaveLength(50);
    expect(rows.find((r) => r.item_id === longId)?.data).toEqual({ Name: bigName });
    expect(rows.find((r) => r.item_id === 'deep')?.data).toEqual({ Deep: nested(50) });
  });

  it('keeps two workspaces\u2019 catalogs of the same name apart', async () => {
    const mine = await makeCatalog(ws.workspaceId, 'shared-name');
    const theirs = await makeCatalog(other.workspaceId, 'shared-name', [{ name: 'Colour', type: 'string' }]);
    expect((await put('shared-name', { items: [item('same-id')] })).status).toBe(202);
    // The other workspace's catalog has no Name field: its own definition applies.
    const refused = await put('shared-name', { items: [item('same-id')] }, other.apiKey);
    expect(refused.status).toBe(400);
    expect(ids(refused.body)).toEqual(['invalid-fields']);
    expect((await put('shared-name', { items: [{ id: 'same-id', Colour: 'red' }] }, other.apiKey)).status).toBe(202);
    await runQueuedJobs();

    expect((await getItem('shared-name', 'same-id')).body.items).toEqual([
      { id: 'same-id', Name: 'Restaurant same-id', Rating: 4 },
    ]);
    expect((await getItem('shared-name', 'same-id', other.apiKey)).body.items).toEqual([
      { id: 'same-id', Colour: 'red' },
    ]);
    expect(await rowsOf(mine)).toHaveLength(1);
    expect(await rowsOf(theirs)).toHaveLength(1);
  });

  it('applies writes in the order they were accepted, even when an older job runs last', async () => {
    await makeCatalog(ws.workspaceId, 'ordering');
    expect((await put('ordering', { items: [item('x', { Name: 'queued first' })] })).status).toBe(202);
    // A synchronous replace accepted after the batch, applied before the batch's job runs.
    const sync = await env.app.inject({
      method: 'PUT',
      url: '/catalogs/ordering/items/x',
      headers: { ...bearer(ws.apiKey), 'content-type': 'application/json' },
      payload: { items: [{ Name: 'written second' }] },
    });
    expect(sync.statusCode).toBe(200);
    await runQueuedJobs();
    expect((await getItem('ordering', 'x')).body.items).toEqual([{ id: 'x', Name: 'written second' }]);
  });

  it('a job that runs twice (a retry after a crash) changes nothing the second time', async () => {
    const catalogId = await makeCatalog(ws.workspaceId, 'retry');
    expect((await put('retry', { items: [item('r1')] })).status).toBe(202);
    const [job] = await env.ctx.queues.get(CATALOG_BATCH_QUEUE).getJobs(['waiting']);
    await runQueuedJobs();
    const before = await rowsOf(catalogId);
    // Someone replaces r1 later; then the old job's payload is applied again.
    expect((await put('retry', { items: [item('r1', { Name: 'newer' })] })).status).toBe(202);
    await runQueuedJobs();
    const { applyBatch } = await import('../../src/features/catalogs/apply-batch.js');
    const { CatalogBatchPayload } = await import('../../src/platform/queues/catalog-batch.js');
    const again = await applyBatch(env.ctx.pool, CatalogBatchPayload.parse(job!.data), env.ctx.log);
    expect(again.written).toBe(0);
    expect(before[0].data.Name).toBe('Restaurant r1');
    expect((await rowsOf(catalogId))[0].data.Name).toBe('newer');
  });
});

describe('PUT /catalogs/{name}/items: every error id, alone', () => {
  let catalogId: string;
  beforeAll(async () => {
    catalogId = await makeCatalog(ws.workspaceId, 'errors');
    expect((await put('errors', { items: [item('existing')] })).status).toBe(202);
    await runQueuedJobs();
  });

  const cases: Array<[string, unknown, string, number?]> = [
    ['catalog-not-found', { items: [item('a')] }, 'catalog-not-found', 404],
    ['invalid-ids', { items: [item('bad id!')] }, 'invalid-ids'],
    ['invalid-ids (empty id)', { items: [item('')] }, 'invalid-ids'],
    ['ids-not-string', { items: [{ ...item('a'), id: 12 }] }, 'ids-not-string'],
    ['ids-not-string (null)', { items: [{ ...item('a'), id: null }] }, 'ids-not-string'],
    ['ids-not-unique', { items: [item('dup'), item('dup')] }, 'ids-not-unique'],
    ['ids-too-large', { items: [item('a'.repeat(251))] }, 'ids-too-large'],
    ['items-missing-ids', { items: [{ Name: 'no id' }] }, 'items-missing-ids'],
    ['items-too-large', { items: [item('a', { Name: 'x'.repeat(4_990), Rating: undefined })] }, 'items-too-large'],
    ['invalid-fields', { items: [item('a', { Unknown: 1 })] }, 'invalid-fields'],
    [
      'invalid-keys-in-value-object (nested .)',
      { items: [item('a', { Location: { 'lat.itude': 1 } })] },
      'invalid-keys-in-value-object',
    ],
    [
      'invalid-keys-in-value-object (deep $)',
      { items: [item('a', { Location: { a: [{ b: { $set: 1 } }] } })] },
      'invalid-keys-in-value-object',
    ],
    [
      'invalid-keys-in-value-object (top-level key)',
      { items: [item('a', { 'Na.me': 'x' })] },
      'invalid-keys-in-value-object',
    ],
    [
      'too-deep-nesting-in-value-object',
      { items: [item('a', { Location: nested(51) })] },
      'too-deep-nesting-in-value-object',
    ],
    ['unable-to-coerce-value', { items: [item('a', { Rating: 'four' })] }, 'unable-to-coerce-value'],
    ['unable-to-coerce-value (NUL text)', { items: [item('a', { Name: 'a\u0000b' })] }, 'unable-to-coerce-value'],
    ['item-array-invalid (not an array)', { items: { id: 'a' } }, 'item-array-invalid'],
    ['item-array-invalid (missing)', {}, 'item-array-invalid'],
    // A misspelt `items` is named as the unknown key it is (docs/api.md), in the catalog body.
    ['invalid-request (items misspelt)', { itms: [item('a')] }, 'invalid-request'],
    ['item-array-invalid (empty)', { items: [] }, 'item-array-invalid'],
    ['item-array-invalid (element)', { items: [item('a'), 'b'] }, 'item-array-invalid'],
    ['item-array-invalid (body is an array)', [item('a')], 'item-array-invalid'],
    ['item-array-invalid (no body)', '', 'item-array-invalid'],
    [
      'request-includes-too-many-items',
      { items: Array.from({ length: 51 }, (_, i) => item(`i${i}`)) },
      'request-includes-too-many-items',
    ],
  ];

  for (const [name, body, id, status = 400] of cases) {
    it(`${name}: ${status} with exactly that error, and nothing applied`, async () => {
      const before = await rowsOf(catalogId);
      const jobsBefore = await jobTotal();
      const res = await put(id === 'catalog-not-found' ? 'no-such-catalog' : 'errors', body);
      expect(res.status).toBe(status);
      expect(res.body.message).toBe('Invalid Request');
      expect(ids(res.body)).toEqual([id]);
      for (const e of res.body.errors as ErrorEntry[]) {
        expect(typeof e.message).toBe('string');
        expect(Array.isArray(e.parameters)).toBe(true);
        expect(e.parameter_values).toHaveLength(e.parameters.length);
      }
      expect(await jobTotal()).toBe(jobsBefore);
      expect(await rowsOf(catalogId)).toEqual(before);
    });
  }

  it('names the catalog, the item and the offending fields in its entries', async () => {
    const missing = await put('no-such-catalog', { items: [item('a')] });
    expect(missing.body.errors[0]).toEqual({
      id: 'catalog-not-found',
      message: 'Could not find catalog',
      parameters: ['catalog_name'],
      parameter_values: ['no-such-catalog'],
    });
    const fields = await put('errors', { items: [item('r9', { Bogus: 1, Other: 2 })] });
    expect(fields.body.errors[0]).toMatchObject({
      id: 'invalid-fields',
      parameters: ['id', 'fields'],
      parameter_values: ['r9', ['Bogus', 'Other']],
    });
    const noIds = await put('errors', { items: [{ Name: 'a' }, { Name: 'b' }] });
    expect(noIds.body.errors).toEqual([
      {
        id: 'items-missing-ids',
        message: 'There are 2 item(s) that do not have ids',
        parameters: [],
        parameter_values: [],
      },
    ]);
    const tooLong = await put('errors', { items: [item('ok'), item('b'.repeat(251))] });
    expect(tooLong.body.errors[0]).toMatchObject({ id: 'ids-too-large', parameters: ['index'], parameter_values: [1] });
    const coerce = await put('errors', { items: [item('c1', { Opened_At: 'soon' })] });
    expect(coerce.body.errors[0].message).toContain('Opened_At (time)');
  });

  it('a value too deep to serialise is refused cleanly, not with a crash', async () => {
    const depth = 100_000;
    const payload = `{"items":[{"id":"deep","Location":${'{"k":'.repeat(depth)}1${'}'.repeat(depth)}}]}`;
    const res = await put('errors', payload);
    expect(res.status).toBe(400);
    expect(ids(res.body)).toEqual(['too-deep-nesting-in-value-object']);
  });
});

describe('PUT /catalogs/{name}/items: several errors in one request', () => {
  it('lists every error of every item in one response, and applies none of the valid items', async () => {
    const catalogId = await makeCatalog(ws.workspaceId, 'many-errors');
    const jobsBefore = await jobTotal();
    const items = [
      item('good-1'),
      item('bad id'),
      { Name: 'missing id' },
      { ...item('x'), id: 5 },
      item('dup'),
      item('dup'),
      item('c', { Unknown: 1, Rating: 'high', Location: { 'a.b': { $c: 1 } } }),
      item('deep', { Location: nested(51) }),
      item('big', { Name: 'x'.repeat(5_000) }),
      'not an object',
      ...Array.from({ length: 41 }, (_, i) => item(`fill-${i}`)),
    ];
    const res = await put('many-errors', { items });
    expect(res.status).toBe(400);
    const got = ids(res.body);
    for (const id of [
      'request-includes-too-many-items',
      'invalid-ids',
      'ids-not-string',
      'invalid-fields',
      'invalid-keys-in-value-object',
      'too-deep-nesting-in-value-object',
      'items-too-large',
      'unable-to-coerce-value',
      'item-array-invalid',
      'items-missing-ids',
      'ids-not-unique',
    ]) {
      expect(got, id).toContain(id);
    }
    // Item "c": an unknown field, bad nested keys, and a Rating that is no number: three entries, each once.
    const forC = (res.body.errors as ErrorEntry[]).filter((e) => e.parameter_values[0] === 'c').map((e) => e.id);
    expect(forC.sort()).toEqual(['invalid-fields', 'invalid-keys-in-value-object', 'unable-to-coerce-value']);
    expect(await jobTotal()).toBe(jobsBefore);
    expect(await rowsOf(catalogId)).toEqual([]);
  });

  it('an unknown catalog answers 404 and still lists the errors that do not depend on its fields', async () => {
    const res = await put('nowhere', { items: [item('bad id'), { Name: 'no id' }, item('a', { Unknown: 1 })] });
    expect(res.status).toBe(404);
    expect(ids(res.body)).toEqual(['catalog-not-found', 'invalid-ids', 'items-missing-ids']);
  });

  it('an over-long id with bad characters gets both ids-too-large and invalid-ids', async () => {
    await makeCatalog(ws.workspaceId, 'overlap');
    const res = await put('overlap', { items: [item(`${'a'.repeat(250)}!`)] });
    expect(ids(res.body).sort()).toEqual(['ids-too-large', 'invalid-ids']);
  });
});

describe('DELETE /catalogs/{name}/items', () => {
  it('queues the delete (202) and the worker removes the items; unknown ids are ignored', async () => {
    const catalogId = await makeCatalog(ws.workspaceId, 'deletions');
    expect((await put('deletions', { items: [item('d1'), item('d2'), item('d3')] })).status).toBe(202);
    await runQueuedJobs();
    const res = await del('deletions', { items: [{ id: 'd1' }, { id: 'd3' }, { id: 'never-existed' }] });
    expect(res.status).toBe(202);
    expect(res.body).toEqual({ message: 'success' });
    expect((await getItem('deletions', 'd1')).status).toBe(200);
    await runQueuedJobs();
    expect((await getItem('deletions', 'd1')).status).toBe(404);
    expect((await getItem('deletions', 'd2')).status).toBe(200);
    expect((await getItem('deletions', 'never-existed')).status).toBe(404);
    expect((await rowsOf(catalogId)).filter((r) => !r.deleted).map((r) => r.item_id)).toEqual(['d2']);
  });

  it('a replace queued before a delete never brings the item back', async () => {
    await makeCatalog(ws.workspaceId, 'resurrect');
    expect((await put('resurrect', { items: [item('z')] })).status).toBe(202);
    await runQueuedJobs();
    expect((await put('resurrect', { items: [item('z', { Name: 'stale' })] })).status).toBe(202);
    const sync = await env.app.inject({
      method: 'DELETE',
      url: '/catalogs/resurrect/items/z',
      headers: bearer(ws.apiKey),
    });
    expect(sync.statusCode).toBe(202);
    await runQueuedJobs();
    expect((await getItem('resurrect', 'z')).status).toBe(404);
  });

  it('refuses bad bodies with the catalog error ids and queues nothing', async () => {
    await makeCatalog(ws.workspaceId, 'deletions-bad');
    const jobsBefore = await jobTotal();
    const cases: Array<[unknown, string[], number]> = [
      [{ items: [{ id: 'a' }] }, ['catalog-not-found'], 404],
      [{ items: 'a' }, ['item-array-invalid'], 400],
      [
        { items: [{ id: 'a b' }, { id: 3 }, {}, { id: 'c'.repeat(251) }, { id: 'd' }, { id: 'd' }] },
        ['invalid-ids', 'ids-not-string', 'ids-too-large', 'items-missing-ids', 'ids-not-unique'],
        400,
      ],
      [{ items: Array.from({ length: 51 }, (_, i) => ({ id: `i${i}` })) }, ['request-includes-too-many-items'], 400],
    ];
    for (const [body, expected, status] of cases) {
      const res = await del(status === 404 ? 'missing' : 'deletions-bad', body);
      expect(res.status, JSON.stringify(body).slice(0, 80)).toBe(status);
      expect(ids(res.body)).toEqual(expected);
    }
    expect(await jobTotal()).toBe(jobsBefore);
  });
});

describe('catalog batch endpoints: bad requests, credentials and permissions', () => {
  it('malformed JSON is a 400 in the catalog body shape', async () => {
    await makeCatalog(ws.workspaceId, 'bad-json');
    const jobsBefore = await jobTotal();
    for (const send of [put, del]) {
      const res = await send('bad-json', '{"items": [');
      expect(res.status).toBe(400);
      expect(res.body.message).toBe('Invalid Request');
      expect(res.body.errors[0].message).toMatch(/JSON/);
    }
    expect(await jobTotal()).toBe(jobsBefore);
  });

  it('a body that is not a JSON object is refused with item-array-invalid', async () => {
    const jobsBefore = await jobTotal();
    // A body of another media type is 415, text included (it is not read as a JSON string).
    const text = await env.app.inject({
      method: 'PUT',
      url: '/catalogs/bad-json/items',
      headers: { ...bearer(ws.apiKey), 'content-type': 'text/plain' },
      payload: 'items',
    });
    expect(text.statusCode).toBe(415);
    for (const body of ['"items"', '42', 'null', 'true']) {
      const res = await put('bad-json', body);
      expect(res.status, body).toBe(400);
      expect(ids(res.body), body).toEqual(['item-array-invalid']);
    }
    const xml = await env.app.inject({
      method: 'PUT',
      url: '/catalogs/bad-json/items',
      headers: { ...bearer(ws.apiKey), 'content-type': 'application/xml' },
      payload: '<items/>',
    });
    expect(xml.statusCode).toBe(415);
    expect(await jobTotal()).toBe(jobsBefore);
  });

  it('missing or unknown key: 401; a key without the permission: 401 naming it', async () => {
    const jobsBefore = await jobTotal();
    const none = await env.app.inject({
      method: 'PUT',
      url: '/catalogs/bad-json/items',
      headers: { 'content-type': 'application/json' },
      payload: { items: [item('a')] },
    });
    expect(none.statusCode).toBe(401);
    expect(none.json().message).toMatch(/API key/);
    expect((await put('bad-json', { items: [item('a')] }, 'not-a-key')).status).toBe(401);
    const bare = await put('bad-json', { items: [item('a')] }, ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('catalogs.replace_items');
    const delBare = await del('bad-json', { items: [{ id: 'a' }] }, ws.bareKey);
    expect(delBare.status).toBe(401);
    expect(delBare.body.message).toContain('catalogs.delete_items');
    // The permission of one endpoint does not open the other.
    const onlyReplace = await createKey(env.ctx.pool, ws.workspaceId, 'only-replace', ['catalogs.replace_items']);
    expect((await del('bad-json', { items: [{ id: 'a' }] }, onlyReplace)).status).toBe(401);
    expect(await jobTotal()).toBe(jobsBefore);
  });
});
