/**
 * Event-stream delivery lag (`npm run bench:events-lag`, issue 42 "Speed and scale"): a steady BENCH_LAG_RATE (20,000)
 * events/s for BENCH_LAG_SECONDS (300), one NDJSON event export with flush_seconds BENCH_LAG_FLUSH_SECONDS (60) and
 * max_events_per_file 15,000 to the built-in local store, delivered by the real workers while the events arrive.
 *
 * BENCH_LAG_SOURCE picks where the events come from:
 *  - `api` (the default): `ces start` (the API and its workers' child process, as bench:ingest runs it), open loop of
 *    POST /users/track requests of 75 custom events over BENCH_USERS (10,000) profiles; an event is accepted when its
 *    request is answered 201;
 *  - `log`: `ces worker` alone, and this process inserting into event_log directly (a COPY of a tenth of a second's
 *    events every 100 ms, each its own transaction): the delivery at the rate, without the API and the apply on the
 *    same two cores. Labelled as such in the output: it is not acceptance through the API.
 * Each event carries the time its request (or COPY) was sent, `properties.sent` (ms). When the load ends, the bench waits
 * until every logged event is in a written file, then reads every file of the bucket back (gunzip, JSON.parse) and
 * prints: events accepted, logged, in files, distinct ids in files (each accepted event in exactly one file: all four
 * equal), and the lag from sending to the file written (the file's mtime): p50, p99 (target < 90 s) and max. The
 * lag counts from the send, so it includes the acknowledgement and the apply: an upper bound of acceptance-to-file.
 * Nothing here is a test: figures depend on the machine and on what else runs on it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { readdir, readFile, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { hashSecret, secretPrefix } from '../src/platform/auth/secrets.js';
import { createPool, type Pool } from '../src/platform/db/pool.js';
import { migrate } from '../src/platform/db/migrate.js';
import { createRedis } from '../src/platform/redis.js';
import { childPidRunning, cpuMeter } from './cpu.js';
import { LoadClient, requestBytes } from './load.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const RATE = Number(process.env.BENCH_LAG_RATE ?? 20_000);
const SECONDS = Number(process.env.BENCH_LAG_SECONDS ?? 300);
const FLUSH_SECONDS = Number(process.env.BENCH_LAG_FLUSH_SECONDS ?? 60);
const SOURCE = process.env.BENCH_LAG_SOURCE === 'log' ? 'log' : 'api';
const USERS = Number(process.env.BENCH_USERS ?? 10_000);
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_events_lag';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PORT = Number(process.env.BENCH_PORT ?? 3918);
const WORK_DIR = process.env.BENCH_DIR ?? '/tmp/ces-bench-events-lag';
const API_KEY = 'ces_key_bench-events-lag-00000000000000000000';
const EVENTS_PER_REQUEST = 75;
const log = (line: string) => console.log(`[bench:events-lag] ${line}`);

async function prepare(pool: Pool): Promise<{ ws: string; exportId: string }> {
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await migrate(pool, SCHEMA);
  const company = (await pool.query<{ id: string }>(`INSERT INTO companies (name) VALUES ('bench') RETURNING id`))
    .rows[0]!.id;
  const ws = (
    await pool.query<{ id: string }>(
      `INSERT INTO workspaces (company_id, name) VALUES ($1, 'bench-lag') RETURNING id`,
      [company],
    )
  ).rows[0]!.id;
  await pool.query(
    `INSERT INTO api_keys (workspace_id, name, key_hash, key_prefix, permissions) VALUES ($1, 'bench', $2, $3, $4)`,
    [ws, hashSecret(API_KEY), secretPrefix(API_KEY), ['users.track']],
  );
  await pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket)
     SELECT $1, md5('s' || g), 'user-' || g, g % 10000 FROM generate_series(0, $2 - 1) g`,
    [ws, USERS],
  );
  await pool.query('VACUUM ANALYZE profiles');
  const exportId = randomUUID();
  await pool.query(
    `INSERT INTO event_exports (id, workspace_id, name, format, flush_seconds, max_events_per_file)
     VALUES ($1, $2, 'bench lag', 'ndjson', $3, 15000)`,
    [exportId, ws, FLUSH_SECONDS],
  );
  return { ws, exportId };
}

function startService(command: 'start' | 'worker'): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli.ts'), command], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      DOWNLOAD_URL_SECRET: 'bench-only-download-url-secret',
      DATABASE_URL,
      DATABASE_SCHEMA: SCHEMA,
      REDIS_URL,
      REDIS_PREFIX: 'ces-bench-events-lag',
      PORT: String(PORT),
      WORKER_METRICS_PORT: String(PORT + 7),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      LOCAL_STORE_DIR: path.join(WORK_DIR, 'bucket'),
      MIGRATE_ON_START: 'false',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

async function waitReady(): Promise<void> {
  const end = Date.now() + 60_000;
  while (
    !(await fetch(`http://127.0.0.1:${PORT}/readyz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > end) throw new Error('ces start did not become ready');
    await new Promise((r) => setTimeout(r, 200));
  }
}

function trackBody(sent: number): string {
  const events = [];
  for (let i = 0; i < EVENTS_PER_REQUEST; i++)
    events.push({
      external_id: `user-${Math.floor(Math.random() * USERS)}`,
      name: `event-${i % 20}`,
      time: new Date(sent).toISOString(),
      properties: { sent, page: `/item/${Math.floor(Math.random() * 1000)}` },
    });
  return JSON.stringify({ events });
}

/** Open loop through the API: requests leave on schedule whether or not earlier ones were answered. */
async function loadThroughApi(): Promise<{ accepted: number; failures: number }> {
  const client = new LoadClient('127.0.0.1', PORT);
  const auth = { authorization: `Bearer ${API_KEY}` };
  const perSecond = RATE / EVENTS_PER_REQUEST;
  const total = Math.round(perSecond * SECONDS);
  const started = performance.now();
  let accepted = 0;
  let failures = 0;
  const inflight: Promise<void>[] = [];
  for (let i = 0; i < total; i++) {
    const wait = started + (i * 1000) / perSecond - performance.now();
    await new Promise((r) => (wait > 1 ? setTimeout(r, wait) : setImmediate(r)));
    const request = requestBytes('POST', '/users/track', auth, trackBody(Date.now()));
    inflight.push(
      client.send(request).then(
        (r) => void (r.status === 201 ? (accepted += EVENTS_PER_REQUEST) : failures++),
        () => void failures++,
      ),
    );
  }
  log(`sent ${total} requests in ${((performance.now() - started) / 1000).toFixed(1)} s (${SECONDS} s planned)`);
  await Promise.all(inflight);
  client.close();
  return { accepted, failures };
}

