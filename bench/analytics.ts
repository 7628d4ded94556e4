/**
 * Analytics benchmark (`npm run bench:analytics`, docs/analytics.md).
 *
 * 1. Series: in the schema `bench_analytics` of DATABASE_URL's database (recreated each run), the rollups of
 *    BENCH_EVENTS (50,000,000) custom events over BENCH_DAYS (100) days are loaded directly in bulk (set-based INSERTs:
 *    counts per BENCH_NAMES (200) names x 3 apps x hour, the all-apps rows and the daily rows summed from them; as
 *    many purchases over 100 products; the user KPI days), then `ces serve` runs as a real process and every series
 *    endpoint is called at BENCH_RATE (50) requests/s, open loop, for BENCH_SECONDS (20) each, with random
 *    parameters (name, product, app, unit, length 1-100, ending_at within the days). Printed: p50/p99/max of each,
 *    the target (p99 under 20 ms), and the same-run ceiling: the same series read by the domain function straight
 *    from PostgreSQL in this process (no HTTP, no auth, no rate limit), p99, and the ratio.
 * 2. Ingestion cost: `bench/ingest.ts`'s throughput phase (closed loop, applied events/s end to end) run
 *    BENCH_AB_ROUNDS (2) times each way, alternating, with the rollups kept and with them skipped
 *    (CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS=1, a switch for benchmarks only: src/profiles/analytics-rollups.ts); the
 *    medians and their ratio. BENCH_AB_ROUNDS=0 (or BENCH_PARTS=series) skips it; BENCH_PARTS=ingest runs it alone. Its own settings (BENCH_USERS, BENCH_SECONDS...) pass on.
 * Nothing here is a test: figures depend on the machine and on what else runs on it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import path from 'node:path';
import { hashSecret, secretPrefix } from '../src/platform/auth/secrets.js';
import { createPool, type Pool } from '../src/platform/db/pool.js';
import { createRedis } from '../src/platform/redis.js';
import { freshWorkspace } from './workspace.js';
import { eventSeries, purchaseSeries, userKpiSeries, type SeriesRange } from '../src/features/analytics/series.js';
import { LoadClient, requestBytes } from './load.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const EVENTS = Number(process.env.BENCH_EVENTS ?? 50_000_000);
const DAYS = Number(process.env.BENCH_DAYS ?? 100);
const NAMES = Number(process.env.BENCH_NAMES ?? 200);
const PRODUCTS = 100;
const APPS = ['ios', 'android', 'web'];
const RATE = Number(process.env.BENCH_RATE ?? 50);
const SECONDS = Number(process.env.BENCH_SECONDS ?? 20);
const AB_ROUNDS = Number(process.env.BENCH_AB_ROUNDS ?? 2);
/** `series`, `ingest` or both (the default), comma-separated. */
const PARTS = (process.env.BENCH_PARTS ?? 'series,ingest').split(',');
const SCHEMA = 'bench_analytics';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const PORT = Number(process.env.BENCH_PORT ?? 3918);
const API_KEY = 'ces_key_bench-analytics-00000000000000000000000';
const FIRST_DAY = Date.UTC(2024, 0, 1);
const TARGET_P99_MS = 20;

const log = (line: string) => console.log(`[bench:analytics] ${line}`);

