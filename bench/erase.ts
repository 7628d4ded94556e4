/**
 * Erasure benchmark (`npm run bench:erase`): POST /users/delete of 50 users at a time, applied by a real worker, in a
 * workspace that holds BENCH_KEYS (1,000,000) answered Idempotency-Keys and BENCH_LETTERS (100,000) dead letters,
 * while /users/track is under load.
 *
 * The target (issue 40): each delete of 50 users applied within 2 s, and /users/track's p99 under 100 ms meanwhile. An
 * erasure holds the workspace's whole ingestion lock while it runs (src/pipelines/ingest/apply/command-rows.ts), so
 * what it costs also delays the workspace's tracked objects; the acknowledgements do not wait for it (they only stage).
 *
 * Data, in the schema BENCH_SCHEMA (`bench_erase`) of DATABASE_URL's database, made anew on every run (a run deletes
 * its users): BENCH_USERS (100,000) users of the synthetic generator (seed 1, with their aliases, emails and phones);
 * the keys, answered at times spread over the last 23 hours (older ones are forgotten anyway), one in 20 a rename's
 * answer naming a user's external id (`{"external_ids": [...]}`), the others /users/track answers; the dead letters,
 * written by the apply's own writer (insertDeadLetters), each one to three refused events of users drawn at random; a
 * live activity token for every tenth user and consent (`opted_in`) for every fifth user's address.
 *
 * Service: `ces start` (the API and its worker child, as installed), over loopback. The users' first half is deleted,
 * 50 per request, in order; /users/track (five attributes objects of the other half's users, an Idempotency-Key each)
 * is sent at BENCH_TRACK_RATE (100) requests/s, open loop, the whole time. After BENCH_WARM_UP_SECONDS (3) the run
 * takes turns: a block of BENCH_BLOCK_SECONDS (5) with no delete, then one in which deletes are sent back to back (the
 * next once the previous is applied), BENCH_BLOCKS (6) times. A delete is timed from just before its request to its
 * command row leaving ingest_staging (applied, in the worker's transaction).
 *
 * The ceiling, same run, same users: at the start of each delete block, with the workspace's ingestion lock taken as
 * the worker takes it, PostgreSQL alone deleting the next 50 users' profile rows (`DELETE ... WHERE id = ANY`, the
 * statement every deletion makes, tombstones and cascades included; rolled back), and then the erasure's own domain
 * function (deleteProfiles with erase, from this process; rolled back). `apply / ceiling` is the figure to compare
 * between runs; `domain` tells what the copies cost beside the rows, and `apply - domain` the worker's pickup and
 * the batches of tracked objects it applies first. For /users/track, the blocks without deletes are its ceiling: the
 * p99 this machine gives the same load at the same minutes.
 * Nothing here is a test: figures depend on the machine and on what else runs on it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { mkdir } from 'node:fs/promises';
import path from 'node:path';
import { hashSecret, secretPrefix } from '../src/platform/auth/secrets.js';
import { createPool, withTransaction, type Pool } from '../src/platform/db/pool.js';
import { migrate } from '../src/platform/db/migrate.js';
import { lockWorkspaceProfiles } from '../src/profiles/write/locks.js';
import { insertDeadLetters, type DeadLetter } from '../src/pipelines/ingest/apply/dead-letters.js';
import { deleteProfiles } from '../src/profiles/commands/erase.js';
import { createRedis } from '../src/platform/redis.js';
import { generateUsers } from '../src/features/synthetic-users/generate.js';
import { cpuMeter } from './cpu.js';
import { LoadClient, requestBytes } from './load.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const USERS = Number(process.env.BENCH_USERS ?? 100_000);
const KEYS = Number(process.env.BENCH_KEYS ?? 1_000_000);
const LETTERS = Number(process.env.BENCH_LETTERS ?? 100_000);
const TRACK_RATE = Number(process.env.BENCH_TRACK_RATE ?? 100);
const BLOCK_SECONDS = Number(process.env.BENCH_BLOCK_SECONDS ?? 5);
const BLOCKS = Number(process.env.BENCH_BLOCKS ?? 6);
const WARM_UP_SECONDS = Number(process.env.BENCH_WARM_UP_SECONDS ?? 3);
const APPLY_TIMEOUT_MS = Number(process.env.BENCH_APPLY_TIMEOUT_SECONDS ?? 900) * 1000;
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_erase';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const REDIS_PREFIX = 'ces-bench-erase';
const PORT = Number(process.env.BENCH_PORT ?? 3921);
const WORK_DIR = process.env.BENCH_DIR ?? '/tmp/ces-bench-erase';
const API_KEY = 'ces_key_bench-erase-0000000000000000000000000000';
const PER_DELETE = 50;
const TARGET_APPLY_MS = 2_000;
const TARGET_TRACK_P99_MS = 100;

const log = (line: string) => console.log(`[bench:erase] ${line}`);
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

/** The workspace, its key, and the data the erasures search: made anew each run. */
async function prepare(pool: Pool): Promise<{ workspaceId: string; ids: string[] }> {
  const started = Date.now();
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await migrate(pool, SCHEMA);
  const company = (await pool.query<{ id: string }>(`INSERT INTO companies (name) VALUES ('bench') RETURNING id`))
    .rows[0]!.id;
  const workspaceId = (
    await pool.query<{ id: string }>(
      `INSERT INTO workspaces (company_id, name) VALUES ($1, 'bench-erase') RETURNING id`,
      [company],
    )
  ).rows[0]!.id;
  await pool.query(
    `INSERT INTO api_keys (workspace_id, name, key_hash, key_prefix, permissions) VALUES ($1, 'bench', $2, $3, $4)`,
    [workspaceId, hashSecret(API_KEY), secretPrefix(API_KEY), ['users.track', 'users.delete']],
  );
  await generateUsers(pool, { workspaceId, count: USERS, seed: 1 });
  const ids = (
    await pool.query<{ e: string }>(
      `SELECT external_id AS e FROM profiles WHERE workspace_id = $1 AND external_id IS NOT NULL ORDER BY id`,
      [workspaceId],
    )
  ).rows.map((r) => r.e);
  log(`${USERS.toLocaleString('en-US')} users generated in ${seconds(Date.now() - started)}`);
  await idempotencyKeys(pool, workspaceId, ids);
  await deadLetters(pool, workspaceId, ids);
  await tokensAndConsent(pool, workspaceId);
  await pool.query(`VACUUM ANALYZE`);
  log(`data ready in ${seconds(Date.now() - started)}`);
  return { workspaceId, ids };
}