/** Inserting into the log directly: a COPY of a tenth of a second's events every 100 ms, each its own transaction. */
async function loadIntoLog(ws: string): Promise<{ accepted: number; failures: number }> {
  const client = new pg.Client({ connectionString: DATABASE_URL, options: `-c search_path=${SCHEMA},public` });
  await client.connect();
  const perTick = Math.round(RATE / 10);
  const started = performance.now();
  let accepted = 0;
  for (let tick = 0; tick < SECONDS * 10; tick++) {
    const wait = started + tick * 100 - performance.now();
    if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    const sent = Date.now();
    let chunk = '';
    for (let i = 0; i < perTick; i++) {
      const user = Math.floor(Math.random() * USERS);
      chunk += `${ws}\t${randomUUID()}\tusers.behaviors.CustomEvent\t${new Date(sent).toISOString()}\t\\N\t${user.toString(16).padStart(24, '0')}\tuser-${user}\t\\N\tevent-${i % 20}\t{"sent": ${sent}, "page": "/item/${i % 1000}"}\n`;
    }
    const copy = client.query(
      copyFrom(
        `COPY event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, app_id, name, properties) FROM STDIN`,
      ),
    );
    await new Promise<void>((resolve, reject) => {
      copy.on('finish', resolve);
      copy.on('error', reject);
      copy.end(chunk);
    });
    accepted += perTick;
  }
  log(`inserted for ${((performance.now() - started) / 1000).toFixed(1)} s (${SECONDS} s planned)`);
  await client.end();
  return { accepted, failures: 0 };
}

/**
 * Waits until every accepted event is logged and every logged event of the workspace is in a written file (or 15
 * minutes): through the API, accepted events wait in staging until the apply logs them.
 */
async function delivered(
  pool: Pool,
  ws: string,
  exportId: string,
  accepted: number,
): Promise<{ logged: number; inFiles: number }> {
  const end = Date.now() + 900_000;
  for (;;) {
    const { rows } = await pool.query<{ logged: number; in_files: number; unwritten: number }>(
      `SELECT (SELECT count(*)::int FROM event_log WHERE workspace_id = $1) AS logged,
              (SELECT coalesce(sum(events), 0)::int FROM event_export_files WHERE export_id = $2 AND written_at IS NOT NULL) AS in_files,
              (SELECT count(*)::int FROM event_export_files WHERE export_id = $2 AND written_at IS NULL) AS unwritten`,
      [ws, exportId],
    );
    const r = rows[0]!;
    const done = r.logged >= accepted && r.in_files >= r.logged && r.unwritten === 0;
    if (done || Date.now() > end) return { logged: r.logged, inFiles: r.in_files };
    await new Promise((res) => setTimeout(res, 1000));
  }
}

