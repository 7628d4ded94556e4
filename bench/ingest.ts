/**
 * Ingestion benchmark (`npm run bench:ingest`).
 *
 * Against `ces start` as a real process (the API, and its workers in a child process, as a small install runs it), with
 * Redis and PostgreSQL on the same machine, in the schema `bench_ingest` of DATABASE_URL's database (recreated each
 * run):
 *  0. loads BENCH_USERS (100,000) profiles of about 1.5 KB (attributes, custom attributes, ten event aggregates);
 *  1. latency: POST /users/track at a fixed BENCH_RATE (250) requests/s for BENCH_SECONDS, 75 events a request over
 *     the users and 20 event names, uniformly at random; p50/p99 of the acknowledgement, and the queue lag;
 *  2. throughput: as many requests as BENCH_CONNECTIONS connections carry for BENCH_SECONDS; events/s accepted, and
 *     events/s applied end to end (from the first request until every accepted event is visible in the profiles);
 *  3. bulk import of a BENCH_IMPORT_EVENTS (1,000,000) event NDJSON file through POST /users/import.
 * After each phase the events visible in the profiles are counted and compared with the events accepted, and the CPU
 * the API and worker processes and this load generator used is read from /proc, with how busy the whole machine was.
 * The ceiling, measured first in the same run: how many of these profile rows PostgreSQL alone rewrites per second,
 * in set-based statements of BENCH_CEILING_ROWS (50,000) random profiles (`UPDATE ... SET updated_at = now()`, rolled
 * back). Applying an event to a profile is at least such a rewrite, so `applied / ceiling` is the share of this
 * machine's bare row-rewrite rate that ingestion reaches end to end. The same rewrite is then timed with and without
 * the triggers that record profile writes for incremental exports (the changed_xid stamp, the change log),
 * alternating, to price each.
 * Nothing here is a test: figures depend on the machine and on what else runs on it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { once } from 'node:events';
import { hashSecret, secretPrefix } from '../src/platform/auth/secrets.js';
import { localWorkspaceDir } from '../src/platform/storage/local-store.js';
import { ConfigSchema } from '../src/platform/config.js';
import { createPool, type Pool } from '../src/platform/db/pool.js';
import { migrate } from '../src/platform/db/migrate.js';
import { createRedis } from '../src/platform/redis.js';
import { childPidRunning, cpuMeter } from './cpu.js';
import { LoadClient, requestBytes, type Reply } from './load.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const USERS = Number(process.env.BENCH_USERS ?? 100_000);
const NAMES = 20;
const RATE = Number(process.env.BENCH_RATE ?? 250);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 30);
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 16);
/** Users a request's 75 events belong to: 75 = every event a random user (the worst case for aggregation). */
const USERS_PER_REQUEST = Math.min(75, Math.max(1, Number(process.env.BENCH_USERS_PER_REQUEST ?? 75)));
/**
 * BENCH_FILLFACTOR, when set, replaces the profiles' fillfactor (60, migration 0270) before they are loaded: how much
 * page room HOT updates find (docs/ingestion.md) for batches that rewrite a large share of a small set of profiles, as
 * this bench's do.
 */
const FILLFACTOR = process.env.BENCH_FILLFACTOR
  ? Math.min(100, Math.max(10, Number(process.env.BENCH_FILLFACTOR)))
  : undefined;
const IMPORT_EVENTS = Number(process.env.BENCH_IMPORT_EVENTS ?? 1_000_000);
/** `start` (the default), or `serve` to run `ces serve` and `ces worker` apart. */
const COMMAND = process.env.BENCH_COMMAND ?? 'start';
const PHASES = (process.env.BENCH_PHASES ?? 'latency,throughput,import').split(',');
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_ingest';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PORT = Number(process.env.BENCH_PORT ?? 3917);
const WORK_DIR = process.env.BENCH_DIR ?? '/tmp/ces-bench-ingest';
/** The service's Redis key prefix (deleted after the run): another one lets two runs share a Redis. */
const REDIS_PREFIX = process.env.BENCH_REDIS_PREFIX ?? 'ces-bench-ingest';
const WARM_UP_MS = 2000;
const CEILING_ROWS = Number(process.env.BENCH_CEILING_ROWS ?? 50_000);
const API_KEY = 'ces_key_bench-ingest-0000000000000000000000000';
/** Ingestion partitions the service runs with: INGEST_PARTITIONS from the environment (passed on), or its default. */
const PARTITIONS = ConfigSchema.shape.INGEST_PARTITIONS.parse(process.env.INGEST_PARTITIONS);

