import type { InjectOptions } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { LocalStore } from '../../src/platform/storage/local-store.js';
import { waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { createSegment } from '../helpers/export-fixtures.js';
import { startOwnPostgres, startOwnRedis, type OwnPostgres, type OwnRedis } from '../helpers/own-servers.js';
import { ERROR_SCHEMA, ORIGIN } from '../helpers/scim.js';
import { bearer, createScimToken, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/**
 * PostgreSQL stopped, then Redis killed, under a running API: every route that needs the missing server answers 503
 * with Retry-After and a body naming it, in the route family's error format, never 500; /users/track keeps accepting
 * while only Redis is away, and what it staged is applied once Redis is back, with no new request; each outage is
 * logged once when it starts and once when it ends. Nothing is restarted.
 */

let pgServer: OwnPostgres;
let redisServer: OwnRedis;
let env: TestEnv;
let ws: SeededWorkspace;
let scimToken: string;
let objectPrefix: string;
let importId: string;
const logged: Array<Record<string, unknown>> = [];
/** Which server a test has stopped and not started again (starting a running one would leave a stray process). */
const down = { pg: false, redis: false };

const APP = 'ios-outage';
const ACTIVITY = 'game-outage';
const CATALOG = 'restaurants';
const IMPORT_KEY = 'imports/outage.ndjson';

beforeAll(async () => {
  [pgServer, redisServer] = await Promise.all([startOwnPostgres(), startOwnRedis()]);
  env = await createTestEnv(
    { DATABASE_URL: pgServer.url, REDIS_URL: redisServer.url, LOG_LEVEL: 'info' },
    { logDestination: { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) } },
  );
  const pool = env.ctx.pool;
  ws = await seedWorkspace(pool);
  scimToken = await createScimToken(pool, ws.companyId);
  for (let i = 0; i < 12; i++) await createSegment(pool, ws.workspaceId, `seg-${i}`);
  await pool.query(
    `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, $2, '[{"name": "Name", "type": "string"}]'::jsonb)`,
    [ws.workspaceId, CATALOG],
  );
  const app = await pool.query<{ id: string }>(
    `INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, $2, 'Sports') RETURNING id`,
    [ws.workspaceId, APP],
  );
  await pool.query(
    `INSERT INTO live_activities (app_id, activity_id, content_state_shape) VALUES ($1, $2, '{"score": "number"}')`,
    [app.rows[0]!.id, ACTIVITY],
  );
  await LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, ws).put(
    IMPORT_KEY,
    Buffer.from('{"external_id": "imp", "name": "open", "time": "2024-01-01T00:00:00Z"}\n'),
  );
  env.startWorkers([trackIngestJob]);

  // What the status samples read, made while everything is up.
  const exported = await send(samples.find((s) => s.name === 'export request')!.request());
  expect(exported.statusCode, exported.body).toBe(201);
  objectPrefix = exported.json().object_prefix;
  const imported = await send(samples.find((s) => s.name === 'import start')!.request());
  expect(imported.statusCode, imported.body).toBe(201);
  importId = imported.json().import_id;
  expect((await send(samples.find((s) => s.name === 'catalog item (sync)')!.request())).statusCode).toBe(200);
}, 120_000);

afterAll(async () => {
  // Whatever a failed test left stopped is started again, so that the schema and keys are removed.
  if (down.pg) await pgServer.start().catch(() => {});
  if (down.redis) await redisServer.start().catch(() => {});
  await env?.close();
  await Promise.all([pgServer?.close(), redisServer?.close()]);
});

const send = (options: InjectOptions) => env.app.inject(options);
const json = (
  method: 'GET' | 'POST' | 'PUT',
  url: string,
  body?: unknown,
  headers: Record<string, string> = bearer(ws.apiKey),
): InjectOptions => ({
  method,
  url,
  headers: { ...headers, 'content-type': 'application/json' },
  ...(body === undefined ? {} : { payload: JSON.stringify(body) }),
});

type Format = 'message' | 'scim' | 'catalog' | 'error';
interface Sample {
  name: string;
  format: Format;
  /**
   * While Redis is away: true, it answers 503 (it takes a lock there, or queues a job in the transaction of its
   * write); 'either' when it may also accept the work recorded in PostgreSQL for later queueing (2xx).
   */
  needsRedis: boolean | 'either';
  request: () => InjectOptions;
}

