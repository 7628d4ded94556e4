/**
 * Cloud Data Ingestion benchmark (`npm run bench:cdi`).
 *
 * In the schema `bench_cdi` of DATABASE_URL's database: BENCH_USERS (1,000,000) generated users (the `ces users
 * generate` generator, seed 1; reused while no run has synced them, generated again after one), and a "warehouse"
 * table in the schema `bench_cdi_source` of the same server laid out as docs/cdi.md says: one row per user by
 * SERVICE_ID, a distinct UPDATED_AT each, a PAYLOAD of three custom attributes and two standard fields (recreated each
 * run). Then, each in a fresh `ces cdi sync --wait` process (the build, `dist/src/cli.js`) whose peak RSS (VmHWM)
 * is read from /proc while it runs:
 *  1. a sync of the first BENCH_SMALL_ROWS (100,000) rows of the table: the memory of a small table;
 *  2. a sync of the rest (the watermark moved past the first part): rows/s over the whole remaining table;
 *  3. the whole table again from the start, after VACUUM: every profile rewritten before, as a scheduled sync of the
 *     same users finds them (1 and 2 are each profile's first rewrite after the bulk load, the worst case);
 *  4. `one-time`: a copy of the table whose rows all share one UPDATED_AT (a table loaded in one transaction), synced
 *     by an integration of its own, then synced again with nothing new (`one-time-again`): the second run's time
 *     over the first's says what a scheduled run costs when the warehouse has not changed (issue 40: at most 0.2).
 * BENCH_CASES picks the cases, comma-separated (`small`, `rest`, `again`, `one-time`; all by default): `rest` reads the
 * table past `small`'s watermark, so it means the rest only after `small`.
 * The ceiling, measured in the same run before the syncs: how many of these profile rows PostgreSQL alone rewrites
 * per second, in set-based statements of 50,000 random profiles (`UPDATE ... SET updated_at = now()`, rolled back),
 * as bench:ingest measures it. A synced row rewrites its profile at least once, so rows/s / ceiling is the share of
 * this machine's bare row-rewrite rate the sync reaches. Peak RSS of the two runs side by side shows whether memory
 * follows the table's size. Nothing here is a test: figures depend on the machine and on what else runs on it.
 * BENCH_PREPARE_ONLY=1 only makes the schema BENCH_SCHEMA and its source table (bench/cdi-ab.sh compares two codes
 * or settings on two such schemas).
 */
import { execFile, spawn } from 'node:child_process';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import { createPool, type Pool } from '../src/platform/db/pool.js';
import { migrate } from '../src/platform/db/migrate.js';
import { generateUsers } from '../src/features/synthetic-users/generate.js';

const ROOT = path.resolve(import.meta.dirname, '..');
const USERS = Number(process.env.BENCH_USERS ?? 1_000_000);
const SMALL = Math.min(USERS, Number(process.env.BENCH_SMALL_ROWS ?? 100_000));
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_cdi';
const SOURCE = `${SCHEMA}_source`;
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const CEILING_ROWS = 50_000;
const INTEGRATION = 'b7c2d1e0-0000-4000-8000-00000000cd10';
/** The integration over the table whose rows share one UPDATED_AT (case `one-time`). */
const ONE_TIME_INTEGRATION = 'b7c2d1e0-0000-4000-8000-00000000cd11';
const ALL_CASES = ['small', 'rest', 'again', 'one-time'] as const;
type BenchCase = (typeof ALL_CASES)[number];
const CASES: BenchCase[] = (process.env.BENCH_CASES ?? ALL_CASES.join(',')).split(',').map((c) => {
  if (!(ALL_CASES as readonly string[]).includes(c.trim()))
    throw new Error(`BENCH_CASES: unknown case ${c} (cases: ${ALL_CASES.join(', ')})`);
  return c.trim() as BenchCase;
});

const log = (line: string) => console.log(`[bench:cdi] ${line}`);

