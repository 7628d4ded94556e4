/**
 * Segment export benchmark (`npm run bench:export`).
 *
 * Generates BENCH_USERS (default 1,000,000) synthetic users once into the schema `bench_export` of DATABASE_URL's
 * database and reuses them on later runs (BENCH_REGENERATE=1 makes them anew, e.g. after the generator changed).
 * Then, in one run:
 *  1. measures this machine's raw ceilings: `psql COPY (...) TO STDOUT | gzip -1 > file` of the stored profiles'
 *     exported columns, and of the very NDJSON lines the export builds;
 *  2. exports a segment of every user with a typical field list as gzip, zip and Parquet, to the built-in store and
 *     to S3 (s3rver in its own process), with BENCH_WORKERS real `ces worker` processes; a list (`BENCH_WORKERS=1,2,4`)
 *     sweeps: every run once per worker count. `gzip-incremental` first writes to 2% of the users (an UPDATE of
 *     every 50th profile id: spread over every random_bucket, as real changes are), then exports the changes since
 *     the last full export (changes_since); `gzip-incremental-0.1` then writes to 0.1% (every 1,000th id) and exports
 *     the changes since that incremental export, as a daily schedule's next run does. Each incremental run prints
 *     its time as a share of the same run's full gzip export (`gzip-local`);
 *  3. times recording a full export's member lists (export_members) for every user alone, in SQL, as the share of a
 *     full export that incremental exports add to it;
 *  4. prints users/s (in all and per worker process), the workers' peak RSS (VmHWM), the CPU the workers and
 *     PostgreSQL used during the export (in cores: CPU seconds over wall seconds), and the ratio to the ceilings.
 * Nothing here is a test: figures depend on the machine and on what else runs on it.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { mkdir, open, readFile, rm, stat } from 'node:fs/promises';
import { createServer } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import { loadConfig, type Config } from '../src/platform/config.js';
import { createPool, type Pool } from '../src/platform/db/pool.js';
import { migrate } from '../src/platform/db/migrate.js';
import { createExport } from '../src/pipelines/exports/request/create-export.js';
import { EXPORT_SHARD_QUEUE } from '../src/platform/queues/export-shard.js';
import { wholeMembersSelect } from '../src/pipelines/exports/member-layers.js';
import type { OutputFormat } from '../src/pipelines/exports/key-layout.js';
import { ExportSpecSchema } from '../src/pipelines/exports/request/request-body.js';
import { exportLineSelect, windowStart } from '../src/pipelines/exports/shard/line-query.js';
import { generateUsers } from '../src/features/synthetic-users/generate.js';
import { Queues } from '../src/platform/queues/index.js';
import { createRedis, type Redis } from '../src/platform/redis.js';
import { createLogger } from '../src/platform/logger.js';

const run = promisify(execFile);
const ROOT = path.resolve(import.meta.dirname, '..');

const USERS = Number(process.env.BENCH_USERS ?? 1_000_000);
const WORKER_COUNTS = (process.env.BENCH_WORKERS ?? '2').split(',').map(Number);
const CONCURRENCY = Number(process.env.BENCH_CONCURRENCY ?? 1);
const SHARD_BUCKETS = Number(process.env.BENCH_SHARD_BUCKETS ?? 1250);
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_export';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const WORK_DIR = process.env.BENCH_DIR ?? '/tmp/ces-bench-export';
const ONLY = (
  process.env.BENCH_RUNS ??
  'gzip-local,zip-local,parquet-local,gzip-incremental,gzip-incremental-0.1,gzip-s3,zip-s3,parquet-s3'
).split(',');
const WORKSPACE = 'bench-export';
const SEGMENT = 'all-users';
/** identity, attributes, custom attributes, custom_events, purchases, devices. */
const FIELDS = [
  'external_id',
  'service_id',
  'user_aliases',
  'first_name',
  'last_name',
  'email',
  'phone',
  'country',
  'home_city',
  'language',
  'time_zone',
  'dob',
  'gender',
  'created_at',
  'total_revenue',
  'custom_attributes',
  'custom_events',
  'purchases',
  'devices',
];

