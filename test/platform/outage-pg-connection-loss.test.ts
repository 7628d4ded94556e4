import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { entries, type AggregateEntry } from '../helpers/aggregates.js';
import { waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { createSegment } from '../helpers/export-fixtures.js';
import { startOwnPostgres, type OwnPostgres } from '../helpers/own-servers.js';
import { ERROR_SCHEMA, ORIGIN } from '../helpers/scim.js';
import { bearer, createScimToken, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.js';

/**
 * PostgreSQL going away while requests are inside each place that talks to it: the idempotency key claim, the
 * staging insert of /users/track, a read, SCIM, a catalog write. Whatever the loss looks like to the client (a
 * connection reset at connect or mid-query, `57P01` from pg_terminate_backend, a real fast or immediate stop), the
 * answer is 503 with Retry-After in the route family's error body, never 500, and the rejected request changed
 * nothing. The app reaches PostgreSQL through a TCP proxy of the test's, which resets connections as a dying peer
 * does (`read ECONNRESET`, no address); the server behind it is the test's own, stopped for real in the load test.
 */

let server: OwnPostgres;
let proxy: TcpProxy;
let env: TestEnv;
let ws: SeededWorkspace;
let scimToken: string;
/** A dashboard user the SCIM group place adds as a member. */
let memberId: string;
/** A connection of the test's own, straight to the server: it holds locks and terminates backends. */
let admin: pg.Client;
const logged: Array<Record<string, unknown>> = [];

const CATALOG = 'restaurants';

beforeAll(async () => {
  server = await startOwnPostgres();
  proxy = await startTcpProxy(server.port);
  const proxied = new URL(server.url);
  proxied.port = String(proxy.port);
  env = await createTestEnv(
    // A short connect timeout: a request waiting for a connection the proxy refuses fails in seconds, not ten.
    { DATABASE_URL: proxied.toString(), DATABASE_CONNECT_TIMEOUT_MS: '3000', LOG_LEVEL: 'info' },
    { logDestination: { write: (line: string) => void logged.push(JSON.parse(line) as Record<string, unknown>) } },
  );
  const pool = env.ctx.pool;
  ws = await seedWorkspace(pool);
  scimToken = await createScimToken(pool, ws.companyId);
  memberId = (
    await pool.query<{ id: string }>(
      `INSERT INTO dashboard_users (company_id, user_name, given_name, family_name) VALUES ($1, 'member@example.com', 'M', 'E') RETURNING id::text`,
      [ws.companyId],
    )
  ).rows[0]!.id;
  await createSegment(pool, ws.workspaceId, 'seg-a');
  await pool.query(
    `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, $2, '[{"name": "Name", "type": "string"}]'::jsonb)`,
    [ws.workspaceId, CATALOG],
  );
  admin = await connectAdmin();
}, 60_000);

async function connectAdmin(): Promise<pg.Client> {
  const client = new pg.Client({
    connectionString: server.url,
    options: `-c search_path=${env.config.DATABASE_SCHEMA}`,
  });
  // The stops below end it; it is connected again afterwards.
  client.on('error', () => {});
  await client.connect();
  return client;
}

afterAll(async () => {
  await admin?.end().catch(() => {});
  await env?.close();
  await proxy?.close();
  await server?.close();
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

type Format = 'message' | 'scim' | 'catalog';

interface Place {
  name: string;
  /** The table the request is inside of when it waits on the test's lock. */
  table: string;
  format: Format;
  request: (n: number) => InjectOptions;
  /** Rows that an applied request would have left: must be 0 after a refused one. */
  leftBy: (n: number) => Promise<number>;
}

const count = async (sql: string, params: unknown[]) => (await admin.query<{ n: number }>(sql, params)).rows[0]!.n;

const places: Place[] = [
  {
    name: 'the idempotency key claim',
    table: 'idempotency_keys',
    format: 'message',
    request: (n) => ({
      ...json('POST', '/users/track', { attributes: [{ external_id: `claim-${n}`, first_name: 'Ada' }] }),
      headers: { ...bearer(ws.apiKey), 'content-type': 'application/json', 'idempotency-key': `claim-${n}` },
    }),
    leftBy: (n) => count(`SELECT count(*)::int AS n FROM idempotency_keys WHERE key = $1`, [`claim-${n}`]),
  },
  {
    name: 'the staging insert',
    table: 'ingest_staging',
    format: 'message',
    request: (n) => json('POST', '/users/track', { attributes: [{ external_id: `staged-${n}`, first_name: 'Ada' }] }),
    // No worker runs in these tests: what the insert staged would still be there.
    leftBy: (n) => count(`SELECT count(*)::int AS n FROM ingest_staging WHERE payload LIKE $1`, [`%"staged-${n}"%`]),
  },
  {
    name: 'a read',
    table: 'segments',
    format: 'message',
    request: () => json('GET', '/segments/list'),
    leftBy: async () => 0,
  },
  {
    name: 'SCIM',
    table: 'dashboard_users',
    format: 'scim',
    request: (n) => json('POST', '/scim/v2/Users', scimUser(n), { ...bearer(scimToken), 'x-request-origin': ORIGIN }),
    leftBy: (n) =>
      count(`SELECT count(*)::int AS n FROM dashboard_users WHERE user_name = $1`, [`scim-${n}@example.com`]),
  },
  {
    // Inside the transaction of a group's create, after its row: the group must not survive without its members.
    name: 'a SCIM group membership',
    table: 'scim_group_members',
    format: 'scim',
    request: (n) =>
      json(
        'POST',
        '/scim/v2/Groups',
        {
          schemas: ['urn:ietf:params:scim:schemas:core:2.0:Group'],
          displayName: `group-${n}`,
          members: [{ value: memberId }],
        },
        {
          ...bearer(scimToken),
          'x-request-origin': ORIGIN,
        },
      ),
    leftBy: (n) =>
      count(
        `SELECT ((SELECT count(*) FROM scim_groups WHERE display_name = $1) + (SELECT count(*) FROM dashboard_user_audit WHERE changes::text LIKE $2))::int AS n`,
        [`group-${n}`, `%"group-${n}"%`],
      ),
  },
  {
    name: 'a catalog write',
    table: 'catalog_items',
    format: 'catalog',
    request: (n) => json('PUT', `/catalogs/${CATALOG}/items/item-${n}`, { items: [{ Name: `item ${n}` }] }),
    leftBy: (n) => count(`SELECT count(*)::int AS n FROM catalog_items WHERE item_id = $1`, [`item-${n}`]),
  },
];

function scimUser(n: number) {
  return {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
    userName: `scim-${n}@example.com`,
    name: { givenName: 'Ada', familyName: 'Lovelace' },
    department: 'finance',
    permissions: { companyPermissions: ['manage_company_settings'] },
  };
}

function errorText(format: Format, res: LightMyRequestResponse): unknown {
  const body = res.json() as Record<string, unknown>;
  if (format === 'scim') {
    expect(body.schemas).toEqual([ERROR_SCHEMA]);
    expect(body.status).toBe(503);
    return body.detail;
  }
  return body.message;
}

function expectUnavailable(place: Place, res: LightMyRequestResponse) {
  expect(res.statusCode, `${place.name}: ${res.body}`).toBe(503);
  expect(res.headers['retry-after'], place.name).toBe('5');
  expect(errorText(place.format, res), place.name).toBe('PostgreSQL is unavailable; retry shortly');
}

/** Sends `request` while the test holds an exclusive lock on `table`, and returns once the request waits on it. */
async function insideTable(
  table: string,
  request: InjectOptions,
): Promise<{ answer: Promise<LightMyRequestResponse>; pid: number; release: () => Promise<void> }> {
  await admin.query('BEGIN');
  await admin.query(`LOCK TABLE ${table} IN ACCESS EXCLUSIVE MODE`);
  const answer = send(request);
  let pid = 0;
  let answered: string | undefined;
  void answer.then((r) => (answered = `${r.statusCode} ${r.body}`));
  await waitFor(
    async () => {
      if (answered) throw new Error(`answered before waiting on the lock: ${answered}`);
      // Inside a transaction the activity view is a snapshot taken at its first read: cleared, it shows what is now.
      await admin.query('SELECT pg_stat_clear_snapshot()');
      const { rows } = await admin.query<{ pid: number }>(
        `SELECT pid FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND pid <> pg_backend_pid() AND datname = current_database()`,
      );
      pid = rows[0]?.pid ?? 0;
      return pid !== 0;
    },
    10_000,
    10,
  );
  return { answer, pid, release: async () => void (await admin.query('ROLLBACK')) };
}

/** Every request of the app from now on needs a new connection (the pool's are reset), and the proxy resets it. */
async function withConnectsReset<T>(fn: () => Promise<T>): Promise<T> {
  proxy.resetNew = true;
  proxy.resetOpen();
  try {
    return await fn();
  } finally {
    proxy.resetNew = false;
  }
}

let n = 0;

describe('PostgreSQL lost while a request is inside each place that talks to it', () => {
  beforeAll(async () => {
    // The credentials are looked up (and cached for a few seconds) first, so that each request's first query is the
    // place under test.
    for (const place of places) {
      const res = await send(place.request(++n));
      expect(res.statusCode, `${place.name}: ${res.body}`).toBeLessThan(300);
    }
  });

  for (const place of places) {
    it(`${place.name}: a reset of every new connection answers 503, changes nothing, then serves`, async () => {
      const mine = ++n;
      const res = await withConnectsReset(() => send(place.request(mine)));
      expectUnavailable(place, res);
      expect(await place.leftBy(mine)).toBe(0);
      const again = await send(place.request(mine));
      expect(again.statusCode, `${place.name}: ${again.body}`).toBeLessThan(300);
    });

    // What the server did with a statement whose client vanished is unknowable to that client (the backend, waiting
    // on the lock, commits it once it gets the lock): the answer is 503, and a retry with an Idempotency-Key is safe.
    it(`${place.name}: a reset of its connection mid-query answers 503`, async () => {
      const inside = await insideTable(place.table, place.request(++n));
      proxy.resetOpen();
      await inside.release();
      expectUnavailable(place, await inside.answer);
    });

    it(`${place.name}: pg_terminate_backend of its backend mid-query (57P01) answers 503 and changes nothing`, async () => {
      const mine = ++n;
      const inside = await insideTable(place.table, place.request(mine));
      await admin.query('SELECT pg_terminate_backend($1)', [inside.pid]);
      await inside.release();
      expectUnavailable(place, await inside.answer);
      expect(await place.leftBy(mine)).toBe(0);
    });
  }

  it('logs none of these losses as a fault with a stack', () => {
    expect(logged.filter((l) => l.msg === 'request failed')).toEqual([]);
  });
});

describe('/users/track under a steady load while PostgreSQL stops 5 times fast and 5 times immediately', () => {
  it('no request answers 500, and every acknowledged event is stored exactly once', async () => {
    const workers = env.startWorkers([trackIngestJob]);
    const EVENTS = 75;
    const NAMES = 5;
    /** What each acknowledged request stored: 15 of each of 5 names for its own user. */
    const acknowledged = new Set<string>();
    const statuses = new Map<number, number>();
    const fivehundreds: string[] = [];
    let stop = false;
    let sent = 0;

    const track = async (user: string, idempotent: boolean): Promise<void> => {
      const events = Array.from({ length: EVENTS }, (_, i) => ({
        external_id: user,
        name: `e${i % NAMES}`,
        time: new Date(Date.UTC(2025, 0, 1, 0, 0, i)).toISOString(),
      }));
      // A client with an Idempotency-Key retries a refusal with the same key until it is acknowledged; one without
      // gives up on its first refusal (its events may then be stored or not, never twice).
      for (;;) {
        sent++;
        const res = await send({
          method: 'POST',
          url: '/users/track',
          headers: {
            ...bearer(ws.apiKey),
            'content-type': 'application/json',
            ...(idempotent ? { 'idempotency-key': `load-${user}` } : {}),
          },
          payload: JSON.stringify({ events }),
        }).catch((err: unknown) => ({ statusCode: 0, body: String(err) }) as LightMyRequestResponse);
        statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
        if (res.statusCode >= 500 && res.statusCode !== 503) fivehundreds.push(`${res.statusCode} ${res.body}`);
        if (res.statusCode === 201) {
          acknowledged.add(user);
          return;
        }
        if (!idempotent || stop) return;
        await new Promise((r) => setTimeout(r, 200));
      }
    };

    // About 25 requests a second, half of them with an Idempotency-Key.
    const clients = Array.from({ length: 4 }, (_, c) =>
      (async () => {
        for (let i = 0; !stop; i++) {
          await track(`load-${c}-${i}`, i % 2 === 0);
          await new Promise((r) => setTimeout(r, 120));
        }
      })(),
    );
    try {
      for (const mode of [
        'fast',
        'fast',
        'fast',
        'fast',
        'fast',
        'immediate',
        'immediate',
        'immediate',
        'immediate',
        'immediate',
      ] as const) {
        await new Promise((r) => setTimeout(r, 700));
        await server.stop(mode);
        await new Promise((r) => setTimeout(r, 300));
        await server.start();
      }
      await new Promise((r) => setTimeout(r, 1_000));
    } finally {
      stop = true;
      await Promise.all(clients);
    }
    await admin.end().catch(() => {});
    admin = await connectAdmin();

    expect(fivehundreds).toEqual([]);
    expect(acknowledged.size).toBeGreaterThan(50);
    expect(statuses.get(503) ?? 0, 'the stops were seen by some requests').toBeGreaterThan(0);

    await waitFor(async () => (await count(`SELECT count(*)::int AS n FROM ingest_staging`, [])) === 0, 60_000, 250);
    const { rows } = await admin.query<{ external_id: string; custom_events: Record<string, AggregateEntry> }>(
      `SELECT external_id, custom_events FROM profiles WHERE workspace_id = $1 AND external_id LIKE 'load-%'`,
      [ws.workspaceId],
    );
    const stored = new Map(rows.map((r) => [r.external_id, entries(r.custom_events)!]));
    for (const user of acknowledged) {
      expect(
        stored.get(user)?.map((e) => e.count),
        user,
      ).toEqual(Array(NAMES).fill(EVENTS / NAMES));
    }
    // Refused requests without a key: stored whole or not at all, never twice, never in part.
    for (const [user, stored1] of stored) {
      if (acknowledged.has(user)) continue;
      expect(
        stored1.map((e) => e.count),
        user,
      ).toEqual(Array(NAMES).fill(EVENTS / NAMES));
    }
    await workers.close(5_000);
    console.warn(
      `track under PostgreSQL stops: ${sent} requests, statuses ${JSON.stringify(Object.fromEntries(statuses))}`,
    );
  }, 240_000);
});