async function prepare(pool: Pool): Promise<string> {
  await migrate(pool, SCHEMA);
  const existing = await pool.query<{ id: string; n: number }>(
    `SELECT w.id, (SELECT count(*)::int FROM profiles p WHERE p.workspace_id = w.id) AS n FROM workspaces w WHERE w.name = 'bench-cdi'`,
  );
  let ws = existing.rows[0]?.id;
  // `small` and `rest` measure each profile's first rewrite after a bulk load: profiles an earlier run synced (their
  // attribute times name a synced attribute) are generated again rather than reused.
  const synced = ws
    ? (
        await pool.query<{ synced: boolean }>(
          `SELECT EXISTS (SELECT 1 FROM profiles WHERE workspace_id = $1 AND attribute_times ? 'custom_attributes.loyalty_tier') AS synced`,
          [ws],
        )
      ).rows[0]!.synced
    : false;
  if (!ws || existing.rows[0]!.n !== USERS || synced) {
    await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
    await migrate(pool, SCHEMA);
    const company = (await pool.query<{ id: string }>(`INSERT INTO companies (name) VALUES ('bench') RETURNING id`))
      .rows[0]!.id;
    ws = (
      await pool.query<{ id: string }>(
        `INSERT INTO workspaces (company_id, name) VALUES ($1, 'bench-cdi') RETURNING id`,
        [company],
      )
    ).rows[0]!.id;
    const started = Date.now();
    await generateUsers(pool, { workspaceId: ws, count: USERS, seed: 1 });
    await pool.query('ANALYZE profiles');
    log(`generated ${USERS.toLocaleString('en-US')} users in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  } else {
    log(`reusing the ${USERS.toLocaleString('en-US')} users of schema ${SCHEMA}`);
  }
  // The warehouse table, in random user order (as a model's output would be), and the integration over it.
  const started = Date.now();
  await pool.query(`DROP SCHEMA IF EXISTS ${SOURCE} CASCADE`);
  await pool.query(`CREATE SCHEMA ${SOURCE}`);
  await pool.query(
    `CREATE TABLE ${SOURCE}.user_updates AS
     SELECT timestamptz '2026-01-01' + (row_number() OVER (ORDER BY md5(p.service_id))) * interval '1 millisecond' AS "UPDATED_AT",
            p.service_id AS "SERVICE_ID",
            json_build_object('loyalty_tier', (ARRAY['bronze', 'silver', 'gold', 'platinum'])[1 + p.id % 4], 'churn_score', (p.id % 1000) / 1000.0,
                              'segment_label', 'model-' || (p.id % 50), 'first_name', 'Synced', 'country', 'FR')::text AS "PAYLOAD"
       FROM ${SCHEMA}.profiles p WHERE p.workspace_id = $1`,
    [ws],
  );
  await pool.query(`CREATE INDEX ON ${SOURCE}.user_updates ("UPDATED_AT")`);
  await pool.query(`ANALYZE ${SOURCE}.user_updates`);
  await pool.query(`DELETE FROM cdi_integrations WHERE id = ANY($1)`, [[INTEGRATION, ONE_TIME_INTEGRATION]]);
  await pool.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'bench', $3)`, [
    INTEGRATION,
    ws,
    JSON.stringify({ type: 'postgres', url_env: 'BENCH_CDI_SOURCE_URL', table: `${SOURCE}.user_updates_view` }),
  ]);
  if (CASES.includes('one-time') && process.env.BENCH_PREPARE_ONLY !== '1') {
    // The same rows, all at one time, as a table loaded (or rewritten) in one transaction stamps them.
    await pool.query(
      `CREATE TABLE ${SOURCE}.one_time AS SELECT timestamptz '2026-03-01' AS "UPDATED_AT", "SERVICE_ID", "PAYLOAD" FROM ${SOURCE}.user_updates`,
    );
    await pool.query(`CREATE INDEX ON ${SOURCE}.one_time ("UPDATED_AT")`);
    await pool.query(`ANALYZE ${SOURCE}.one_time`);
    await pool.query(
      `INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'bench one time', $3)`,
      [
        ONE_TIME_INTEGRATION,
        ws,
        JSON.stringify({ type: 'postgres', url_env: 'BENCH_CDI_SOURCE_URL', table: `${SOURCE}.one_time` }),
      ],
    );
  }
  log(
    `source table of ${USERS.toLocaleString('en-US')} rows written in ${((Date.now() - started) / 1000).toFixed(1)} s`,
  );
  return ws;
}

/** PostgreSQL alone rewriting random profile rows, set-based: the median of three statements, each rolled back. */
async function rewriteCeiling(pool: Pool): Promise<number> {
  const { rows } = await pool.query<{ lo: number; hi: number }>('SELECT min(id) AS lo, max(id) AS hi FROM profiles');
  const { lo, hi } = rows[0]!;
  const rates: number[] = [];
  for (let run = 0; run < 3; run++) {
    const ids = Array.from({ length: CEILING_ROWS }, () => lo + Math.floor(Math.random() * (hi - lo + 1)));
    const client = await pool.connect();
    try {
      await client.query('BEGIN');
      await client.query('SET LOCAL synchronous_commit = off');
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
 * Builds the CLI as an install runs it (`npm run build`, then `node dist/src/cli.js`, as the demo does): through tsx
 * the sources ran slower, each nested function paying for the name tsx gives it at every call (A/B in BENCHMARKS.md).
 */
async function build(): Promise<void> {
  await promisify(execFile)('npx', ['tsc', '-p', 'tsconfig.build.json'], { cwd: ROOT });
}

/** Runs the built `ces cdi sync --wait` in a process of its own, reading its peak RSS from /proc while it runs. */
function syncProcess(integration: string): Promise<{ code: number | null; output: string; peakMb: number }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [path.join(ROOT, 'dist/src/cli.js'), 'cdi', 'sync', integration, '--wait'], {
      cwd: ROOT,
      env: {
        ...process.env,
        DATABASE_URL,
        DATABASE_SCHEMA: SCHEMA,
        LOG_LEVEL: 'warn',
        BENCH_CDI_SOURCE_URL: DATABASE_URL,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    let peakKb = 0;
    child.stdout.on('data', (d) => (output += d));
    child.stderr.on('data', (d) => (output += d));
    const timer = setInterval(() => {
      readFile(`/proc/${child.pid}/status`, 'utf8')
        .then((s) => (peakKb = Math.max(peakKb, Number(/VmHWM:\s+(\d+)/.exec(s)?.[1] ?? 0))))
        .catch(() => {});
    }, 100);
    child.on('error', reject);
    child.on('exit', (code) => {
      clearInterval(timer);
      resolve({ code, output, peakMb: Math.round(peakKb / 1024) });
    });
  });
}

async function lastRun(pool: Pool, integration: string): Promise<{ rows: number; seconds: number; status: string }> {
  const { rows } = await pool.query<{ rows_synced: number; s: number; status: string }>(
    `SELECT rows_synced, extract(epoch FROM finished_at - started_at)::float8 AS s, status FROM cdi_sync_jobs WHERE integration_id = $1 ORDER BY started_at DESC LIMIT 1`,
    [integration],
  );
  return { rows: rows[0]!.rows_synced, seconds: rows[0]!.s, status: rows[0]!.status };
}

async function main(): Promise<void> {
  const pool = createPool({ DATABASE_URL, DATABASE_SCHEMA: SCHEMA, DATABASE_POOL_SIZE: 4 });
  try {
    await prepare(pool);
    if (process.env.BENCH_PREPARE_ONLY === '1') {
      // For bench/cdi-ab.sh: the schema and its source only, the profiles kept out of autovacuum's way between runs.
      await pool.query(`ALTER TABLE profiles SET (autovacuum_enabled = false)`);
      log(`prepared schema ${SCHEMA} and ${SOURCE}`);
      return;
    }
    await build();
    const ceiling = await rewriteCeiling(pool);
    log(
      `ceiling: PostgreSQL alone rewrites ${Math.round(ceiling).toLocaleString('en-US')} profile rows/s (set-based UPDATE of ${CEILING_ROWS.toLocaleString('en-US')} random profiles, median of 3)`,
    );
    await pool.query('CHECKPOINT').catch(() => {});
    const results: Record<string, unknown>[] = [];
    const run = async (name: string, integration: string) => {
      const proc = await syncProcess(integration);
      if (proc.code !== 0) throw new Error(`ces cdi sync failed:\n${proc.output}`);
      const last = await lastRun(pool, integration);
      const rate = last.rows / last.seconds;
      results.push({
        run: name,
        rows: last.rows,
        status: last.status,
        seconds: Number(last.seconds.toFixed(1)),
        'rows/s': Math.round(rate),
        'rows/s / ceiling': Number((rate / ceiling).toFixed(2)),
        'peak RSS MB': proc.peakMb,
      });
      log(
        `${name}: ${last.rows.toLocaleString('en-US')} rows in ${last.seconds.toFixed(1)} s: ${Math.round(rate).toLocaleString('en-US')} rows/s, ${(rate / ceiling).toFixed(2)} of the ceiling, peak RSS ${proc.peakMb} MB (${last.status})`,
      );
      return last;
    };
    // The first part of the table through a view, then the whole table through it: the second run starts past the
    // first's watermark, so together they sync every row once.
    for (const [name, rows] of [
      ['small', SMALL],
      ['rest', USERS],
      ['again', USERS],
    ] as const) {
      if (!CASES.includes(name)) continue;
      if (name === 'again') {
        // The whole table once more, every profile rewritten once before and vacuumed since: what a scheduled sync of
        // the same users finds (the first two runs are each profile's first rewrite after a bulk load, the worst case:
        // no page has room to keep the new row version beside the old one). The rows' times are unchanged, and a value
        // at the time it was stored with is written again.
        await pool.query(`UPDATE cdi_integrations SET watermark = NULL WHERE id = $1`, [INTEGRATION]);
        await pool.query(`DELETE FROM cdi_watermark_rows WHERE integration_id = $1`, [INTEGRATION]);
        await pool.query('VACUUM profiles');
        await pool.query('CHECKPOINT').catch(() => {});
      }
      await pool.query(
        `CREATE OR REPLACE VIEW ${SOURCE}.user_updates_view AS SELECT * FROM ${SOURCE}.user_updates ORDER BY "UPDATED_AT" LIMIT ${rows}`,
      );
      await run(name, INTEGRATION);
    }
    if (CASES.includes('one-time')) {
      // Every row at one UPDATED_AT: the first run takes them all, the second finds nothing new.
      await pool.query('VACUUM profiles');
      await pool.query('CHECKPOINT').catch(() => {});
      const first = await run('one-time', ONE_TIME_INTEGRATION);
      const again = await run('one-time-again', ONE_TIME_INTEGRATION);
      const ratio = again.seconds / first.seconds;
      results.push({ run: 'one-time-again / one-time', seconds: Number(ratio.toFixed(3)) });
      log(
        `one-time: nothing new took ${again.seconds.toFixed(1)} s against ${first.seconds.toFixed(1)} s for the first run: ${ratio.toFixed(3)} of it (target: at most 0.2)`,
      );
    }
    console.log(JSON.stringify({ users: USERS, ceilingRowsPerSecond: Math.round(ceiling), runs: results }));
  } finally {
    await pool.end();
  }
}

await main();