/** The rollups of EVENTS events (and as many purchases) over DAYS days, written set-based; returns the workspace. */
async function loadRollups(pool: Pool): Promise<string> {
  const ws = await freshWorkspace(pool, SCHEMA);
  await pool.query(
    `INSERT INTO api_keys (workspace_id, name, key_hash, key_prefix, permissions) VALUES ($1, 'bench', $2, $3, $4)`,
    [
      ws,
      hashSecret(API_KEY),
      secretPrefix(API_KEY),
      ['events.data_series', 'purchases.quantity_series', 'purchases.revenue_series', 'kpi.dau.data_series'].concat(
        'kpi.new_users.data_series',
        'kpi.mau.data_series',
      ),
    ],
  );
  const started = Date.now();
  const hours = DAYS * 24;
  // Each (name, app, hour) gets about EVENTS / (names x apps x hours) events, spread 0.5-1.5 times that.
  const mean = EVENTS / (NAMES * APPS.length * hours);
  const spread = (seed: string) =>
    `greatest(0, round(${mean} * (0.5 + ('x' || substr(md5(${seed}), 1, 8))::bit(32)::bigint::float8 / 4294967296)))::bigint`;
  await pool.query(
    `INSERT INTO event_counts_hourly (workspace_id, name, app_id, hour, count)
     SELECT $1, 'event-' || n, a, $2::timestamptz + h * interval '1 hour', ${spread(`n || a || h`)}
       FROM generate_series(0, ${NAMES - 1}) n, unnest($3::text[]) a, generate_series(0, ${hours - 1}) h`,
    [ws, new Date(FIRST_DAY).toISOString(), APPS],
  );
  await pool.query(
    `INSERT INTO event_counts_hourly SELECT workspace_id, name, '', hour, sum(count) FROM event_counts_hourly GROUP BY 1, 2, 4`,
  );
  await pool.query(
    `INSERT INTO event_counts_daily SELECT workspace_id, name, app_id, (hour AT TIME ZONE 'UTC')::date, sum(count) FROM event_counts_hourly GROUP BY 1, 2, 3, 4`,
  );
  await pool.query(
    `INSERT INTO purchase_counts_hourly (workspace_id, product, app_id, hour, quantity, revenue)
     SELECT $1, 'sku-' || n, a, $2::timestamptz + h * interval '1 hour', q, q * 4.99
       FROM generate_series(0, ${PRODUCTS - 1}) n, unnest($3::text[]) a, generate_series(0, ${hours - 1}) h,
            LATERAL (SELECT ${spread(`'p' || n || a || h`)} AS q) x`,
    [ws, new Date(FIRST_DAY).toISOString(), APPS],
  );
  await pool.query(
    `INSERT INTO purchase_counts_hourly SELECT workspace_id, product, '', hour, sum(quantity), sum(revenue) FROM purchase_counts_hourly GROUP BY 1, 2, 4`,
  );
  await pool.query(
    `INSERT INTO purchase_counts_hourly SELECT workspace_id, '', app_id, hour, sum(quantity), sum(revenue) FROM purchase_counts_hourly GROUP BY 1, 3, 4`,
  );
  await pool.query(
    `INSERT INTO purchase_counts_daily SELECT workspace_id, product, app_id, (hour AT TIME ZONE 'UTC')::date, sum(quantity), sum(revenue) FROM purchase_counts_hourly GROUP BY 1, 2, 3, 4`,
  );
  await pool.query(
    `INSERT INTO user_kpi_daily (workspace_id, app_id, day, dau, new_users, mau)
     SELECT $1, a, $2::date + d, 100000 + d, 2000 + d, 1000000 + d FROM unnest($3::text[] || '{""}') a, generate_series(0, ${DAYS - 1}) d`,
    [ws, new Date(FIRST_DAY).toISOString().slice(0, 10), APPS],
  );
  // MAU as the rollups now count it (migration 0470): ranges of every length beginning each day, most of them the
  // 30 days of a person's first activity in a month.
  await pool.query(
    `INSERT INTO user_kpi_spans (workspace_id, app_id, day, length, n)
     SELECT $1, a, $2::date + d, len, CASE WHEN len = 30 THEN 30000 + d ELSE 100 + len END
       FROM unnest($3::text[] || '{""}') a, generate_series(0, ${DAYS - 1}) d, generate_series(1, 30) len`,
    [ws, new Date(FIRST_DAY).toISOString().slice(0, 10), APPS],
  );
  await pool.query('VACUUM ANALYZE');
  const { rows } = await pool.query<{ events: string; hourly: string }>(
    `SELECT (SELECT sum(count) FROM event_counts_daily WHERE app_id = '') AS events,
            (SELECT count(*) FROM event_counts_hourly) + (SELECT count(*) FROM purchase_counts_hourly) AS hourly`,
  );
  log(
    `loaded rollups of ${Number(rows[0]!.events).toLocaleString('en-US')} events (and as many purchases) over ${DAYS} days, ` +
      `${Number(rows[0]!.hourly).toLocaleString('en-US')} hourly rows, in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return ws;
}

interface SeriesCase {
  name: string;
  url: (r: RandomRange) => string;
  direct: (pool: Pool, ws: string, r: RandomRange) => Promise<unknown>;
}

interface RandomRange extends SeriesRange {
  name: string;
  product: string;
}

function randomRange(unit?: 'day' | 'hour'): RandomRange {
  const endingAt = new Date(FIRST_DAY + Math.floor(Math.random() * DAYS * 86_400_000));
  const app = Math.random() < 0.5 ? undefined : APPS[Math.floor(Math.random() * APPS.length)];
  return {
    length: 1 + Math.floor(Math.random() * 100),
    endingAt,
    unit: unit ?? (Math.random() < 0.5 ? 'day' : 'hour'),
    ...(app ? { appId: app } : {}),
    name: `event-${Math.floor(Math.random() * NAMES)}`,
    product: `sku-${Math.floor(Math.random() * PRODUCTS)}`,
  };
}

const query = (r: RandomRange, extra: Record<string, string | undefined>) => {
  const params = new URLSearchParams({ length: String(r.length), ending_at: r.endingAt.toISOString(), unit: r.unit });
  if (r.appId) params.set('app_id', r.appId);
  for (const [k, v] of Object.entries(extra)) if (v !== undefined) params.set(k, v);
  return params.toString();
};

const CASES: SeriesCase[] = [
  {
    name: 'GET /events/data_series',
    url: (r) => `/events/data_series?${query(r, { event: r.name })}`,
    direct: (pool, ws, r) => eventSeries(pool, ws, r.name, r),
  },
  {
    name: 'GET /purchases/quantity_series (a product)',
    url: (r) => `/purchases/quantity_series?${query(r, { product: r.product })}`,
    direct: (pool, ws, r) => purchaseSeries(pool, ws, r.product, r, 'purchase_quantity'),
  },
  {
    name: 'GET /purchases/revenue_series (all products)',
    url: (r) => `/purchases/revenue_series?${query(r, {})}`,
    direct: (pool, ws, r) => purchaseSeries(pool, ws, undefined, r, 'revenue'),
  },
  ...(['dau', 'new_users', 'mau'] as const).map((kpi) => ({
    name: `GET /kpi/${kpi}/data_series`,
    url: (r: RandomRange) => `/kpi/${kpi}/data_series?${query({ ...r, unit: 'day' }, {})}`.replace('&unit=day', ''),
    direct: (pool: Pool, ws: string, r: RandomRange) => userKpiSeries(pool, ws, r, kpi),
  })),
];

const percentile = (sorted: number[], p: number) =>
  sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

/** One case at RATE requests/s for SECONDS, open loop: latencies of 200 answers, and failures. */
async function loadCase(load: LoadClient, c: SeriesCase): Promise<{ sorted: number[]; failures: number }> {
  const total = RATE * SECONDS;
  const requests = Array.from({ length: total }, () =>
    requestBytes('GET', c.url(randomRange()), { authorization: `Bearer ${API_KEY}` }, ''),
  );
  const latencies: number[] = [];
  let failures = 0;
  const inflight: Promise<void>[] = [];
  const started = performance.now();
  for (let i = 0; i < total; i++) {
    const wait = started + (i * 1000) / RATE - performance.now();
    if (wait > 1) await new Promise((r) => setTimeout(r, wait));
    inflight.push(
      load.send(requests[i]!).then(
        (r) => {
          if (r.status === 200) latencies.push(r.ms);
          else failures++;
        },
        () => void failures++,
      ),
    );
  }
  await Promise.all(inflight);
  return { sorted: latencies.sort((a, b) => a - b), failures };
}

/** The same reads straight from PostgreSQL through the domain function, one after another: the ceiling. */
async function directCase(pool: Pool, ws: string, c: SeriesCase): Promise<number[]> {
  const times: number[] = [];
  for (let i = 0; i < Math.min(500, RATE * SECONDS); i++) {
    const t = performance.now();
    await c.direct(pool, ws, randomRange());
    times.push(performance.now() - t);
  }
  return times.sort((a, b) => a - b);
}

function startServer(): ChildProcess {
  return spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'src/cli.ts'), 'serve'], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'production',
      DOWNLOAD_URL_SECRET: 'bench-only-download-url-secret',
      DATABASE_URL,
      DATABASE_SCHEMA: SCHEMA,
      REDIS_URL,
      REDIS_PREFIX: 'ces-bench-analytics',
      PORT: String(PORT),
      HOST: '127.0.0.1',
      LOG_LEVEL: 'warn',
      MIGRATE_ON_START: 'false',
    },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

async function waitReady(): Promise<void> {
  const until = Date.now() + 60_000;
  while (
    !(await fetch(`http://127.0.0.1:${PORT}/readyz`).then(
      (r) => r.ok,
      () => false,
    ))
  ) {
    if (Date.now() > until) throw new Error('ces serve did not become ready');
    await new Promise((r) => setTimeout(r, 200));
  }
}