async function idempotencyKeys(pool: Pool, workspaceId: string, ids: string[]): Promise<void> {
  const started = Date.now();
  const chunk = 100_000;
  for (let from = 1; from <= KEYS; from += chunk) {
    await pool.query(
      `INSERT INTO idempotency_keys (workspace_id, key, request_hash, status_code, response, created_at, completed_at)
       SELECT $1, 'bench-' || g, '\\x00'::bytea, 201,
              CASE WHEN g % 20 = 0
                   THEN jsonb_build_object('message', 'success', 'external_ids', jsonb_build_array(($2::text[])[1 + ((g::bigint * 7919) % cardinality($2::text[]))::int]), 'rename_errors', '[]'::jsonb)
                   ELSE '{"message": "success", "attributes_processed": 5, "events_processed": 5}'::jsonb END,
              now() - (g % 82800) * interval '1 second', now() - (g % 82800) * interval '1 second'
         FROM generate_series($3::int, $4::int) AS g`,
      [workspaceId, ids, from, Math.min(KEYS, from + chunk - 1)],
    );
  }
  log(`${KEYS.toLocaleString('en-US')} idempotency keys in ${seconds(Date.now() - started)}`);
}

/** Dead letters as the apply writes them: its own writer, 2,000 a statement. */
async function deadLetters(pool: Pool, workspaceId: string, ids: string[]): Promise<void> {
  const started = Date.now();
  let objects = 0;
  for (let from = 0; from < LETTERS; from += 2_000) {
    const letters: DeadLetter[] = [];
    for (let i = from; i < Math.min(LETTERS, from + 2_000); i++) {
      const events = Array.from({ length: 1 + (i % 3) }, (_, k) => ({
        identity: { type: 'external_id', value: ids[(i * 7919 + k * 104_729) % ids.length]! },
        create: true,
        name: 'played\u0000',
        time: '2026-01-01T00:00:00.000Z',
      }));
      objects += events.length;
      letters.push({
        source: 'track',
        workspaceId,
        stagedId: i + 1,
        part: 0,
        acceptedAt: new Date(Date.now() - (i % 86_400) * 1000),
        objects: events.length,
        payload: JSON.stringify({ events, purchases: [], attributes: [] }),
        error: { code: '22P05', message: 'unsupported Unicode escape sequence' },
      });
    }
    await withTransaction(pool, (client) => insertDeadLetters(client, letters));
  }
  log(
    `${LETTERS.toLocaleString('en-US')} dead letters (${objects.toLocaleString('en-US')} events) in ${seconds(Date.now() - started)}`,
  );
}