function benchConfig(extra: Record<string, string> = {}): Config {
  return loadConfig({
    ...process.env,
    DATABASE_URL,
    DATABASE_SCHEMA: SCHEMA,
    REDIS_PREFIX: 'ces-bench-export',
    LOCAL_STORE_DIR: path.join(WORK_DIR, 'bucket'),
    EXPORT_SHARD_BUCKETS: String(SHARD_BUCKETS),
    LOG_LEVEL: 'warn',
    ...extra,
  });
}

async function ensureUsers(pool: Pool): Promise<{ workspaceId: string; companyId: string }> {
  await migrate(pool, SCHEMA);
  let ws = (
    await pool.query<{ id: string; company_id: string }>(`SELECT id, company_id FROM workspaces WHERE name = $1`, [
      WORKSPACE,
    ])
  ).rows[0];
  if (!ws) {
    const company = (
      await pool.query<{ id: string }>(
        `INSERT INTO companies (name) VALUES ('bench') ON CONFLICT (name) DO UPDATE SET name = excluded.name RETURNING id`,
      )
    ).rows[0]!.id;
    ws = (
      await pool.query<{ id: string; company_id: string }>(
        `INSERT INTO workspaces (company_id, name) VALUES ($1, $2) RETURNING id, company_id`,
        [company, WORKSPACE],
      )
    ).rows[0]!;
  }
  await pool.query(
    `INSERT INTO segments (workspace_id, api_id, name) VALUES ($1, $2, 'Everyone') ON CONFLICT (workspace_id, api_id) DO NOTHING`,
    [ws.id, SEGMENT],
  );
  const have = Number(
    (await pool.query(`SELECT count(*) AS n FROM profiles WHERE workspace_id = $1`, [ws.id])).rows[0].n,
  );
  if (have !== USERS || process.env.BENCH_REGENERATE === '1') {
    console.log(`generating ${USERS.toLocaleString()} users into schema ${SCHEMA} (once; later runs reuse them)...`);
    await pool.query(`DELETE FROM profiles WHERE workspace_id = $1`, [ws.id]);
    const t = Date.now();
    await generateUsers(pool, {
      workspaceId: ws.id,
      count: USERS,
      seed: 1,
      onProgress: (done, total) => process.stdout.write(`\r  ${done.toLocaleString()} / ${total.toLocaleString()}`),
    });
    console.log(`\n  generated in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    await pool.query(`VACUUM ANALYZE profiles`);
  } else {
    console.log(`reusing ${USERS.toLocaleString()} users in schema ${SCHEMA}`);
  }
  return { workspaceId: ws.id, companyId: ws.company_id };
}

/** psql COPY of the given SELECT through `gzip -1` to a file: what the machine does with no service in the way. */
async function ceiling(select: string, file: string): Promise<{ seconds: number; bytes: number }> {
  const out = await open(file, 'w');
  const t = performance.now();
  const psql = spawn('psql', ['-X', '-q', DATABASE_URL, '-c', `COPY (${select}) TO STDOUT`], {
    env: { ...process.env, PGOPTIONS: `-c search_path=${SCHEMA},public` },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const gzip = spawn('gzip', ['-1'], { stdio: [psql.stdout!, out.fd, 'inherit'] });
  const exited = (c: ChildProcess, what: string) =>
    new Promise<void>((resolve, reject) =>
      c.once('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${what} exited with ${code}`)))),
    );
  await Promise.all([exited(psql, 'psql'), exited(gzip, 'gzip')]);
  const seconds = (performance.now() - t) / 1000;
  await out.close();
  const bytes = (await stat(file)).size;
  await rm(file, { force: true });
  return { seconds, bytes };
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const srv = createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

