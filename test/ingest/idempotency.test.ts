import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { createSegment, insertProfiles } from '../helpers/export-fixtures.js';
import { startOwnRedis, type OwnRedis } from '../helpers/own-servers.js';
import { callApi, type Method } from '../helpers/http.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

// Keys live in PostgreSQL; a Redis of the test's own is flushed to show they survive it.
let redis: OwnRedis;
let env: TestEnv;
let ws: SeededWorkspace;
let other: SeededWorkspace;
let catalogId: string;

async function call(method: Method, url: string, body: unknown, key?: string, who = ws) {
  const res = await callApi(env.app, method, url, {
    key: who.apiKey,
    body,
    headers: key === undefined ? {} : { 'idempotency-key': key },
  });
  return {
    status: res.status,
    body: res.body as Record<string, unknown>,
    replayed: res.headers['idempotent-replayed'],
  };
}

const count = async (sql: string, params: unknown[]) => (await env.ctx.pool.query(sql, params)).rowCount ?? 0;
const exportsOf = (w: SeededWorkspace) => count('SELECT 1 FROM exports WHERE workspace_id = $1', [w.workspaceId]);
const batches = () => count('SELECT 1 FROM catalog_batches WHERE catalog_id = $1', [catalogId]);

beforeAll(async () => {
  redis = await startOwnRedis();
  env = await createTestEnv({ REDIS_URL: redis.url });
  ws = await seedWorkspace(env.ctx.pool);
  other = await seedWorkspace(env.ctx.pool);
  for (const w of [ws, other]) {
    await createSegment(env.ctx.pool, w.workspaceId, 'seg-a');
    await createSegment(env.ctx.pool, w.workspaceId, 'seg-b');
  }
  await insertProfiles(env.ctx.pool, ws.workspaceId, 1, 10);
  catalogId = (
    await env.ctx.pool.query<{ id: string }>(
      `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, 'menu', '[{"name":"Name","type":"string"}]') RETURNING id`,
      [ws.workspaceId],
    )
  ).rows[0]!.id;
}, 60_000);
afterAll(async () => {
  await env?.close();
  await redis?.close();
});

