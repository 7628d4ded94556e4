/**
 * Workspace statistics benchmark (`npm run bench:segment-stats`): what the workers' stats pass costs (the sizes of
 * BENCH_SEGMENTS segments and the custom attribute names, src/profiles/workspace-stats.ts) and what a
 * /segments/data_series answer costs, with and without today's count, over BENCH_USERS (200,000) synthetic users.
 *
 * Data, in the schema BENCH_SCHEMA (`bench_segment_stats`) of DATABASE_URL's database, made anew on every run: the
 * users of the synthetic generator (seed 1: about 1.5 KB of profile each, nine custom attributes), and segments of the
 * kinds a workspace declares (standard attributes, custom attributes, event counts with a window, random buckets).
 *
 * The ceiling, same run: the least any pass must read, each profile's custom attributes enumerated (`jsonb_each`) and
 * its event and purchase aggregates read whole, once. A pass reads the profiles once per 50 segments and once for the
 * attribute names; what `pass / ceiling` shows beyond 1 is the filters' evaluation, the data types and the writes.
 * Series: BENCH_CALLS (200) calls of the domain function each; `past days only` ends yesterday (a lookup of at most
 * 100 rows), `with today` counts the segment now (a scan, as the public API's today is the size now).
 * Nothing here is a test: figures depend on the machine and on what else runs on it.
 */
import { createPool, type Pool } from '../src/platform/db/pool.js';
import { freshWorkspace } from './workspace.js';
import { generateUsers } from '../src/features/synthetic-users/generate.js';
import { DAY_MS, utcDay } from '../src/platform/lib/iso-time.js';
import { SizeNow, segmentSizeSeries } from '../src/profiles/segments/sizes.js';
import { takeWorkspaceStats } from '../src/profiles/workspace-stats.js';

const USERS = Number(process.env.BENCH_USERS ?? 200_000);
const SEGMENTS = Number(process.env.BENCH_SEGMENTS ?? 20);
const CALLS = Number(process.env.BENCH_CALLS ?? 200);
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_segment_stats';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

const log = (line: string) => console.log(`[bench:segment-stats] ${line}`);

/** Filters of the kinds a workspace declares, cycled over the segments. */
const FILTERS = [
  { attribute: 'country', op: 'eq', value: 'US' },
  { custom_attribute: 'loyalty_tier', op: 'in', value: ['gold', 'platinum'] },
  { custom_event: 'app_open', count: { gte: 3 }, within_days: 30 },
  { all: [{ random_bucket: { lt: 5000 } }, { attribute: 'email_subscribe', op: 'eq', value: 'opted_in' }] },
  { purchase: 'premium_plan' },
];

async function prepare(pool: Pool): Promise<string> {
  const started = Date.now();
  const workspaceId = await freshWorkspace(pool, SCHEMA);
  await generateUsers(pool, { workspaceId, count: USERS, seed: 1 });
  await pool.query(
    `INSERT INTO segments (workspace_id, api_id, name, filter)
     SELECT $1, 's' || g, 'Segment ' || g, ($2::jsonb) -> ((g - 1) % jsonb_array_length($2::jsonb))
       FROM generate_series(1, $3::int) g`,
    [workspaceId, JSON.stringify(FILTERS), SEGMENTS],
  );
  await pool.query('VACUUM ANALYZE');
  log(`${USERS.toLocaleString('en-US')} users and ${SEGMENTS} segments ready in ${Date.now() - started} ms`);
  return workspaceId;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const started = process.hrtime.bigint();
  const value = await fn();
  return { ms: Number(process.hrtime.bigint() - started) / 1e6, value };
}

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;
}

async function seriesTimes(pool: Pool, workspaceId: string, endingAt: Date, maxAgeSeconds = 60): Promise<string> {
  const times: number[] = [];
  const sizeNow = new SizeNow(maxAgeSeconds);
  for (let i = 0; i < CALLS; i++) {
    const apiId = `s${(i % SEGMENTS) + 1}`;
    times.push((await timed(() => segmentSizeSeries(pool, workspaceId, apiId, { length: 100, endingAt, sizeNow }))).ms);
  }
  times.sort((a, b) => a - b);
  return `p50 ${percentile(times, 50).toFixed(1)} ms, p99 ${percentile(times, 99).toFixed(1)} ms`;
}

async function main() {
  const pool = createPool({ DATABASE_URL, DATABASE_SCHEMA: SCHEMA, DATABASE_POOL_SIZE: 4 });
  try {
    const workspaceId = await prepare(pool);
    const least = async () => {
      await pool.query(`SELECT count(*) FROM profiles p, jsonb_each(p.custom_attributes) e WHERE p.workspace_id = $1`, [
        workspaceId,
      ]);
      await pool.query(
        `SELECT sum(octet_length(p.custom_events::text) + octet_length(p.purchases::text)) FROM profiles p WHERE p.workspace_id = $1`,
        [workspaceId],
      );
    };
    await least(); // warms the cache for both
    const ceiling = await timed(least);
    const pass = await timed(() => takeWorkspaceStats(pool, workspaceId, utcDay(new Date(Date.now() - DAY_MS))));
    // The 99 days before, copied from that pass: the rows a workspace has after 100 days of passes.
    await pool.query(
      `INSERT INTO segment_sizes (workspace_id, segment_id, day, size)
       SELECT z.workspace_id, z.segment_id, z.day - g, z.size FROM segment_sizes z, generate_series(1, 99) g`,
    );
    const figures = {
      'ceiling: one read of the attributes and aggregates, ms': ceiling.ms.toFixed(0),
      'stats pass, ms': pass.ms.toFixed(0),
      'pass / ceiling': (pass.ms / ceiling.ms).toFixed(2),
      'segments counted, attribute names': `${pass.value.segments}, ${pass.value.attributes}`,
      'data_series length=100, past days only': await seriesTimes(pool, workspaceId, new Date(Date.now() - DAY_MS)),
      'data_series length=100, with today (counted each call: SEGMENT_SIZE_NOW_MAX_AGE_SECONDS=0)': await seriesTimes(
        pool,
        workspaceId,
        new Date(),
        0,
      ),
      'data_series length=100, with today (the default, a count a minute per segment)': await seriesTimes(
        pool,
        workspaceId,
        new Date(),
      ),
    };
    for (const [k, v] of Object.entries(figures)) log(`${k}: ${v}`);
    console.log(JSON.stringify({ bench: 'segment-stats', users: USERS, segments: SEGMENTS, ...figures }));
  } finally {
    await pool.end();
  }
}

await main();
