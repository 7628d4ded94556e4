/**
 * Event-stream delivery benchmark (`npm run bench:events`, issue 42 "Speed and scale").
 *
 * In the schema BENCH_SCHEMA (`bench_events`) of DATABASE_URL's database (recreated each run; BENCH_KEEP=1 keeps it):
 *  0. loads BENCH_EVENTS (10,000,000) logged events into event_log by COPY, in transactions of BENCH_COPY_ROWS
 *     (5,000: each its own xid, as ingestion's apply batches are), accepted over the BENCH_HOURS (3) hours before now,
 *     three custom events to one purchase, ~100 bytes of properties each, over 200,000 users;
 *  1. declares three event exports of the workspace to the built-in local store (ndjson, parquet, avro;
 *     max_events_per_file 15,000, the default);
 *  2. BENCH_RUNS (1) times, alternating: the ceiling, `psql -c "COPY (SELECT <the exported columns> FROM event_log
 *     WHERE workspace_id = ...) TO STDOUT" | gzip -1 > /dev/null`, then one format's delivery, ceiling again, the next
 *     format...: each delivery is a child process (`bench/events.ts deliver <export id>`) running the worker's
 *     flushEventExport once from nothing delivered (plan, write every file, close the hours), which prints its time,
 *     events and its own peak RSS (getrusage maxrss). Each delivery's ratio is to the mean of the ceilings run just
 *     before and after it, so that a change of the machine's load during the run moves both.
 * Printed: events/s, the ratio to the ceiling (targets: ndjson >= 0.8, parquet and avro >= 0.6), the delivering
 * process's peak RSS (target < 512 MB), the machine's busy share during each delivery, and the bytes written.
 * Nothing here is a test: figures depend on the machine and on what else runs on it.
 */