let segment = 0;
let tracked = 0;
let score = 0;
const samples: Sample[] = [
  {
    name: 'track',
    format: 'message',
    needsRedis: false,
    request: () => json('POST', '/users/track', { attributes: [{ external_id: `t-${++tracked}`, first_name: 'Ada' }] }),
  },
  {
    name: 'export request',
    format: 'message',
    needsRedis: true,
    request: () =>
      json('POST', '/users/export/segment', { segment_id: `seg-${segment++}`, fields_to_export: ['external_id'] }),
  },
  {
    name: 'export status',
    format: 'message',
    needsRedis: false,
    request: () => json('GET', `/users/export/status?object_prefix=${objectPrefix}`),
  },
  {
    name: 'catalog item (sync)',
    format: 'catalog',
    needsRedis: false,
    request: () => json('PUT', `/catalogs/${CATALOG}/items/one`, { items: [{ Name: 'first' }] }),
  },
  {
    name: 'catalog items (async)',
    format: 'catalog',
    needsRedis: 'either',
    request: () => json('PUT', `/catalogs/${CATALOG}/items`, { items: [{ id: 'two', Name: 'second' }] }),
  },
  {
    name: 'SCIM',
    format: 'scim',
    needsRedis: false,
    request: () =>
      json('GET', `/scim/v2/Users?filter=${encodeURIComponent('userName eq "nobody@example.com"')}`, undefined, {
        ...bearer(scimToken),
        'x-request-origin': ORIGIN,
      }),
  },
  { name: 'templates', format: 'message', needsRedis: false, request: () => json('GET', '/templates/email/list') },
  { name: 'segments list', format: 'message', needsRedis: false, request: () => json('GET', '/segments/list') },
  {
    name: 'preference centers',
    format: 'message',
    needsRedis: false,
    request: () => json('GET', '/preference_center/v1/list'),
  },
  {
    name: 'live activity update',
    format: 'error',
    needsRedis: true,
    request: () =>
      json('POST', '/messages/live_activity/update', {
        app_id: APP,
        activity_id: ACTIVITY,
        content_state: { score: ++score },
      }),
  },
  {
    name: 'import start',
    format: 'message',
    needsRedis: 'either',
    request: () => json('POST', '/users/import', { key: IMPORT_KEY }),
  },
  {
    name: 'import status',
    format: 'message',
    needsRedis: false,
    request: () => json('GET', `/users/import/${importId}`),
  },
  // The user-data writes take /users/track's durable path: staged in PostgreSQL, applied once Redis is back.
  {
    name: 'export by ids',
    format: 'message',
    needsRedis: false,
    request: () => json('POST', '/users/export/ids', { external_ids: ['t-1'], fields_to_export: ['external_id'] }),
  },
  {
    name: 'delete',
    format: 'message',
    needsRedis: false,
    request: () => json('POST', '/users/delete', { external_ids: [`gone-${++tracked}`] }),
  },
  {
    name: 'identify',
    format: 'message',
    needsRedis: false,
    request: () =>
      json('POST', '/users/identify', {
        aliases_to_identify: [{ external_id: `id-${++tracked}`, user_alias: { alias_name: 'a', alias_label: 'l' } }],
      }),
  },
  {
    name: 'merge',
    format: 'message',
    needsRedis: false,
    request: () =>
      json('POST', '/users/merge', {
        merge_updates: [{ identifier_to_merge: { external_id: 'a' }, identifier_to_keep: { external_id: 'b' } }],
      }),
  },
  {
    name: 'rename',
    format: 'message',
    needsRedis: false,
    request: () =>
      json('POST', '/users/external_ids/rename', {
        external_id_renames: [{ current_external_id: 'none', new_external_id: `n-${++tracked}` }],
      }),
  },
  {
    name: 'unsubscribes',
    format: 'message',
    needsRedis: false,
    request: () => json('GET', '/email/unsubscribes?start_date=2026-01-01&end_date=2026-02-01'),
  },
];