async function tokensAndConsent(pool: Pool, workspaceId: string): Promise<void> {
  const app = (
    await pool.query<{ id: string }>(
      `INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'bench-app', 'A') RETURNING id`,
      [workspaceId],
    )
  ).rows[0]!.id;
  const activity = (
    await pool.query<{ id: string }>(
      `INSERT INTO live_activities (app_id, activity_id, content_state_shape) VALUES ($1, 'match', '{}') RETURNING id`,
      [app],
    )
  ).rows[0]!.id;
  await pool.query(
    `INSERT INTO live_activity_tokens (live_activity_id, push_token, external_id)
     SELECT $1, md5(external_id), external_id FROM profiles WHERE workspace_id = $2 AND external_id IS NOT NULL AND id % 10 = 0`,
    [activity, workspaceId],
  );
  await pool.query(
    `INSERT INTO email_subscriptions (workspace_id, email, state)
     SELECT DISTINCT $1::uuid, lower(email), 'opted_in' FROM profiles WHERE workspace_id = $1 AND email IS NOT NULL AND id % 5 = 0
     ON CONFLICT DO NOTHING`,
    [workspaceId],
  );
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

function startService(): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli.ts'), 'start'], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      DOWNLOAD_URL_SECRET: 'bench-only-download-url-secret',
      DATABASE_URL,
      DATABASE_SCHEMA: SCHEMA,
      REDIS_URL,
      REDIS_PREFIX,
      PORT: String(PORT),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      LOCAL_STORE_DIR: path.join(WORK_DIR, 'bucket'),
      MIGRATE_ON_START: 'false',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

async function waitReady(): Promise<void> {
  for (const end = Date.now() + 120_000; ;) {
    const ok = await fetch(`http://127.0.0.1:${PORT}/readyz`)
      .then((r) => r.ok)
      .catch(() => false);
    if (ok) return;
    if (Date.now() > end) throw new Error('ces start did not become ready');
    await new Promise((r) => setTimeout(r, 250));
  }
}

async function unlinkRedisKeys(): Promise<void> {
  const redis = createRedis({ REDIS_URL }, 'producer', { enableOfflineQueue: true });
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', `${REDIS_PREFIX}:*`, 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
  await redis.quit();
}

type Tag = 'warm-up' | 'no delete' | 'deleting';

/** /users/track at TRACK_RATE, open loop, until stopped: each answer's latency under the tag of when it was sent. */
function trackLoad(client: LoadClient, keep: string[], tagNow: () => Tag) {
  const results: Record<Tag, { ms: number[]; failures: number }> = {
    'warm-up': { ms: [], failures: 0 },
    'no delete': { ms: [], failures: 0 },
    deleting: { ms: [], failures: 0 },
  };
  let stop = false;
  const inflight = new Set<Promise<void>>();
  const run = (async () => {
    const started = performance.now();
    for (let i = 0; !stop; i++) {
      const wait = started + (i * 1000) / TRACK_RATE - performance.now();
      await new Promise((r) => (wait > 1 ? setTimeout(r, wait) : setImmediate(r)));
      const tag = tagNow();
      const attributes = Array.from({ length: 5 }, (_, k) => ({
        external_id: keep[(i * 5 + k) % keep.length],
        bench_round: i,
      }));
      const request = requestBytes(
        'POST',
        '/users/track',
        { authorization: `Bearer ${API_KEY}`, 'idempotency-key': `bench-track-${Date.now()}-${i}` },
        JSON.stringify({ attributes }),
      );
      const p = client.send(request).then(
        (reply) => {
          if (reply.status === 201) results[tag].ms.push(reply.ms);
          else results[tag].failures++;
        },
        () => void results[tag].failures++,
      );
      inflight.add(p);
      void p.finally(() => inflight.delete(p));
    }
  })();
  return {
    results,
    async stop() {
      stop = true;
      await run;
      await Promise.all(inflight);
    },
  };
}

/** POST /users/delete of these users; resolves with the ms from the request to its command applied. */
async function deleteAndWait(pool: Pool, client: LoadClient, users: string[]): Promise<number> {
  const before = Number(
    (await pool.query<{ id: string }>(`SELECT coalesce(max(id), 0) AS id FROM ingest_staging`)).rows[0]!.id,
  );
  const started = performance.now();
  const reply = await client.send(
    requestBytes(
      'POST',
      '/users/delete',
      { authorization: `Bearer ${API_KEY}` },
      JSON.stringify({ external_ids: users }),
    ),
  );
  if (reply.status !== 202) throw new Error(`/users/delete answered ${reply.status}: ${reply.body.toString()}`);
  for (;;) {
    const left = await pool.query(`SELECT 1 FROM ingest_staging WHERE part = -1 AND id > $1 LIMIT 1`, [before]);
    if (left.rowCount === 0) return performance.now() - started;
    if (performance.now() - started > APPLY_TIMEOUT_MS) throw new Error('a delete was not applied in time');
    await new Promise((r) => setTimeout(r, 5));
  }
}

/** The ceiling and the domain function over the same 50 users, each in a rolled-back transaction holding the lock. */
async function ceilingAndDomain(pool: Pool, workspaceId: string, users: string[]): Promise<[number, number]> {
  const profileIds = (
    await pool.query<{ id: number }>(`SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = ANY($2)`, [
      workspaceId,
      users,
    ])
  ).rows.map((r) => Number(r.id));
  const timed = async (work: (client: Parameters<typeof deleteProfiles>[0]) => Promise<unknown>) => {
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await lockWorkspaceProfiles(client, [workspaceId]);
      const t = performance.now();
      await work(client);
      return performance.now() - t;
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  };
  const ceiling = await timed((c) =>
    c.query(`DELETE FROM profiles WHERE workspace_id = $1 AND id = ANY($2::bigint[])`, [workspaceId, profileIds]),
  );
  const domain = await timed((c) => deleteProfiles(c, workspaceId, profileIds, { erase: true }));
  return [ceiling, domain];
}

interface Measured {
  apply: number[];
  ceiling: number[];
  domain: number[];
  busy: number[];
}

async function blocks(pool: Pool, workspaceId: string, deletable: string[], client: LoadClient, tag: { now: Tag }) {
  const m: Measured = { apply: [], ceiling: [], domain: [], busy: [] };
  let next = 0;
  const take = () => {
    const users = deletable.slice(next, next + PER_DELETE);
    if (users.length < PER_DELETE) throw new Error('out of users to delete: raise BENCH_USERS');
    next += PER_DELETE;
    return users;
  };
  // Deletes of a block stop short of using the last users up (a fast machine), leaving each later block its first.
  const room = () => deletable.length - next >= PER_DELETE * (BLOCKS + 1);
  for (let b = 0; b < BLOCKS; b++) {
    tag.now = 'no delete';
    await new Promise((r) => setTimeout(r, BLOCK_SECONDS * 1000));
    tag.now = 'deleting';
    const meter = cpuMeter({});
    const end = performance.now() + BLOCK_SECONDS * 1000;
    const first = take();
    const [ceiling, domain] = await ceilingAndDomain(pool, workspaceId, first);
    m.ceiling.push(ceiling);
    m.domain.push(domain);
    m.apply.push(await deleteAndWait(pool, client, first));
    while (performance.now() < end && room()) m.apply.push(await deleteAndWait(pool, client, take()));
    m.busy.push(meter.stop().machineBusy);
    log(
      `block ${b + 1}/${BLOCKS}: ${m.apply.length} deletes so far; ceiling ${ceiling.toFixed(1)} ms, domain ${domain.toFixed(1)} ms, ` +
        `latest apply ${m.apply.at(-1)!.toFixed(1)} ms`,
    );
  }
  return m;
}

function report(m: Measured, track: ReturnType<typeof trackLoad>['results']) {
  const ms = (v: number) => v.toFixed(1);
  const during = track.deleting.ms;
  const quiet = track['no delete'].ms;
  const figures = {
    deletes: m.apply.length,
    'users deleted': m.apply.length * PER_DELETE,
    'apply ms p50 / max': `${ms(percentile(m.apply, 50))} / ${ms(Math.max(...m.apply))}`,
    'domain (erasure, rolled back) ms p50 / max': `${ms(percentile(m.domain, 50))} / ${ms(Math.max(...m.domain))}`,
    'ceiling (bare delete of the 50 rows) ms p50 / max': `${ms(percentile(m.ceiling, 50))} / ${ms(Math.max(...m.ceiling))}`,
    'apply / ceiling (p50)': (percentile(m.apply, 50) / percentile(m.ceiling, 50)).toFixed(1),
    'domain / ceiling (p50)': (percentile(m.domain, 50) / percentile(m.ceiling, 50)).toFixed(1),
    'track while deleting: answers, p50 / p99 / max ms': `${during.length}, ${ms(percentile(during, 50))} / ${ms(percentile(during, 99))} / ${ms(Math.max(...during))}`,
    'track without deletes: answers, p50 / p99 / max ms': `${quiet.length}, ${ms(percentile(quiet, 50))} / ${ms(percentile(quiet, 99))} / ${ms(Math.max(...quiet))}`,
    'track failures': track.deleting.failures + track['no delete'].failures,
    'machine CPU busy % while deleting': Math.round((m.busy.reduce((a, b) => a + b, 0) / m.busy.length) * 100),
  };
  for (const [k, v] of Object.entries(figures)) log(`${k}: ${v}`);
  const applyMet = Math.max(...m.apply) < TARGET_APPLY_MS;
  const trackMet = percentile(during, 99) < TARGET_TRACK_P99_MS && figures['track failures'] === 0;
  log(`target: every delete of ${PER_DELETE} applied within ${TARGET_APPLY_MS} ms: ${applyMet ? 'met' : 'NOT met'}`);
  log(`target: /users/track p99 under ${TARGET_TRACK_P99_MS} ms while deleting: ${trackMet ? 'met' : 'NOT met'}`);
  console.log(JSON.stringify({ bench: 'erase', users: USERS, keys: KEYS, letters: LETTERS, ...figures }));
}

async function main() {
  await mkdir(WORK_DIR, { recursive: true });
  const pool = createPool({ DATABASE_URL, DATABASE_SCHEMA: SCHEMA, DATABASE_POOL_SIZE: 4 });
  const client = new LoadClient('127.0.0.1', PORT);
  let service: ChildProcess | undefined;
  try {
    const { workspaceId, ids } = await prepare(pool);
    await unlinkRedisKeys();
    service = startService();
    await waitReady();
    const deletable = ids.slice(0, Math.floor(ids.length / 2));
    const keep = ids.slice(Math.floor(ids.length / 2));
    log(
      `${TRACK_RATE} /users/track requests/s throughout; ${BLOCKS} blocks of ${BLOCK_SECONDS} s without deletes, each followed ` +
        `by one of deletes of ${PER_DELETE} users back to back`,
    );
    const tag = { now: 'warm-up' as Tag };
    const track = trackLoad(client, keep, () => tag.now);
    await new Promise((r) => setTimeout(r, WARM_UP_SECONDS * 1000));
    let measured: Measured;
    try {
      measured = await blocks(pool, workspaceId, deletable, client, tag);
    } finally {
      await track.stop();
    }
    report(measured, track.results);
  } finally {
    client.close();
    if (service && service.exitCode === null) {
      service.kill('SIGTERM');
      await once(service, 'exit');
    }
    await pool.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