import { execFile, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { rm } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { createPool, type Pool } from '../src/platform/db/pool.js';
import { migrate } from '../src/platform/db/migrate.js';
import { createCommandLogger } from '../src/platform/logger.js';
import { Metrics } from '../src/platform/metrics.js';
import { flushEventExport } from '../src/pipelines/events/flush-export.js';
import type { EventFormat } from '../src/pipelines/events/formats/schemas.js';
import { cpuMeter } from './cpu.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000_000);
const COPY_ROWS = Number(process.env.BENCH_COPY_ROWS ?? 5_000);
const HOURS = Number(process.env.BENCH_HOURS ?? 3);
const RUNS = Number(process.env.BENCH_RUNS ?? 1);
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_events';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const WORK_DIR = process.env.BENCH_DIR ?? '/tmp/ces-bench-events';
const FORMATS = (process.env.BENCH_FORMATS?.split(',') ?? ['ndjson', 'parquet', 'avro']) as EventFormat[];
const TARGETS: Record<EventFormat, number> = { ndjson: 0.8, avro: 0.6, parquet: 0.6 };
const FILE_EVENTS = 15_000;
/** BENCH_REUSE=1: the events a run kept (BENCH_KEEP=1) in the schema are delivered again, not loaded anew. */
const REUSE = process.env.BENCH_REUSE === '1';
const NAMES = ['added_to_cart', 'viewed_product', 'searched', 'signed_in', 'shared_item', 'started_checkout'];
const COLUMNS = 'id, type, accepted_at, time, user_id, external_user_id, app_id, name, properties, data';
const run = promisify(execFile);
const config = { DATABASE_URL, DATABASE_SCHEMA: SCHEMA, DATABASE_POOL_SIZE: 4 };
const storeConfig = {
  LOCAL_STORE_DIR: path.join(WORK_DIR, 'bucket'),
  EVENTS_INSTANCE: 'ces',
  EVENTS_ENVIRONMENT: 'local',
  EVENT_EXPORT_RETRY_MAX_SECONDS: 300,
};

const log = (line: string) => console.log(`[bench:events] ${line}`);
const copyText = (v: string | null) =>
  v === null ? '\\N' : v.replace(/[\\\t\n\r]/g, (c) => ({ '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' })[c]!);

/** Event i of n as an event_log row in COPY text: 3 custom events to 1 purchase, accepted in order over the hours. */
export function eventLine(ws: string, i: number, n: number, start: number, spanMs: number): string {
  const user = (i * 7919) % 200_000;
  const at = new Date(start + Math.floor((i / n) * spanMs));
  const purchase = i % 4 === 3;
  const properties = purchase
    ? { color: ['red', 'blue', 'green'][i % 3], size: 36 + (i % 12), gift: i % 7 === 0 }
    : { page: `/catalog/item/${i % 10_000}`, referrer: 'home', position: i % 40, tags: ['new', 'sale'] };
  const data = purchase
    ? { price: Math.round((5 + (i % 200) * 0.75) * 100) / 100, currency: 'USD', quantity: 1 + (i % 3) }
    : {};
  return `${[
    ws,
    at.toISOString(),
    randomUUID(),
    purchase ? 'users.behaviors.Purchase' : 'users.behaviors.CustomEvent',
    new Date(at.getTime() - (i % 5000)).toISOString(),
    String(1 + user),
    `65a1c0a2b3c4d5e6f7${user.toString(16).padStart(6, '0')}`,
    user % 10 === 0 ? null : `customer-${user}`,
    i % 2 ? 'a1b2c3d4-ios' : 'e5f6a7b8-android',
    purchase ? `sku-${i % 5000}` : NAMES[i % NAMES.length]!,
    JSON.stringify(properties),
    JSON.stringify(data),
  ]
    .map(copyText)
    .join('\t')}\n`;
}

async function prepare(pool: Pool): Promise<string> {
  await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await migrate(pool, SCHEMA);
  const company = (await pool.query<{ id: string }>(`INSERT INTO companies (name) VALUES ('bench') RETURNING id`))
    .rows[0]!.id;
  return (
    await pool.query<{ id: string }>(
      `INSERT INTO workspaces (company_id, name) VALUES ($1, 'bench-events') RETURNING id`,
      [company],
    )
  ).rows[0]!.id;
}

/** The workspace of a kept run's events, if the schema holds one. */
async function loaded(pool: Pool): Promise<string | undefined> {
  const { rows } = await pool
    .query<{ id: string }>(`SELECT id FROM ${SCHEMA}.workspaces WHERE name = 'bench-events'`)
    .catch(() => ({ rows: [] as { id: string }[] }));
  if (rows[0]) log(`reusing the events kept in ${SCHEMA}`);
  return rows[0]?.id;
}

/** COPY of the events, one transaction (one xid) per BENCH_COPY_ROWS rows, on one connection. */
async function loadEvents(ws: string): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL, options: `-c search_path=${SCHEMA},public` });
  await client.connect();
  const spanMs = HOURS * 3_600_000;
  const start = Date.now() - spanMs - 60_000;
  const started = performance.now();
  try {
    for (let from = 0; from < EVENTS; from += COPY_ROWS) {
      let chunk = '';
      for (let i = from; i < Math.min(EVENTS, from + COPY_ROWS); i++) chunk += eventLine(ws, i, EVENTS, start, spanMs);
      const copy = client.query(
        copyFrom(
          `COPY event_log (workspace_id, accepted_at, id, type, time, profile_id, user_id, external_user_id, app_id, name, properties, data) FROM STDIN`,
        ),
      );
      await new Promise<void>((resolve, reject) => {
        copy.on('finish', resolve);
        copy.on('error', reject);
        copy.end(chunk);
      });
      if (from % 1_000_000 === 0 && from > 0)
        log(
          `  ${from.toLocaleString('en-US')} rows loaded (${Math.round(from / ((performance.now() - started) / 1000))} rows/s)`,
        );
    }
    const seconds = (performance.now() - started) / 1000;
    log(
      `loaded ${EVENTS.toLocaleString('en-US')} events in ${seconds.toFixed(1)} s by COPY (${Math.round(EVENTS / seconds).toLocaleString('en-US')} rows/s, ` +
        `${(((seconds * 1e6) / EVENTS) | 0).toString()} µs a row with event_log's indexes)`,
    );
    await client.query('VACUUM ANALYZE event_log');
  } finally {
    await client.end();
  }
}

async function declareExports(pool: Pool, ws: string): Promise<Record<EventFormat, string>> {
  const ids = {} as Record<EventFormat, string>;
  for (const format of FORMATS) {
    ids[format] = randomUUID();
    await pool.query(
      `INSERT INTO event_exports (id, workspace_id, name, format, flush_seconds, max_events_per_file)
       VALUES ($1, $2, $3, $4, 60, $5)`,
      [ids[format], ws, `bench ${format}`, format, FILE_EVENTS],
    );
  }
  return ids;
}

/** Forgets what an export delivered (its files, hours and bound; the bucket's directory), for a run from nothing. */
async function resetExport(pool: Pool, id: string): Promise<void> {
  await pool.query(`DELETE FROM event_export_files WHERE export_id = $1`, [id]);
  await pool.query(`DELETE FROM event_export_hours WHERE export_id = $1`, [id]);
  await pool.query(`UPDATE event_exports SET planned_xid = 0 WHERE id = $1`, [id]);
  await rm(storeConfig.LOCAL_STORE_DIR, { recursive: true, force: true });
}