async function startS3rver(): Promise<{ endpoint: string; child: ChildProcess; dir: string }> {
  const port = await freePort();
  const dir = path.join(WORK_DIR, 's3rver');
  await rm(dir, { recursive: true, force: true });
  await mkdir(dir, { recursive: true });
  const child = spawn(
    path.join(ROOT, 'node_modules/.bin/s3rver'),
    ['-d', dir, '-a', '127.0.0.1', '-p', String(port), '--silent', '--configure-bucket', 'bench'],
    {
      stdio: 'ignore',
    },
  );
  await new Promise((r) => setTimeout(r, 1500));
  return { endpoint: `http://127.0.0.1:${port}`, child, dir };
}

/** Peak resident set (VmHWM) of a live process, in MB. */
async function peakRssMb(pid: number): Promise<number> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const kb = Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0);
    return kb / 1024;
  } catch {
    return 0;
  }
}

/** CPU seconds (user + system) a process has used so far; 0 once it is gone. */
async function cpuSeconds(pid: number): Promise<number> {
  try {
    const stat = await readFile(`/proc/${pid}/stat`, 'utf8');
    // Fields after the parenthesised command name: utime and stime are the 12th and 13th of them, in clock ticks.
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS;
  } catch {
    return 0;
  }
}

const CLOCK_TICKS = 100;

/** The processes of the PostgreSQL server (postmaster and backends) on this machine. */
async function postgresPids(): Promise<number[]> {
  const { stdout } = await run('pgrep', ['-x', 'postgres']).catch(() => ({ stdout: '' }));
  return stdout.split('\n').filter(Boolean).map(Number);
}

/** CPU seconds used by a set of processes between two readings (processes that appeared count from zero). */
async function cpuOf(pids: number[]): Promise<Map<number, number>> {
  return new Map(await Promise.all(pids.map(async (pid) => [pid, await cpuSeconds(pid)] as [number, number])));
}
const cpuDelta = (before: Map<number, number>, after: Map<number, number>) =>
  [...after].reduce((sum, [pid, s]) => sum + s - (before.get(pid) ?? 0), 0);

async function startWorkers(config: Config, redis: Redis, count: number): Promise<ChildProcess[]> {
  const children = Array.from({ length: count }, () =>
    spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'worker', '--queues', 'export-shard,segment-export'], {
      cwd: ROOT,
      env: {
        ...process.env,
        NODE_ENV: 'production',
        DOWNLOAD_URL_SECRET: 'bench-only-download-url-secret',
        LOG_LEVEL: 'warn',
        DATABASE_URL,
        DATABASE_SCHEMA: SCHEMA,
        REDIS_PREFIX: config.REDIS_PREFIX,
        LOCAL_STORE_DIR: config.LOCAL_STORE_DIR,
        MIGRATE_ON_START: 'false',
        WORKER_CONCURRENCY: String(CONCURRENCY),
        WORKER_METRICS_PORT: '0',
        EXPORT_GZIP_LEVEL: '1',
      },
      stdio: ['ignore', 'ignore', 'inherit'],
    }),
  );
  const queues = new Queues(redis, config.REDIS_PREFIX);
  const deadline = Date.now() + 60_000;
  while ((await queues.get(EXPORT_SHARD_QUEUE).getWorkers()).length < count) {
    if (Date.now() > deadline) throw new Error('workers did not start');
    await new Promise((r) => setTimeout(r, 200));
  }
  await queues.close();
  return children;
}

async function stopWorkers(children: ChildProcess[]): Promise<void> {
  await Promise.all(
    children.map(
      (c) =>
        new Promise<void>((resolve) => {
          if (c.exitCode !== null) return resolve();
          c.once('exit', () => resolve());
          c.kill('SIGTERM');
        }),
    ),
  );
}

interface RunResult {
  name: string;
  /** Users the export held: every user for a full export, the changed ones for an incremental one. */
  users: number;
  workers: number;
  seconds: number;
  usersPerSecond: number;
  /** Cores the worker processes and PostgreSQL kept busy during the export, on average. */
  workerCores: number;
  postgresCores: number;
  parts: number;
  bytes: number;
  peakRssMb: number;
}