async function seriesPhase(pool: Pool, ws: string): Promise<boolean> {
  const server = startServer();
  const load = new LoadClient('127.0.0.1', PORT);
  let allMet = true;
  try {
    await waitReady();
    // Warm-up: V8 compiles the hot paths on a fresh process's first few hundred requests.
    for (const c of CASES)
      for (let i = 0; i < 50; i++)
        await load.send(requestBytes('GET', c.url(randomRange()), { authorization: `Bearer ${API_KEY}` }, ''));
    log(`${RATE} requests/s for ${SECONDS} s per endpoint, random parameters; target p99 < ${TARGET_P99_MS} ms`);
    for (const c of CASES) {
      const { sorted, failures } = await loadCase(load, c);
      const direct = await directCase(pool, ws, c);
      const p99 = percentile(sorted, 99);
      const met = p99 < TARGET_P99_MS && failures === 0;
      allMet &&= met;
      log(
        `${c.name}: p50 ${percentile(sorted, 50).toFixed(2)} ms, p99 ${p99.toFixed(2)} ms, max ${sorted.at(-1)!.toFixed(2)} ms, ` +
          `${failures} failures (${met ? 'met' : 'MISSED'}); ceiling (domain function straight from PostgreSQL) p99 ` +
          `${percentile(direct, 99).toFixed(2)} ms, ratio ${(p99 / percentile(direct, 99)).toFixed(2)}`,
      );
    }
  } finally {
    load.close();
    server.kill('SIGTERM');
    await once(server, 'exit');
  }
  return allMet;
}