const config = { DATABASE_URL, DATABASE_SCHEMA: SCHEMA, DATABASE_POOL_SIZE: 4 };

function log(line: string) {
  console.log(`[bench:ingest] ${line}`);
}

async function prepare(pool: Pool): Promise<string> {
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await migrate(pool, SCHEMA);
  if (FILLFACTOR !== undefined) await pool.query(`ALTER TABLE profiles SET (fillfactor = ${FILLFACTOR})`);
  const company = (await pool.query<{ id: string }>(`INSERT INTO companies (name) VALUES ('bench') RETURNING id`))
    .rows[0]!.id;
  const ws = (
    await pool.query<{ id: string }>(
      `INSERT INTO workspaces (company_id, name) VALUES ($1, 'bench-ingest') RETURNING id`,
      [company],
    )
  ).rows[0]!.id;
  await pool.query(
    `INSERT INTO api_keys (workspace_id, name, key_hash, key_prefix, permissions) VALUES ($1, 'bench', $2, $3, $4)`,
    [ws, hashSecret(API_KEY), secretPrefix(API_KEY), ['users.track', 'users.import']],
  );
  const started = Date.now();
  // Realistic rows: standard attributes, a few custom attributes, ten event aggregates (about 1.5 KB each).
  await pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, first_name, last_name, email, country, language,
                           time_zone, home_city, phone, custom_attributes, custom_events, attribute_times)
     SELECT $1, md5('s' || g), 'user-' || g, g % 10000, 'First' || g, 'Last' || g, 'user' || g || '@example.com', 'GB', 'en',
            'Europe/London', 'London', '+4470000' || lpad(g::text, 5, '0'),
            jsonb_build_object('plan', 'gold', 'score', g % 100, 'signup_source', 'organic-search-campaign-' || (g % 50),
                               'favourite_colour', 'blue', 'tags', jsonb_build_array('a', 'b', 'c')),
            (SELECT jsonb_object_agg('event-' || e, jsonb_build_object('name', 'event-' || e, 'first', '2023-01-01T00:00:00.000Z',
                                                                         'last', '2023-06-01T00:00:00.000Z', 'count', 3))
               FROM generate_series(0, 9) e),
            '{"first_name": "2023-01-01T00:00:00.000Z"}'
       FROM generate_series(0, $2 - 1) g`,
    [ws, USERS],
  );
  await pool.query('VACUUM ANALYZE profiles');
  const { s: size, mb } = (
    await pool.query<{ s: number; mb: number }>(
      `SELECT avg(pg_column_size(p.*))::int AS s, (pg_relation_size('profiles') / 1e6)::int AS mb FROM profiles p`,
    )
  ).rows[0]!;
  log(
    `loaded ${USERS.toLocaleString('en-US')} profiles of ${size} bytes on average in ${((Date.now() - started) / 1000).toFixed(1)} s ` +
      `(table ${mb} MB, fillfactor ${FILLFACTOR ?? 60})`,
  );
  return ws;
}

async function eventsVisible(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ n: number }>(
    `SELECT coalesce(sum((e->>'count')::bigint), 0)::bigint AS n FROM profiles p, jsonb_each(p.custom_events) AS c(name, e)`,
  );
  return rows[0]!.n;
}

/**
 * PostgreSQL alone rewriting random profile rows, set-based (the median of three statements, each rolled back and
 * vacuumed away): the machine's ceiling for any apply that rewrites a profile per event. `stamp: false` rewrites with
 * the trigger that stamps each write for incremental exports (profiles_stamp_change) disabled in that transaction,
 * to price it.
 */
async function rewriteCeiling(pool: Pool, { stamp = true, changeLog = true } = {}): Promise<number> {
  const { rows } = await pool.query<{ lo: number; hi: number }>('SELECT min(id) AS lo, max(id) AS hi FROM profiles');
  const { lo, hi } = rows[0]!;
  const rates: number[] = [];
  for (let run = 0; run < 3; run++) {
    const ids = Array.from({ length: CEILING_ROWS }, () => lo + Math.floor(Math.random() * (hi - lo + 1)));
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL synchronous_commit = off');
      if (!stamp) await client.query('ALTER TABLE profiles DISABLE TRIGGER profiles_stamp_change');
      if (!changeLog) await client.query('ALTER TABLE profiles DISABLE TRIGGER profiles_log_change');
      const started = performance.now();
      const result = await client.query('UPDATE profiles SET updated_at = now() WHERE id = ANY($1::bigint[])', [ids]);
      rates.push((result.rowCount ?? 0) / ((performance.now() - started) / 1000));
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
    await pool.query('VACUUM profiles');
  }
  return rates.sort((a, b) => a - b)[1]!;
}

/**
 * Flushes what this bench's own preparation left dirty (the profiles it loaded, the ceiling's rewrites: hundreds of
 * megabytes) before the phases, with a CHECKPOINT where the role may run one. Without it, writing them back landed
 * on the first phase: in two runs at 250 requests/s the p99 acknowledgement of the first 10 s was 338-347 ms and of
 * the next 20 s 17-47 ms. Checkpoints that the phases' own writes bring about still fall inside them.
 */
async function checkpointBeforePhases(pool: Pool): Promise<void> {
  const started = Date.now();
  try {
    await pool.query('CHECKPOINT');
    log(`CHECKPOINT before the phases took ${((Date.now() - started) / 1000).toFixed(1)} s`);
  } catch (err) {
    log(
      `no CHECKPOINT before the phases (${(err as Error).message}): the first phase also writes back the bench's preparation`,
    );
  }
}