/** Every file of the bucket read back: lines, distinct ids, and each event's lag from its send to its file's mtime. */
async function readFiles(): Promise<{ lines: number; ids: number; lags: number[] }> {
  const ids = new Set<string>();
  const lags: number[] = [];
  let lines = 0;
  const files = (await readdir(path.join(WORK_DIR, 'bucket'), { recursive: true }).catch(() => [] as string[])).filter(
    (f) => f.endsWith('.ndjson.gz'),
  );
  for (const f of files) {
    const full = path.join(WORK_DIR, 'bucket', f);
    const written = (await stat(full)).mtimeMs;
    for (const line of gunzipSync(await readFile(full))
      .toString()
      .split('\n')) {
      if (!line) continue;
      const e = JSON.parse(line) as { id: string; properties: { sent: number } };
      lines++;
      ids.add(e.id);
      lags.push((written - e.properties.sent) / 1000);
    }
  }
  return { lines, ids: ids.size, lags: lags.sort((a, b) => a - b) };
}

const pct = (xs: number[], p: number) => xs[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))] ?? NaN;

async function main(): Promise<void> {
  await rm(WORK_DIR, { recursive: true, force: true });
  const pool = createPool({ DATABASE_URL, DATABASE_SCHEMA: SCHEMA, DATABASE_POOL_SIZE: 2 });
  let service: ChildProcess | undefined;
  try {
    const { ws, exportId } = await prepare(pool);
    service = startService(SOURCE === 'api' ? 'start' : 'worker');
    if (SOURCE === 'api') await waitReady();
    else await new Promise((r) => setTimeout(r, 5000));
    const worker = SOURCE === 'api' ? childPidRunning(service.pid!, 'worker') : service.pid;
    log(
      `${SOURCE === 'api' ? 'through the API (ces start)' : 'INSERTED INTO THE LOG DIRECTLY (ces worker delivering; no API)'}: ` +
        `${RATE.toLocaleString('en-US')} events/s for ${SECONDS} s, flush_seconds ${FLUSH_SECONDS}`,
    );
    const meter = cpuMeter({ service: service.pid, worker, bench: process.pid });
    const started = performance.now();
    const load = SOURCE === 'api' ? await loadThroughApi() : await loadIntoLog(ws);
    const sentSeconds = (performance.now() - started) / 1000;
    const counts = await delivered(pool, ws, exportId, load.accepted);
    const cpu = meter.stop();
    const files = await readFiles();
    log(
      `accepted ${load.accepted.toLocaleString('en-US')} events (${Math.round(load.accepted / sentSeconds).toLocaleString('en-US')}/s; ` +
        `${load.failures} requests refused or failed); logged ${counts.logged.toLocaleString('en-US')}; in written files ` +
        `${files.lines.toLocaleString('en-US')} lines, ${files.ids.toLocaleString('en-US')} distinct ids ` +
        `(${load.accepted === counts.logged && counts.logged === files.lines && files.lines === files.ids ? 'each accepted event in exactly one file' : 'MISMATCH'})`,
    );
    log(
      `lag from send to file written: p50 ${pct(files.lags, 50).toFixed(1)} s, p99 ${pct(files.lags, 99).toFixed(1)} s ` +
        `(target < 90), max ${pct(files.lags, 100).toFixed(1)} s; machine ${Math.round(cpu.machineBusy * 100)}% busy; CPU s: ` +
        Object.entries(cpu.used)
          .map(([k, v]) => `${k} ${v.toFixed(0)}`)
          .join(', '),
    );
  } finally {
    if (service && service.exitCode === null) {
      service.kill('SIGTERM');
      await once(service, 'exit');
    }
    if (!process.env.BENCH_KEEP) await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
    await pool.end();
    if (!process.env.BENCH_KEEP) await rm(WORK_DIR, { recursive: true, force: true });
    await forgetRedisKeys();
  }
}

async function forgetRedisKeys(): Promise<void> {
  const redis = createRedis({ REDIS_URL }, 'producer', { enableOfflineQueue: true });
  let cursor = '0';
  do {
    const [next, keys] = await redis.scan(cursor, 'MATCH', 'ces-bench-events-lag:*', 'COUNT', 1000);
    cursor = next;
    if (keys.length > 0) await redis.unlink(...keys);
  } while (cursor !== '0');
  await redis.quit();
}

await main();