interface RunSpec {
  name: string;
  format: OutputFormat;
  target: 'local' | 's3';
  /** An incremental run: which profiles it writes to first (a condition over `profiles`), relative to which export. */
  incremental?: { changed: string; base: 'last-full' | 'last' };
}

/**
 * The base and the expected users of an incremental run: writes to the run's share of the users (not timed), relative
 * to the last ready full export of this run or to the last ready export of any kind (so a full export must run
 * before it: BENCH_RUNS=gzip-local,gzip-incremental).
 */
async function prepareIncremental(
  pool: Pool,
  workspaceId: string,
  run: NonNullable<RunSpec['incremental']>,
): Promise<{ changesSince: string; users: number }> {
  const base = (
    await pool.query<{ object_prefix: string }>(
      `SELECT object_prefix FROM exports WHERE workspace_id = $1 AND status = 'ready' AND members_forgotten_at IS NULL
          AND ($2 OR request->'changesSince' = 'null'::jsonb)
        ORDER BY created_at DESC LIMIT 1`,
      [workspaceId, run.base === 'last'],
    )
  ).rows[0];
  if (!base)
    throw new Error(
      'an incremental run needs a full export before it in the same run (BENCH_RUNS=gzip-local,gzip-incremental)',
    );
  const changed = await pool.query(
    `UPDATE profiles SET last_name = last_name WHERE workspace_id = $1 AND ${run.changed}`,
    [workspaceId],
  );
  return { changesSince: base.object_prefix, users: changed.rowCount ?? 0 };
}

async function exportRun(
  { name, format, target, incremental }: RunSpec,
  workerCount: number,
  pool: Pool,
  redis: Redis,
  ws: { workspaceId: string; companyId: string },
): Promise<RunResult> {
  let s3: Awaited<ReturnType<typeof startS3rver>> | undefined;
  if (target === 's3') {
    s3 = await startS3rver();
    const destination = {
      provider: 's3',
      bucket: 'bench',
      region: 'us-east-1',
      endpoint: s3.endpoint,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    };
    await pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
      ws.workspaceId,
      JSON.stringify(destination),
    ]);
  } else {
    await pool.query(`UPDATE workspaces SET export_destination = NULL WHERE id = $1`, [ws.workspaceId]);
  }
  const config = benchConfig({ NODE_ENV: 'production', DOWNLOAD_URL_SECRET: 'bench-only-download-url-secret' });
  await rm(config.LOCAL_STORE_DIR, { recursive: true, force: true });
  const workers = await startWorkers(config, redis, workerCount);
  const queues = new Queues(redis, config.REDIS_PREFIX);
  const peaks = new Map<number, number>();
  const sampler = setInterval(() => {
    for (const w of workers)
      if (w.pid) void peakRssMb(w.pid).then((mb) => peaks.set(w.pid!, Math.max(peaks.get(w.pid!) ?? 0, mb)));
  }, 250);
  try {
    const workerPids = workers.flatMap((w) => (w.pid ? [w.pid] : []));
    const delta = incremental ? await prepareIncremental(pool, ws.workspaceId, incremental) : null;
    const workerCpuBefore = await cpuOf(workerPids);
    const postgresCpuBefore = await cpuOf(await postgresPids());
    const t = performance.now();
    const created = await createExport({ config, pool, redis, queues, log: createLogger('warn') }, ws, {
      segment_id: SEGMENT,
      fields_to_export: FIELDS,
      output_format: format,
      changes_since: delta?.changesSince ?? null,
    });
    for (;;) {
      const row = (await pool.query(`SELECT status, error FROM exports WHERE id = $1`, [created.exportId])).rows[0];
      if (row.status === 'ready') break;
      if (row.status === 'failed') throw new Error(`export failed: ${row.error}`);
      await new Promise((r) => setTimeout(r, 100));
    }
    const seconds = (performance.now() - t) / 1000;
    const workerCores = cpuDelta(workerCpuBefore, await cpuOf(workerPids)) / seconds;
    const postgresCores = cpuDelta(postgresCpuBefore, await cpuOf(await postgresPids())) / seconds;
    for (const w of workers) if (w.pid) peaks.set(w.pid, Math.max(peaks.get(w.pid) ?? 0, await peakRssMb(w.pid)));
    const stats = (
      await pool.query(
        `SELECT count(*) AS parts, sum(users) AS users, sum(bytes) AS bytes FROM export_parts WHERE export_id = $1`,
        [created.exportId],
      )
    ).rows[0];
    const users = delta?.users ?? USERS;
    if (Number(stats.users) !== users) throw new Error(`exported ${stats.users} users, expected ${users}`);
    return {
      name,
      users,
      workers: workerCount,
      seconds,
      usersPerSecond: users / seconds,
      workerCores,
      postgresCores,
      parts: Number(stats.parts),
      bytes: Number(stats.bytes),
      peakRssMb: Math.max(...peaks.values()),
    };
  } finally {
    clearInterval(sampler);
    await queues.close();
    await stopWorkers(workers);
    await rm(config.LOCAL_STORE_DIR, { recursive: true, force: true });
    if (s3) {
      s3.child.kill('SIGTERM');
      await rm(s3.dir, { recursive: true, force: true });
    }
  }
}