/** The error text a 503 of `format` carries. */
function errorText(format: Format, body: Record<string, unknown>): unknown {
  if (format === 'scim') {
    expect(body.schemas).toEqual([ERROR_SCHEMA]);
    expect(body.status).toBe(503);
    return body.detail;
  }
  return format === 'error' ? body.error : body.message;
}

async function expectUnavailable(sample: Sample, dependency: 'PostgreSQL' | 'Redis', or2xx = false) {
  const res = await send(sample.request());
  if (or2xx && res.statusCode >= 200 && res.statusCode < 300) return;
  expect(res.statusCode, `${sample.name}: ${res.body}`).toBe(503);
  expect(res.headers['retry-after'], sample.name).toBe('5');
  expect(errorText(sample.format, res.json()), sample.name).toBe(`${dependency} is unavailable; retry shortly`);
}

async function expectServed(sample: Sample) {
  const res = await send(sample.request());
  expect(res.statusCode, `${sample.name}: ${res.body}`).toBeGreaterThanOrEqual(200);
  expect(res.statusCode, `${sample.name}: ${res.body}`).toBeLessThan(300);
}

const linesSaying = (msg: string) => logged.filter((l) => l.msg === msg);

async function stagedRows(): Promise<number> {
  return (await env.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ingest_staging`)).rows[0]!.n;
}

describe('with PostgreSQL stopped', () => {
  it('every route family answers 503 naming PostgreSQL, in its own error format; 2xx again once it is back', async () => {
    await pgServer.stop('fast');
    down.pg = true;
    try {
      for (const sample of samples) await expectUnavailable(sample, 'PostgreSQL');
      // The cached API key (5 s) has expired by now: the same answers from the authentication step.
      await new Promise((r) => setTimeout(r, 5_100));
      for (const sample of samples) await expectUnavailable(sample, 'PostgreSQL');
    } finally {
      await pgServer.start();
      down.pg = false;
    }
    for (const sample of samples) await expectServed(sample);

    const gone = linesSaying('PostgreSQL is unavailable');
    expect(gone).toHaveLength(1);
    expect(gone[0]).toMatchObject({ level: 40, dependency: 'postgresql' });
    expect(gone[0]).not.toHaveProperty('err');
    expect(linesSaying('PostgreSQL is available again')).toHaveLength(1);
    // Requests that failed for the outage are not logged as faults, one stack each.
    expect(logged.filter((l) => l.msg === 'request failed')).toEqual([]);
  });
});

describe('with Redis killed', () => {
  it('/users/track still acknowledges and stages; routes that need Redis answer 503 naming it; the staged rows are applied once Redis is back, with no new request', async () => {
    // Everything tracked so far is applied, so what is staged next is this test's.
    await waitFor(async () => (await stagedRows()) === 0, 20_000);
    await redisServer.kill();
    down.redis = true;
    try {
      const res = await send(
        json('POST', '/users/track', { attributes: [{ external_id: 'during-redis-outage', first_name: 'Grace' }] }),
      );
      expect(res.statusCode, res.body).toBe(201);
      expect(res.json()).toEqual({ message: 'success', attributes_processed: 1 });
      expect(res.headers['x-ratelimit-limit']).toBeDefined();
      expect(await stagedRows()).toBeGreaterThan(0);

      for (const sample of samples) {
        if (sample.needsRedis) await expectUnavailable(sample, 'Redis', sample.needsRedis === 'either');
        else await expectServed(sample);
      }
    } finally {
      // Started empty: a Redis without persistence lost every job and job scheduler it held.
      await redisServer.start();
      down.redis = false;
    }

    await waitFor(async () => (await stagedRows()) === 0, 30_000, 250);
    const { rows } = await env.ctx.pool.query(
      `SELECT first_name FROM profiles WHERE workspace_id = $1 AND external_id = 'during-redis-outage'`,
      [ws.workspaceId],
    );
    expect(rows).toEqual([{ first_name: 'Grace' }]);

    for (const sample of samples) await expectServed(sample);
    const gone = linesSaying('Redis is unavailable');
    expect(gone).toHaveLength(1);
    expect(gone[0]).toMatchObject({ level: 40, dependency: 'redis' });
    expect(linesSaying('Redis is available again')).toHaveLength(1);
  });
});