let ceiling = Number.NaN;
/** The processes whose CPU the phases report: the service's, and this one (the load generator). */
const pids: { api?: number; worker?: number; bench?: number } = { bench: process.pid };

/** CPU figures of a phase, from a meter started at its beginning. */
function cpuFigures(meter: ReturnType<typeof cpuMeter>, requests?: number): Figures {
  const { used, machineBusy } = meter.stop();
  return {
    ...(requests === undefined
      ? { 'API CPU s': used.api!.toFixed(1) }
      : { 'API CPU ms/request': ((used.api! * 1000) / Math.max(1, requests)).toFixed(2) }),
    'worker CPU s': used.worker!.toFixed(1),
    // This process sends the load from the same two cores; its share of the machine is not the service's.
    'load generator CPU s': used.bench!.toFixed(1),
    'machine CPU busy %': Math.round(machineBusy * 100),
  };
}

interface WriteBackSample {
  checkpoints: number;
  syncMs: number;
  backendBuffers: number;
  walBytes: number;
}

/** PostgreSQL's checkpoint counters (pg_stat_bgwriter, PostgreSQL 15-16), or null where they cannot be read. */
async function writeBackSample(pool: Pool): Promise<WriteBackSample | null> {
  try {
    const { rows } = await pool.query<WriteBackSample>(
      `SELECT (checkpoints_timed + checkpoints_req)::int AS checkpoints, checkpoint_sync_time::float8 AS "syncMs", buffers_backend::float8 AS "backendBuffers",
              (SELECT wal_bytes::float8 FROM pg_stat_wal) AS "walBytes" FROM pg_stat_bgwriter`,
    );
    return rows[0] ?? null;
  } catch {
    return null;
  }
}

/**
 * What PostgreSQL's write-back did during a phase. A checkpoint ends by fsyncing every data file it wrote to; pages
 * that backends wrote themselves (buffers_backend: evicted from a shared_buffers smaller than the profiles they
 * rewrite) sit dirty in the kernel's cache until then, and that fsync held up every commit's WAL flush behind it
 * for its whole length: at 128 MB of shared_buffers, checkpoint syncs of 0.5-2.3 s, and acknowledgements waiting
 * hundreds of milliseconds.
 */
function writeBackMeter(pool: Pool) {
  const before = writeBackSample(pool);
  return async (): Promise<Figures> => {
    const [a, b] = await Promise.all([before, writeBackSample(pool)]);
    if (!a || !b) return {};
    return {
      checkpoints: b.checkpoints - a.checkpoints,
      'checkpoint sync s': ((b.syncMs - a.syncMs) / 1000).toFixed(1),
      'pages written by backends': b.backendBuffers - a.backendBuffers,
      'WAL MB': ((b.walBytes - a.walBytes) / 1e6).toFixed(0),
    };
  };
}

/**
 * The age of the oldest staged row (0 when none), read through the primary key: ids are drawn in acceptance order.
 * Cheap on purpose: a count(*) here (as before 2026-11-23) scanned tens of megabytes of staged rows, in parallel
 * workers forked for each sample, several times a second, and took the cores from the service being measured.
 */