async function ceilingSeconds(ws: string): Promise<number> {
  const sql = `COPY (SELECT ${COLUMNS} FROM ${SCHEMA}.event_log WHERE workspace_id = '${ws}') TO STDOUT`;
  const started = performance.now();
  await run('bash', ['-o', 'pipefail', '-c', `psql "$DATABASE_URL" -Xq -c "${sql}" | gzip -1 > /dev/null`], {
    env: { ...process.env, DATABASE_URL },
    maxBuffer: 1 << 20,
  });
  return (performance.now() - started) / 1000;
}

interface Delivery {
  seconds: number;
  events: number;
  files: number;
  hoursClosed: number;
  bytes: number;
  maxRssMb: number;
}

/** One flushEventExport pass from nothing delivered, in a child process (its own peak RSS). */
async function deliver(id: string): Promise<Delivery & { busy: number }> {
  const child = spawn(process.execPath, ['--import', 'tsx', import.meta.filename, 'deliver', id], {
    env: process.env,
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const meter = cpuMeter({});
  let out = '';
  child.stdout.on('data', (d: Buffer) => (out += d.toString()));
  const code = await new Promise<number | null>((resolve) => child.on('exit', resolve));
  if (code !== 0) throw new Error(`delivery of ${id} exited with ${code}: ${out}`);
  return { ...(JSON.parse(out.trim().split('\n').at(-1)!) as Delivery), busy: meter.stop().machineBusy };
}

/** The child: the worker's pass over one export, then its figures as one JSON line. */
async function deliverChild(id: string): Promise<void> {
  const pool = createPool(config);
  try {
    const deps = { config: storeConfig, pool, metrics: new Metrics(false), log: createCommandLogger('warn') };
    const started = performance.now();
    const pass = await flushEventExport(deps, id);
    const seconds = (performance.now() - started) / 1000;
    const { rows } = await pool.query<{ bytes: number }>(
      `SELECT coalesce(sum(bytes), 0)::float8 AS bytes FROM event_export_files WHERE export_id = $1`,
      [id],
    );
    const maxRssMb = process.resourceUsage().maxRSS / 1024;
    console.log(JSON.stringify({ ...pass, seconds, bytes: rows[0]!.bytes, maxRssMb }));
  } finally {
    await pool.end();
  }
}

const perSecond = (n: number, s: number) => Math.round(n / s).toLocaleString('en-US');

async function main(): Promise<void> {
  log(`${EVENTS.toLocaleString('en-US')} events over ${HOURS} h, formats ${FORMATS.join(', ')}, ${RUNS} run(s)`);
  const pool = createPool(config);
  try {
    const ws = (REUSE && (await loaded(pool))) || (await prepare(pool));
    if (!REUSE || (await pool.query(`SELECT 1 FROM event_log LIMIT 1`)).rowCount === 0) await loadEvents(ws);
    const { rows } = await pool.query<{ bytes: number }>(
      `SELECT sum(pg_total_relation_size(c.oid))::float8 AS bytes FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
        WHERE i.inhparent = 'event_log'::regclass`,
    );
    log(
      `event_log partitions with their indexes: ${(rows[0]!.bytes / 1e6).toFixed(0)} MB, ${(rows[0]!.bytes / EVENTS).toFixed(0)} bytes a row`,
    );
    await pool.query(`DELETE FROM event_exports`);
    const ids = await declareExports(pool, ws);
    for (let r = 0; r < RUNS; r++) {
      let before = await ceilingSeconds(ws);
      log(`ceiling (psql COPY | gzip -1): ${perSecond(EVENTS, before)} events/s`);
      for (const format of FORMATS) {
        await resetExport(pool, ids[format]);
        const d = await deliver(ids[format]);
        const after = await ceilingSeconds(ws);
        log(`ceiling (psql COPY | gzip -1): ${perSecond(EVENTS, after)} events/s`);
        const ceiling = (before + after) / 2;
        const ok = d.events === EVENTS ? '' : ` (MISSING: ${EVENTS - d.events} events not delivered)`;
        log(
          `${format.padEnd(7)} ${perSecond(d.events, d.seconds)} events/s = ${(ceiling / d.seconds).toFixed(2)} of the ceiling ` +
            `(target ${TARGETS[format]}); ${d.files} files, ${d.hoursClosed} hours closed, ${(d.bytes / 1e6).toFixed(0)} MB; ` +
            `peak RSS ${d.maxRssMb.toFixed(0)} MB (target < 512); machine ${Math.round(d.busy * 100)}% busy${ok}`,
        );
        before = after;
      }
    }
  } finally {
    if (!process.env.BENCH_KEEP) await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
    await pool.end();
    if (!process.env.BENCH_KEEP) await rm(WORK_DIR, { recursive: true, force: true });
  }
}

if (process.argv[2] === 'deliver') await deliverChild(process.argv[3]!);
else await main();