/**
 * What recording a full export's member lists costs on its own: the shards' INSERT of one sorted bigint[] per
 * random_bucket (src/pipelines/exports/shard/run-shard.ts), for every user, in one transaction that is rolled back.
 */
async function memberListCost(pool: Pool, workspaceId: string): Promise<{ seconds: number; bytesPerMember: number }> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const exportId = (await client.query<{ id: string }>(`SELECT gen_random_uuid() AS id`)).rows[0]!.id;
    await client.query(`SET LOCAL session_replication_role = replica`); // no foreign key to an exports row
    const t = performance.now();
    await client.query(
      `INSERT INTO export_members (export_id, random_bucket, profile_ids) ${wholeMembersSelect(exportId, workspaceId, 'true', 0, 10_000)}`,
    );
    const seconds = (performance.now() - t) / 1000;
    const size = await client.query<{ bytes: string }>(
      `SELECT sum(pg_column_size(m.*))::bigint AS bytes FROM export_members m WHERE export_id = $1`,
      [exportId],
    );
    return { seconds, bytesPerMember: Number(size.rows[0]!.bytes) / USERS };
  } finally {
    await client.query('ROLLBACK').catch(() => {});
    client.release();
  }
}

async function main(): Promise<void> {
  await mkdir(WORK_DIR, { recursive: true });
  const config = benchConfig();
  const pool = createPool(config, 4);
  const redis = createRedis(config, 'producer', { enableOfflineQueue: true });
  try {
    const ws = await ensureUsers(pool);
    // No export of an earlier, interrupted run may hold the segment lock.
    const stale = await redis.keys(`${config.REDIS_PREFIX}:*`);
    if (stale.length > 0) await redis.del(...stale);
    await pool.query(`DELETE FROM exports WHERE workspace_id = $1`, [ws.workspaceId]);

    const cpus = (await run('nproc')).stdout.trim();
    console.log(
      `\nmachine: ${cpus} cores; ${WORKER_COUNTS.join(', ')} worker process(es) x concurrency ${CONCURRENCY}; shards of ${SHARD_BUCKETS} buckets; gzip level 1`,
    );
    console.log(`fields: ${FIELDS.join(', ')}\n`);

    const columns = FIELDS.map((f) => `p.${f}`).join(', ');
    const raw = await ceiling(
      `SELECT ${columns} FROM profiles p WHERE p.workspace_id = '${ws.workspaceId}'`,
      path.join(WORK_DIR, 'ceiling-raw.gz'),
    );
    const spec = ExportSpecSchema.parse({
      fields: FIELDS,
      customAttributes: null,
      outputFormat: 'gzip',
      callbackEndpoint: null,
    });
    const lines = exportLineSelect({
      workspaceId: ws.workspaceId,
      filter: { all: [] },
      spec,
      bucketFrom: 0,
      bucketTo: 10_000,
      since: windowStart(new Date()),
    });
    const built = await ceiling(lines, path.join(WORK_DIR, 'ceiling-lines.gz'));
    const rawRate = USERS / raw.seconds;
    const builtRate = USERS / built.seconds;
    console.log(
      `ceiling, stored columns:  psql COPY | gzip -1 > file   ${raw.seconds.toFixed(1)} s  ${Math.round(rawRate).toLocaleString()} users/s  (${(raw.bytes / 1e6).toFixed(0)} MB)`,
    );
    console.log(
      `ceiling, NDJSON lines:    psql COPY | gzip -1 > file   ${built.seconds.toFixed(1)} s  ${Math.round(builtRate).toLocaleString()} users/s  (${(built.bytes / 1e6).toFixed(0)} MB)\n`,
    );

    const members = await memberListCost(pool, ws.workspaceId);
    console.log(
      `member lists of a full export (export_members, every user, alone in SQL): ${members.seconds.toFixed(2)} s, ${members.bytesPerMember.toFixed(1)} bytes a member\n`,
    );

    const results: RunResult[] = [];
    const runs: RunSpec[] = [
      { name: 'gzip-local', format: 'gzip', target: 'local' },
      { name: 'zip-local', format: 'zip', target: 'local' },
      { name: 'parquet-local', format: 'parquet', target: 'local' },
      {
        name: 'gzip-incremental',
        format: 'gzip',
        target: 'local',
        incremental: { changed: 'id % 50 = 0', base: 'last-full' },
      },
      {
        name: 'gzip-incremental-0.1',
        format: 'gzip',
        target: 'local',
        incremental: { changed: 'id % 1000 = 0', base: 'last' },
      },
      { name: 'gzip-s3', format: 'gzip', target: 's3' },
      { name: 'zip-s3', format: 'zip', target: 's3' },
      { name: 'parquet-s3', format: 'parquet', target: 's3' },
    ];
    for (const workerCount of WORKER_COUNTS) {
      for (const spec of runs.filter((r) => ONLY.includes(r.name))) {
        const r = await exportRun(spec, workerCount, pool, redis, ws);
        results.push(r);
        const name = spec.name;
        const full = results.find((x) => x.name === 'gzip-local' && x.workers === workerCount);
        const share = spec.incremental && full ? `  ${(r.seconds / full.seconds).toFixed(3)} of gzip-local's time` : '';
        console.log(
          `${name.padEnd(20)} x${workerCount} ${r.seconds.toFixed(1).padStart(6)} s  ${r.users.toLocaleString().padStart(9)} users ${Math.round(r.usersPerSecond).toLocaleString().padStart(8)} users/s ` +
            `(${Math.round(r.usersPerSecond / workerCount).toLocaleString()} per worker)  ` +
            `${String(r.parts).padStart(4)} parts  ${(r.bytes / 1e6).toFixed(0).padStart(5)} MB  worker peak RSS ${r.peakRssMb.toFixed(0)} MB  ` +
            `CPU: workers ${r.workerCores.toFixed(2)} cores, PostgreSQL ${r.postgresCores.toFixed(2)} cores  ` +
            `ratio ${(r.usersPerSecond / rawRate).toFixed(2)} of stored-columns ceiling, ${(r.usersPerSecond / builtRate).toFixed(2)} of NDJSON ceiling${share}`,
        );
      }
    }
    await pool.query(`UPDATE workspaces SET export_destination = NULL WHERE id = $1`, [ws.workspaceId]);
    console.log(
      `\n${JSON.stringify({ users: USERS, workers: WORKER_COUNTS, concurrency: CONCURRENCY, shardBuckets: SHARD_BUCKETS, ceilingRaw: rawRate, ceilingLines: builtRate, memberLists: members, results })}`,
    );
  } finally {
    redis.disconnect();
    await pool.end();
  }
}

main().catch((err: unknown) => {
  console.error(err);
  process.exit(1);
});