async function oldestStagedAge(pool: Pool): Promise<number | null> {
  const { rows } = await pool.query<{ lag: number }>(
    `SELECT extract(epoch FROM now() - accepted_at)::float8 AS lag FROM ingest_staging ORDER BY id LIMIT 1`,
  );
  return rows[0]?.lag ?? null;
}

function startServer(command = COMMAND, env: Record<string, string> = {}): ChildProcess {
  // BENCH_NODE_ARGS, e.g. '--cpu-prof --cpu-prof-dir=/tmp/prof', profiles the service under load.
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, '--import', 'tsx', path.join(ROOT, 'src/cli.ts'), command], {
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
      ...env,
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  return child;
}

const load = new LoadClient('127.0.0.1', PORT);
const AUTHORIZATION = { authorization: `Bearer ${API_KEY}` };

async function post(pathname: string, body: string): Promise<{ status: number; ms: number; text: string }> {
  const reply = await load.send(requestBytes('POST', pathname, AUTHORIZATION, body));
  return { status: reply.status, ms: reply.ms, text: reply.body.toString() };
}

async function get(pathname: string): Promise<{ status: number; body: Record<string, unknown> }> {
  const res = await fetch(`http://127.0.0.1:${PORT}${pathname}`, {
    headers: { authorization: `Bearer ${API_KEY}`, 'content-type': 'application/json' },
  });
  return { status: res.status, body: (await res.json()) as Record<string, unknown> };
}

/**
 * BENCH_EVENT_TIMES: `spread` (default) gives each event a random time over 180 days (the analytics rollups' worst
 * case: nearly every event its own hourly row and a new active day of its person); `live` gives them the time the
 * requests are made, as live traffic sends them (a few counter rows per batch).
 */
const LIVE_TIMES = process.env.BENCH_EVENT_TIMES === 'live';
const base = Date.UTC(2024, 0, 1);
const eventTime = () =>
  LIVE_TIMES ? new Date().toISOString() : new Date(base + Math.floor(Math.random() * 180 * 86_400_000)).toISOString();
function randomBody(): string {
  const events = [];
  const users = Array.from({ length: USERS_PER_REQUEST }, () => `user-${Math.floor(Math.random() * USERS)}`);
  for (let i = 0; i < 75; i++) {
    events.push({
      external_id: users[i % USERS_PER_REQUEST],
      name: `event-${Math.floor(Math.random() * NAMES)}`,
      time: eventTime(),
      properties: { source: 'bench', amount: Math.round(Math.random() * 1000) / 10 },
    });
  }
  return JSON.stringify({ events });
}

// Requests are made before a phase so that the load generator, which shares the two cores, spends its time sending.
let trackRequests: Buffer[] = [];
let nextRequest = 0;
function makeTrackRequests(n: number) {
  trackRequests = Array.from({ length: n }, () => requestBytes('POST', '/users/track', AUTHORIZATION, randomBody()));
  nextRequest = 0;
}
function sendTrack(): Promise<Reply> {
  return load.send(trackRequests[nextRequest++ % trackRequests.length]!);
}

/**
 * Acknowledged /users/track requests so far as the service counts them (its ces_http_request_duration_seconds
 * histogram, from Fastify's onRequest to the reply sent): all of them, and those within 50 ms. The difference over a
 * phase tells whether the service's own p99 is under 50 ms, whatever the load generator's delay in reading replies.
 */
async function serviceAcks(): Promise<{ count: number; within50: number }> {
  const text = await fetch(`http://127.0.0.1:${PORT}/metrics`).then((r) => r.text());
  const acks = { count: 0, within50: 0 };
  for (const line of text.split('\n')) {
    if (
      !line.startsWith('ces_http_request_duration_seconds_bucket{') ||
      !line.includes('route="/users/track"') ||
      !line.includes('status="201"')
    )
      continue;
    const value = Number(line.slice(line.lastIndexOf(' ') + 1));
    if (line.includes('le="+Inf"')) acks.count += value;
    else if (line.includes('le="0.05"')) acks.within50 += value;
  }
  return acks;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;
}

/** Samples the staging backlog until stopped; returns the largest lag seen. */
function lagSampler(pool: Pool) {
  let max = 0;
  let running = true;
  const done = (async () => {
    while (running) {
      max = Math.max(max, (await oldestStagedAge(pool)) ?? 0);
      await new Promise((r) => setTimeout(r, 250));
    }
  })();
  return {
    async stop() {
      running = false;
      await done;
      return max;
    },
  };
}