/** One bench/ingest.ts throughput run: applied events/s end to end. */
async function ingestRun(skipRollups: boolean): Promise<number> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/ingest.ts')], {
    cwd: ROOT,
    env: {
      ...process.env,
      BENCH_PHASES: 'throughput',
      // Its own port, directory and Redis prefix: another helper's bench:ingest may share this machine's Redis.
      BENCH_PORT: process.env.BENCH_INGEST_PORT ?? '3919',
      BENCH_DIR: '/tmp/ces-bench-analytics-ingest',
      BENCH_REDIS_PREFIX: 'ces-bench-analytics-ingest',
      ...(skipRollups ? { CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS: '1' } : { CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS: '' }),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  let out = '';
  child.stdout!.on('data', (b: Buffer) => (out += b.toString()));
  const [code] = (await once(child, 'exit')) as [number];
  if (code !== 0) throw new Error(`bench/ingest.ts exited ${code}:\n${out.slice(-2000)}`);
  const last = out.trim().split('\n').at(-1)!;
  return (JSON.parse(last) as { throughput: Record<string, number> }).throughput['applied events/s (end to end)']!;
}

async function ingestCost(): Promise<void> {
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const kept: number[] = [];
  const skipped: number[] = [];
  for (let round = 0; round < AB_ROUNDS; round++) {
    // Alternate which goes first, so that neither always meets the warmer (or the noisier) machine.
    for (const skip of round % 2 === 0 ? [false, true] : [true, false]) {
      const rate = await ingestRun(skip);
      (skip ? skipped : kept).push(rate);
      log(
        `/users/track closed loop, rollups ${skip ? 'skipped' : 'kept'}: ${Math.round(rate).toLocaleString('en-US')} applied events/s`,
      );
    }
  }
  const ratio = median(kept) / median(skipped);
  log(
    `rollups' cost on /users/track: ${Math.round(median(kept)).toLocaleString('en-US')} applied events/s kept, ` +
      `${Math.round(median(skipped)).toLocaleString('en-US')} skipped (medians of ${AB_ROUNDS}; kept/skipped ${ratio.toFixed(3)}, ` +
      `cost ${((1 - ratio) * 100).toFixed(1)}%, target <= 5%)`,
  );
}

async function main() {
  if (PARTS.includes('series')) await seriesPart();
  if (PARTS.includes('ingest') && AB_ROUNDS > 0) await ingestCost();
}

async function seriesPart() {
  const pool = createPool({ DATABASE_URL, DATABASE_SCHEMA: SCHEMA, DATABASE_POOL_SIZE: 2 });
  try {
    const ws = await loadRollups(pool);
    const met = await seriesPhase(pool, ws);
    log(met ? 'every series met its p99 target' : 'some series MISSED the p99 target');
  } finally {
    if (!process.env.BENCH_KEEP) await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
    await pool.end();
    const redis = createRedis({ REDIS_URL }, 'producer', { enableOfflineQueue: true });
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', 'ces-bench-analytics:*', 'COUNT', 1000);
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