describe('Idempotency-Key on a segment export', () => {
  it('answers a repeat with the first answer and exports once; another body with the key gets 422; survives a Redis flush', async () => {
    const body = { segment_id: 'seg-a', fields_to_export: ['external_id'] };
    const first = await call('POST', '/users/export/segment', body, 'export-1');
    expect(first.status).toBe(201);
    expect(first.replayed).toBeUndefined();
    const again = await call('POST', '/users/export/segment', body, 'export-1');
    expect(again).toMatchObject({ status: 201, body: first.body, replayed: 'true' });
    expect(await exportsOf(ws)).toBe(1);

    // The same body with its keys in another order is the same request.
    expect(
      (
        await call(
          'POST',
          '/users/export/segment',
          { fields_to_export: ['external_id'], segment_id: 'seg-a' },
          'export-1',
        )
      ).body,
    ).toEqual(first.body);

    const other_ = await call(
      'POST',
      '/users/export/segment',
      { segment_id: 'seg-b', fields_to_export: ['external_id'] },
      'export-1',
    );
    expect(other_.status).toBe(422);
    expect(other_.body.message).toMatch(/Idempotency-Key was used for another request/);
    expect(await exportsOf(ws)).toBe(1);

    await redis.flush();
    const afterFlush = await call('POST', '/users/export/segment', body, 'export-1');
    expect(afterFlush).toMatchObject({ status: 201, body: first.body, replayed: 'true' });
    expect(await exportsOf(ws)).toBe(1);
  });

  it('keeps keys apart per workspace, and lets a refused request be retried with its key', async () => {
    const body = { segment_id: 'seg-b', fields_to_export: ['external_id'] };
    expect((await call('POST', '/users/export/segment', body, 'shared-key', other)).status).toBe(201);
    expect((await call('POST', '/users/export/segment', body, 'shared-key')).status).toBe(201);
    expect(await exportsOf(other)).toBe(1);

    // A refusal (unknown segment) changes nothing and does not keep the key: the corrected request is not a "repeat".
    const refused = await call(
      'POST',
      '/users/export/segment',
      { segment_id: 'nope', fields_to_export: ['external_id'] },
      'retry-me',
      other,
    );
    expect(refused.status).toBe(400);
    expect(await count('SELECT 1 FROM idempotency_keys WHERE key = $1', ['retry-me'])).toBe(0);
  });

  it('answers 409 while the first request with the key is still running, and lets a claim abandoned by a dead process be retaken', async () => {
    const body = { segment_id: 'seg-a', fields_to_export: ['email'] };
    const { requestHash } = await import('../../src/platform/idempotency/keys.js');
    const hash = requestHash('POST', '/users/export/segment', {}, body);
    await env.ctx.pool.query('INSERT INTO idempotency_keys (workspace_id, key, request_hash) VALUES ($1, $2, $3)', [
      other.workspaceId,
      'running',
      hash,
    ]);
    const busy = await call('POST', '/users/export/segment', body, 'running', other);
    expect(busy.status).toBe(409);
    await env.ctx.pool.query(
      `UPDATE idempotency_keys SET created_at = now() - interval '2 minutes' WHERE key = 'running'`,
    );
    // Unanswered for over a minute: the request that claimed it died before its work committed.
    const retaken = await call('POST', '/users/export/segment', body, 'running', other);
    expect(retaken.status).toBe(201);
    expect((await call('POST', '/users/export/segment', body, 'running', other)).replayed).toBe('true');
  });

  it('refuses a malformed key with 400 and does nothing', async () => {
    const before = await exportsOf(ws);
    for (const key of ['x'.repeat(256), 'has space', 'é']) {
      const res = await call(
        'POST',
        '/users/export/segment',
        { segment_id: 'seg-b', fields_to_export: ['external_id'] },
        key,
      );
      expect(res.status, key).toBe(400);
    }
    expect(await exportsOf(ws)).toBe(before);
  });
});

describe('Idempotency-Key on catalog batches', () => {
  it('records one batch for repeats of PUT and DELETE, and 422 for another body', async () => {
    const put = { items: [{ id: 'soup', Name: 'Soup' }] };
    const first = await call('PUT', '/catalogs/menu/items', put, 'menu-1');
    expect(first).toMatchObject({ status: 202, body: { message: 'success' } });
    expect(await call('PUT', '/catalogs/menu/items', put, 'menu-1')).toMatchObject({ status: 202, replayed: 'true' });
    expect(await batches()).toBe(1);
    expect((await call('DELETE', '/catalogs/menu/items', { items: [{ id: 'soup' }] }, 'menu-1')).status).toBe(422);
    expect(await batches()).toBe(1);
    expect((await call('DELETE', '/catalogs/menu/items', { items: [{ id: 'soup' }] }, 'menu-2')).status).toBe(202);
    expect((await call('DELETE', '/catalogs/menu/items', { items: [{ id: 'soup' }] }, 'menu-2')).replayed).toBe('true');
    expect(await batches()).toBe(2);
  });

  it('gives a key past 24 hours a new life', async () => {
    await env.ctx.pool.query(
      `UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE key = 'menu-1'`,
    );
    const later = await call('PUT', '/catalogs/menu/items', { items: [{ id: 'soup', Name: 'Soup' }] }, 'menu-1');
    expect(later).toMatchObject({ status: 202 });
    expect(later.replayed).toBeUndefined();
    expect(await batches()).toBe(3);
  });

  it('does the work once when two requests with one key arrive together', async () => {
    const body = { items: [{ id: 'pie', Name: 'Pie' }] };
    const before = await batches();
    const answers = await Promise.all(
      Array.from({ length: 6 }, () => call('PUT', '/catalogs/menu/items', body, 'together')),
    );
    expect(answers.every((a) => a.status === 202 || a.status === 409)).toBe(true);
    expect(answers.filter((a) => a.status === 202 && a.replayed === undefined)).toHaveLength(1);
    expect(await batches()).toBe(before + 1);
  });
});