async function drained(pool: Pool, timeoutMs = 600_000): Promise<number> {
  const end = Date.now() + timeoutMs;
  for (;;) {
    if ((await oldestStagedAge(pool)) === null) return performance.now();
    if (Date.now() > end) {
      const left = (await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_staging')).rows[0]!.n;
      throw new Error(`staging not drained after ${timeoutMs} ms (${left} rows left)`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
}

interface Figures {
  [k: string]: string | number;
}

async function latencyPhase(pool: Pool): Promise<Figures> {
  const before = await eventsVisible(pool);
  const latencies: number[] = [];
  // Acknowledgements of requests sent after the first WARM_UP_MS: a freshly started process answers its first few
  // hundred requests slowly while V8 compiles the hot paths, which at this rate is about 1% of a 30 s phase.
  const steady: number[] = [];
  // Acknowledgements by the 10 s window their request was sent in: where in the phase the slow ones are.
  const windows: number[][] = [];
  let failures = 0;
  const sampler = lagSampler(pool);
  const meter = cpuMeter(pids);
  const writeBack = writeBackMeter(pool);
  const acksBefore = await serviceAcks();
  const total = RATE * SECONDS;
  const started = performance.now();
  const inflight: Promise<void>[] = [];
  // Open loop: requests leave on schedule whether or not earlier ones have been answered.
  for (let i = 0; i < total; i++) {
    const due = started + (i * 1000) / RATE;
    const wait = due - performance.now();
    // Behind schedule, still let responses be read: a busy loop here would add its own delay to every latency.
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    else await new Promise((r) => setImmediate(r));
    inflight.push(
      sendTrack().then(
        (r) => {
          if (r.status !== 201) failures++;
          else {
            latencies.push(r.ms);
            if (due - started >= WARM_UP_MS) steady.push(r.ms);
            (windows[Math.floor((due - started) / 10_000)] ??= []).push(r.ms);
          }
        },
        () => void failures++,
      ),
    );
  }
  const sendSeconds = (performance.now() - started) / 1000;
  await Promise.all(inflight);
  const acksAfter = await serviceAcks();
  const end = await drained(pool);
  const maxLag = await sampler.stop();
  const after = await eventsVisible(pool);
  latencies.sort((a, b) => a - b);
  steady.sort((a, b) => a - b);
  const serviceWithin50 = (acksAfter.within50 - acksBefore.within50) / Math.max(1, acksAfter.count - acksBefore.count);
  const applied = (latencies.length * 75) / ((end - started) / 1000);
  return {
    requests: total,
    'offered req/s': Math.round(total / sendSeconds),
    failures,
    'ack p50 ms': percentile(latencies, 50).toFixed(1),
    'ack p99 ms': percentile(latencies, 99).toFixed(1),
    [`ack p99 ms after ${WARM_UP_MS / 1000} s`]: percentile(steady, 99).toFixed(1),
    'ack max ms': percentile(latencies, 100).toFixed(1),
    // 99.0% or more: the service's own p99 is under 50 ms.
    'service-side acks within 50 ms %': (serviceWithin50 * 100).toFixed(2),
    'ack p99 ms by 10 s': windows
      .map((w) =>
        percentile(
          w.sort((a, b) => a - b),
          99,
        ).toFixed(0),
      )
      .join(' / '),
    'max queue lag s': maxLag.toFixed(2),
    'events accepted': latencies.length * 75,
    'events visible': after - before,
    'applied events/s (end to end)': Math.round(applied),
    'applied / ceiling': (applied / ceiling).toFixed(2),
    ...cpuFigures(meter, total),
    ...(await writeBack()),
  };
}

async function throughputPhase(pool: Pool): Promise<Figures> {
  const before = await eventsVisible(pool);
  let accepted = 0;
  let failures = 0;
  const latencies: number[] = [];
  const sampler = lagSampler(pool);
  const meter = cpuMeter(pids);
  const writeBack = writeBackMeter(pool);
  const started = performance.now();
  const stopAt = started + SECONDS * 1000;
  await Promise.all(
    Array.from({ length: CONNECTIONS }, async () => {
      while (performance.now() < stopAt) {
        const r = await sendTrack().catch(() => null);
        if (r?.status === 201) {
          accepted += 75;
          latencies.push(r.ms);
        } else failures++;
      }
    }),
  );
  const sent = performance.now();
  const end = await drained(pool);
  const maxLag = await sampler.stop();
  const after = await eventsVisible(pool);
  latencies.sort((a, b) => a - b);
  const applied = accepted / ((end - started) / 1000);
  return {
    connections: CONNECTIONS,
    'requests/s': Math.round(latencies.length / ((sent - started) / 1000)),
    failures,
    'accepted events/s': Math.round(accepted / ((sent - started) / 1000)),
    'ack p50 ms': percentile(latencies, 50).toFixed(1),
    'ack p99 ms': percentile(latencies, 99).toFixed(1),
    'max queue lag s': maxLag.toFixed(2),
    'drain after load s': ((end - sent) / 1000).toFixed(1),
    'events accepted': accepted,
    'events visible': after - before,
    'applied events/s (end to end)': Math.round(applied),
    'applied / ceiling': (applied / ceiling).toFixed(2),
    ...cpuFigures(meter, latencies.length),
    ...(await writeBack()),
  };
}

async function importPhase(pool: Pool): Promise<Figures> {
  const ns = (
    await pool.query<{ company_id: string; id: string }>(
      `SELECT company_id, id FROM workspaces WHERE name = 'bench-ingest'`,
    )
  ).rows[0]!;
  const dir = path.join(
    localWorkspaceDir(path.join(WORK_DIR, 'bucket'), { companyId: ns.company_id, workspaceId: ns.id }),
    'imports',
  );
  await mkdir(dir, { recursive: true });
  const file = path.join(dir, 'bench.ndjson');
  const out = createWriteStream(file);
  let chunk = '';
  for (let i = 0; i < IMPORT_EVENTS; i++) {
    chunk += `{"external_id":"user-${Math.floor(Math.random() * USERS)}","name":"event-${Math.floor(Math.random() * NAMES)}","time":"${new Date(base + Math.floor(Math.random() * 180 * 86_400_000)).toISOString()}"}\n`;
    if (chunk.length > 256 * 1024) {
      if (!out.write(chunk)) await once(out, 'drain');
      chunk = '';
    }
  }
  out.end(chunk);
  await once(out, 'finish');
  const bytes = (await stat(file)).size;
  const before = await eventsVisible(pool);
  const meter = cpuMeter(pids);
  const started = performance.now();
  const res = await post('/users/import', JSON.stringify({ key: 'imports/bench.ndjson' }));
  if (res.status !== 201) throw new Error(`import refused: ${res.status} ${res.text}`);
  const id = (JSON.parse(res.text) as { import_id: string }).import_id;
  let status: Record<string, unknown> = {};
  for (;;) {
    status = (await get(`/users/import/${id}`)).body;
    if (status.status === 'completed' || status.status === 'failed') break;
    await new Promise((r) => setTimeout(r, 200));
  }
  const seconds = (performance.now() - started) / 1000;
  const after = await eventsVisible(pool);
  return {
    'file MB': (bytes / 1e6).toFixed(1),
    status: String(status.status),
    'events applied': Number(status.events_applied),
    'events visible': after - before,
    seconds: seconds.toFixed(1),
    'events/s': Math.round(Number(status.events_applied) / seconds),
    'events/s / ceiling': (Number(status.events_applied) / seconds / ceiling).toFixed(2),
    ...cpuFigures(meter),
  };
}

/**
 * What recording profile writes for incremental exports costs the rewrite ceiling: rewrites with and without the
 * trigger that stamps changed_xid (migration 0170), and with and without the row trigger that writes the change log
 * (profile_changes, migration 0240) for writes outside ingestion's own set-based logging, alternating
 * (BENCH_STAMP_ROUNDS, default 2, of three statements each), medians compared. Ingestion's own logging is priced by
 * `npm run bench:change-log`; the end-to-end price is bench:ingest run against the commit before, alternating
 * (BENCHMARKS.md).
 */
async function priceWriteStamp(pool: Pool): Promise<void> {
  const rounds = Number(process.env.BENCH_STAMP_ROUNDS ?? 2);
  if (rounds <= 0) return;
  const variants = {
    all: { stamp: true, changeLog: true },
    noStamp: { stamp: false, changeLog: true },
    noLog: { stamp: true, changeLog: false },
  };
  const rates: Record<keyof typeof variants, number[]> = { all: [], noStamp: [], noLog: [] };
  for (let r = 0; r < rounds; r++) {
    for (const [name, options] of Object.entries(variants) as Array<[keyof typeof variants, (typeof variants)['all']]>)
      rates[name].push(await rewriteCeiling(pool, options));
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const line = (what: string, without: keyof typeof variants) =>
    log(
      `${what}: ${Math.round(median(rates.all)).toLocaleString('en-US')} rows/s with it, ${Math.round(median(rates[without])).toLocaleString('en-US')} without ` +
        `(ratio ${(median(rates.all) / median(rates[without])).toFixed(2)}; medians of ${rounds} alternating rounds; with: ${rates.all.map(Math.round).join(', ')}; ` +
        `without: ${rates[without].map(Math.round).join(', ')})`,
    );
  line('write stamp (changed_xid trigger)', 'noStamp');
  line('change log (profile_changes row trigger, as writes outside ingestion meet it)', 'noLog');
}

/**
 * BENCH_EVENT_LOG_AB (e.g. `off,on,on,off`): instead of the phases, the throughput phase once per entry, each against a
 * freshly started `ces start` with the event log written (`on`) or not (`off`: CES_BENCH_EVENT_LOG=off, a switch that
 * exists for this benchmark only, src/profiles/event-log.ts), in that order on the same profiles; then each side's
 * median of applied events/s and their ratio (issue 42: on / off >= 0.9). Rows the log gained in each run are printed,
 * to show which side wrote it.
 */
const EVENT_LOG_VARIANTS: Record<string, Record<string, string>> = {
  on: {},
  off: { CES_BENCH_EVENT_LOG: 'off' },
  // The log written without the analytics rollups its statement keeps (issue 43 prices them: on / log).
  log: { CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS: '1' },
};
const EVENT_LOG_AB = (process.env.BENCH_EVENT_LOG_AB ?? '').split(',').filter((v) => v in EVENT_LOG_VARIANTS);

async function eventLogAB(pool: Pool): Promise<void> {
  const applied: Record<string, number[]> = { on: [], off: [], log: [] };
  makeTrackRequests(20_000);
  await checkpointBeforePhases(pool);
  for (const variant of EVENT_LOG_AB) {
    const child = startServer('start', EVENT_LOG_VARIANTS[variant]);
    try {
      const ready = Date.now() + 60_000;
      while (
        !(await fetch(`http://127.0.0.1:${PORT}/readyz`).then(
          (r) => r.ok,
          () => false,
        ))
      ) {
        if (Date.now() > ready) throw new Error('ces start did not become ready');
        await new Promise((r) => setTimeout(r, 200));
      }
      pids.api = child.pid;
      pids.worker = childPidRunning(child.pid!, 'worker');
      const logged = async () =>
        (await pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM event_log`)).rows[0]!.n;
      const before = await logged();
      const figures = await throughputPhase(pool);
      const rate = Number(figures['applied events/s (end to end)']);
      applied[variant]!.push(rate);
      log(
        `event log ${variant}: applied ${rate.toLocaleString('en-US')} events/s (accepted ${figures['events accepted']}, ` +
          `visible ${figures['events visible']}, logged ${(await logged()) - before}); machine ${figures['machine CPU busy %']}% busy, ` +
          `API ${figures['API CPU s']} CPU s, worker ${figures['worker CPU s']}, load generator ${figures['load generator CPU s']}` +
          `, checkpoints ${figures['checkpoints'] ?? '?'}, WAL ${figures['WAL MB'] ?? '?'} MB`,
      );
    } finally {
      child.kill('SIGTERM');
      await once(child, 'exit');
    }
  }
  const median = (xs: number[]) => {
    const sorted = [...xs].sort((a, b) => a - b);
    return Math.round((sorted[Math.floor((xs.length - 1) / 2)]! + sorted[Math.floor(xs.length / 2)]!) / 2);
  };
  const ratio = (a: string, b: string, target: string) => {
    if (applied[a]!.length === 0 || applied[b]!.length === 0) return;
    log(
      `${a} / ${b}: ${(median(applied[a]!) / median(applied[b]!)).toFixed(2)} (medians ${median(applied[a]!)} / ` +
        `${median(applied[b]!)}; ${a}: ${applied[a]!.join(', ')}; ${b}: ${applied[b]!.join(', ')}; ${target})`,
    );
  };
  // on: log and rollups; log: the log alone; off: neither.
  ratio('on', 'off', 'issues 42 and 43 together: >= 0.9 x 0.95');
  ratio('log', 'off', 'issue 42, the event log: >= 0.9');
  ratio('on', 'log', 'issue 43, the analytics rollups: >= 0.95');
}

async function main() {
  await rm(WORK_DIR, { recursive: true, force: true });
  await mkdir(WORK_DIR, { recursive: true });
  const pool = createPool(config);
  const server: { child?: ChildProcess; worker?: ChildProcess } = {};
  try {
    await prepare(pool);
    ceiling = await rewriteCeiling(pool);
    log(
      `ceiling: PostgreSQL alone rewrites ${Math.round(ceiling).toLocaleString('en-US')} profile rows/s (set-based UPDATE of ${CEILING_ROWS.toLocaleString('en-US')} random profiles, median of 3)`,
    );
    await priceWriteStamp(pool);
    if (EVENT_LOG_AB.length > 0) {
      await eventLogAB(pool);
      return;
    }
    server.child = startServer();
    if (COMMAND === 'serve') {
      server.worker = startServer('worker');
      if (process.env.BENCH_WORKER_NICE) os.setPriority(server.worker.pid!, Number(process.env.BENCH_WORKER_NICE));
    }
    const ready = Date.now() + 60_000;
    for (;;) {
      const ok = await fetch(`http://127.0.0.1:${PORT}/readyz`)
        .then((r) => r.ok)
        .catch(() => false);
      if (ok) break;
      if (Date.now() > ready) throw new Error('ces start did not become ready');
      await new Promise((r) => setTimeout(r, 200));
    }
    pids.api = server.child.pid;
    // `ces start` runs its workers in a child process; `ces serve` has none (BENCH_COMMAND=serve starts `ces worker`
    // apart).
    pids.worker = server.worker?.pid ?? childPidRunning(server.child.pid!, 'worker');
    log(
      `ces ${COMMAND} is up on :${PORT}; phases: ${PHASES.join(', ')}; ${USERS_PER_REQUEST} user(s) per request; ${PARTITIONS} ingestion partition(s)` +
        // bench/analytics.ts prices the analytics rollups by alternating runs with them skipped (benchmarks only).
        (process.env.CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS === '1' ? '; analytics rollups SKIPPED' : ''),
    );
    // The server settings that move these figures most (WAL volume and flushes, buffer cache), to read them by.
    const settings = await pool.query<{ name: string; value: string }>(
      `SELECT name, current_setting(name) AS value FROM pg_settings
        WHERE name IN ('shared_buffers', 'max_wal_size', 'checkpoint_timeout', 'wal_compression', 'synchronous_commit') ORDER BY name`,
    );
    log(`PostgreSQL (${DATABASE_URL}): ${settings.rows.map((r) => `${r.name}=${r.value}`).join(', ')}`);
    await checkpointBeforePhases(pool);
    const results: Record<string, Figures> = {};
    if (PHASES.includes('latency')) {
      log(`latency: ${RATE} requests/s of 75 events for ${SECONDS} s`);
      makeTrackRequests(RATE * SECONDS);
      results.latency = await latencyPhase(pool);
      console.table(results.latency);
    }
    if (PHASES.includes('throughput')) {
      log(`throughput: ${CONNECTIONS} connections for ${SECONDS} s`);
      makeTrackRequests(20_000);
      results.throughput = await throughputPhase(pool);
      console.table(results.throughput);
    }
    if (PHASES.includes('import')) {
      log(`bulk import: ${IMPORT_EVENTS.toLocaleString('en-US')} events (NDJSON)`);
      results.import = await importPhase(pool);
      console.table(results.import);
    }
    console.log(
      JSON.stringify({
        users: USERS,
        names: NAMES,
        usersPerRequest: USERS_PER_REQUEST,
        partitions: PARTITIONS,
        ceilingRowsPerSecond: Math.round(ceiling),
        ...results,
      }),
    );
  } finally {
    for (const child of [server.child, server.worker]) {
      if (child && child.exitCode === null) {
        child.kill('SIGTERM');
        await once(child, 'exit');
      }
    }
    load.close();
    if (!process.env.BENCH_KEEP) await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
    await pool.end();
    if (!process.env.BENCH_KEEP) await rm(WORK_DIR, { recursive: true, force: true });
    const redis = createRedis({ REDIS_URL }, 'producer', { enableOfflineQueue: true });
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `${REDIS_PREFIX}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await redis.unlink(...keys);
    } while (cursor !== '0');
    await redis.quit();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