describe('Idempotency-Key on /users/track', () => {
  it('stages a request once, answering repeats with its first answer, and refuses the key for another body', async () => {
    const staged = () => count('SELECT 1 FROM ingest_staging WHERE workspace_id = $1', [other.workspaceId]);
    const body = {
      events: [
        { external_id: 'u1', name: 'opened', time: '2026-01-01T00:00:00Z' },
        { name: 'no-user', time: '2026-01-01T00:00:00Z' },
      ],
    };
    const first = await call('POST', '/users/track', body, 'track-1', other);
    expect(first.status).toBe(201);
    expect(first.body).toMatchObject({
      message: 'success',
      events_processed: 1,
      errors: [{ input_array: 'events', index: 1 }],
    });
    const again = await call('POST', '/users/track', body, 'track-1', other);
    expect(again).toMatchObject({ status: 201, body: first.body, replayed: 'true' });
    expect(await staged()).toBe(1);
    expect((await call('POST', '/users/track', { events: [body.events[0]] }, 'track-1', other)).status).toBe(422);
    expect(await staged()).toBe(1);
    // Without a key, every request is staged as before.
    await call('POST', '/users/track', body, undefined, other);
    expect(await staged()).toBe(2);
  });
});

describe('Idempotency-Key on /users/import', () => {
  it('records one import for repeats, answering them with the first answer', async () => {
    const { LocalStore } = await import('../../src/platform/storage/local-store.js');
    await LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, ws).put(
      'imports/a.ndjson',
      Buffer.from('{"external_id":"u1","name":"e","time":"2026-01-01"}\n'),
    );
    await LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, ws).put(
      'imports/b.ndjson',
      Buffer.from('{"external_id":"u1","name":"e","time":"2026-01-01"}\n'),
    );
    const imports = () => count('SELECT 1 FROM imports WHERE workspace_id = $1', [ws.workspaceId]);
    const first = await call('POST', '/users/import', { key: 'imports/a.ndjson' }, 'import-1');
    expect(first.status).toBe(201);
    const again = await call('POST', '/users/import', { key: 'imports/a.ndjson' }, 'import-1');
    expect(again).toMatchObject({ status: 201, replayed: 'true' });
    expect(again.body.import_id).toBe(first.body.import_id);
    expect(await imports()).toBe(1);
    expect((await call('POST', '/users/import', { key: 'imports/b.ndjson' }, 'import-1')).status).toBe(422);
    expect(await imports()).toBe(1);
  });
});

describe('Idempotency-Key on the catalog lifecycle routes', () => {
  it('records one change for repeats of the lifecycle routes: POST and PATCH items, fields, selections', async () => {
    const before = await batches();
    const requests: Array<[Method, string, unknown]> = [
      ['POST', '/catalogs/menu/items', { items: [{ id: 'tea', Name: 'Tea' }] }],
      ['PATCH', '/catalogs/menu/items', { items: [{ id: 'tea', Name: 'Green tea' }] }],
      ['POST', '/catalogs/menu/fields', { fields: [{ name: 'Price', type: 'number' }] }],
      ['POST', '/catalogs/menu/selections', { selection: { name: 'all' } }],
    ];
    for (const [i, [method, url, body]] of requests.entries()) {
      expect(await call(method, url, body, `life-${i}`)).toMatchObject({ status: 202, body: { message: 'success' } });
      expect(await call(method, url, body, `life-${i}`)).toMatchObject({ status: 202, replayed: 'true' });
    }
    expect(await batches()).toBe(before + requests.length);
  });
});
