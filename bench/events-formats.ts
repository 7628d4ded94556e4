/**
 * Event-stream format benchmark (`npx tsx bench/events-formats.ts`): how fast encodeEvents turns logged events into
 * files (src/pipelines/events/formats/), against the ceiling the issue sets for the whole delivery, measured in the
 * same run on the same rows: `psql COPY` of the event_log rows `| gzip -1` (issue 42: ndjson at >= 0.8 of it, Parquet
 * and Avro at >= 0.6, on 2 cores).
 *
 * Data: BENCH_EVENTS (1,000,000) logged events, three custom events to one purchase (names, ids and properties of a
 * plausible app: ~100 bytes of properties JSON), times over one hour. They are loaded into a table of event_log's
 * columns in the schema BENCH_SCHEMA (`bench_events_formats`) of DATABASE_URL's database (dropped at the end), for the
 * ceiling; BENCH_PG=0 skips that part.
 *
 * Then, BENCH_RUNS (3) times, the best run kept: the ceiling (`psql -c "COPY ... TO STDOUT" | gzip -1 > /dev/null`,
 * PostgreSQL and gzip each on a core), and each format encoding every event in files of BENCH_FILE_EVENTS (15,000, the
 * default max_events_per_file), one file at a time, in this process (its main thread builds records, zlib and DuckDB
 * work on libuv's pool: up to both cores). Printed: events/s, the ratio to the ceiling, CPU seconds of this process
 * per million events (steadier than wall time on a shared machine), and the bytes written.
 *
 * What the encoder figures leave out: reading the rows from PostgreSQL into LoggedEvent objects and uploading the
 * files, which a delivery adds (its own benchmark measures the whole path). Nothing here is a test: figures depend on
 * the machine and on what else runs on it.
 */
import { execFile } from 'node:child_process';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import { promisify } from 'node:util';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import { encodeEvents } from '../src/pipelines/events/formats/encoders.js';
import type { EventFormat } from '../src/pipelines/events/formats/schemas.js';
import type { EventType, LoggedEvent } from '../src/profiles/event-log-types.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 1_000_000);
const FILE_EVENTS = Number(process.env.BENCH_FILE_EVENTS ?? 15_000);
const RUNS = Number(process.env.BENCH_RUNS ?? 3);
const WITH_PG = process.env.BENCH_PG !== '0';
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_events_formats';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const FORMATS = (process.env.BENCH_FORMATS?.split(',') ?? ['ndjson', 'avro', 'parquet']) as EventFormat[];
const TARGETS: Record<EventFormat, number> = { ndjson: 0.8, avro: 0.6, parquet: 0.6 };
const run = promisify(execFile);

const WORKSPACE = '5d2e8a41-7c3b-4f09-9e61-0b4a3c2d1e7f';
const START = Date.UTC(2026, 0, 15, 10);
const NAMES = ['added_to_cart', 'viewed_product', 'searched', 'signed_in', 'shared_item', 'started_checkout'];

/**
 * A deterministic stream of plausible events: 3 custom events to 1 purchase, 200,000 users, one hour. Every event is
 * built by the same literal (one shape, as a reader of the log builds them), so property reads stay monomorphic.
 */
function makeEvents(n: number): LoggedEvent[] {
  const events: LoggedEvent[] = new Array(n);
  for (let i = 0; i < n; i++) {
    const user = (i * 7919) % 200_000;
    const at = new Date(START + Math.floor((i / n) * 3_600_000));
    const purchase = i % 4 === 3;
    events[i] = {
      id: `6f1c2a4e-3b5d-4c7e-${(8000 + (i % 4000)).toString(16)}-${i.toString(16).padStart(12, '0')}`,
      type: purchase ? 'users.behaviors.Purchase' : 'users.behaviors.CustomEvent',
      workspaceId: WORKSPACE,
      acceptedAt: at,
      time: new Date(at.getTime() - (i % 5000)),
      userId: `65a1c0a2b3c4d5e6f7${user.toString(16).padStart(6, '0')}`,
      externalUserId: user % 10 === 0 ? null : `customer-${user}`,
      appId: i % 2 ? 'a1b2c3d4-ios' : 'e5f6a7b8-android',
      name: purchase ? `sku-${i % 5000}` : NAMES[i % NAMES.length]!,
      properties: purchase
        ? { color: ['red', 'blue', 'green'][i % 3], size: 36 + (i % 12), gift: i % 7 === 0 }
        : { page: `/catalog/item/${i % 10_000}`, referrer: 'home', position: i % 40, tags: ['new', 'sale'] },
      data: purchase
        ? { price: Math.round((5 + (i % 200) * 0.75) * 100) / 100, currency: 'USD', quantity: 1 + (i % 3) }
        : {},
    } as LoggedEvent;
  }
  return events;
}

const copyText = (v: string | null) =>
  v === null ? '\\N' : v.replace(/[\\\t\n\r]/g, (c) => ({ '\\': '\\\\', '\t': '\\t', '\n': '\\n', '\r': '\\r' })[c]!);

/** The events as event_log rows, in PostgreSQL's COPY text format. */
function* copyLines(events: LoggedEvent[]): Generator<string> {
  let chunk = '';
  for (const [i, e] of events.entries()) {
    chunk +=
      [
        e.workspaceId,
        e.acceptedAt.toISOString(),
        String(1_000_000 + Math.floor(i / 50)),
        e.id,
        e.type,
        e.time.toISOString(),
        String(i % 200_000),
        e.userId,
        e.externalUserId,
        e.appId,
        e.name,
        JSON.stringify(e.properties),
        JSON.stringify(e.data),
      ]
        .map(copyText)
        .join('\t') + '\n';
    if (chunk.length > 1 << 20) {
      yield chunk;
      chunk = '';
    }
  }
  if (chunk) yield chunk;
}

async function loadTable(events: LoggedEvent[]): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  try {
    await client.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE; CREATE SCHEMA ${SCHEMA}`);
    // event_log's columns (migration 0320), without its partitions and indexes: only reading it is measured.
    await client.query(`CREATE TABLE ${SCHEMA}.event_log (
      workspace_id uuid NOT NULL, accepted_at timestamptz NOT NULL, xid bigint NOT NULL, id uuid NOT NULL,
      type text NOT NULL, time timestamptz NOT NULL, profile_id bigint, user_id text, external_user_id text,
      app_id text, name text, properties jsonb, data jsonb NOT NULL)`);
    await pipeline(Readable.from(copyLines(events)), client.query(copyFrom(`COPY ${SCHEMA}.event_log FROM STDIN`)));
    await client.query(`VACUUM ANALYZE ${SCHEMA}.event_log`);
  } finally {
    await client.end();
  }
}

async function dropTable(): Promise<void> {
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).finally(() => client.end());
}

/** Seconds of `psql COPY ... TO STDOUT | gzip -1`, the ceiling. */
async function ceilingSeconds(): Promise<number> {
  const sql = `COPY ${SCHEMA}.event_log TO STDOUT`;
  const started = process.hrtime.bigint();
  await run('bash', ['-o', 'pipefail', '-c', `psql "$DATABASE_URL" -Xq -c "${sql}" | gzip -1 > /dev/null`], {
    env: { ...process.env, DATABASE_URL },
  });
  return Number(process.hrtime.bigint() - started) / 1e9;
}

interface Measure {
  seconds: number;
  cpuSeconds: number;
  bytes: number;
}

async function encodeAll(format: EventFormat, byType: Map<EventType, LoggedEvent[]>): Promise<Measure> {
  const cpu = process.cpuUsage();
  const started = process.hrtime.bigint();
  let bytes = 0;
  for (const [type, events] of byType)
    for (let i = 0; i < events.length; i += FILE_EVENTS)
      bytes += (await encodeEvents(format, type, events.slice(i, i + FILE_EVENTS))).length;
  const seconds = Number(process.hrtime.bigint() - started) / 1e9;
  const used = process.cpuUsage(cpu);
  return { seconds, cpuSeconds: (used.user + used.system) / 1e6, bytes };
}

const perSecond = (s: number) => Math.round(EVENTS / s).toLocaleString('en-US');

async function main(): Promise<void> {
  console.log(`events-formats: ${EVENTS.toLocaleString('en-US')} events, files of ${FILE_EVENTS}, best of ${RUNS}`);
  const events = makeEvents(EVENTS);
  const byType = new Map<EventType, LoggedEvent[]>();
  for (const e of events) {
    const list = byType.get(e.type) ?? [];
    list.push(e);
    byType.set(e.type, list);
  }
  if (WITH_PG) await loadTable(events);
  try {
    const best: Partial<Record<EventFormat | 'ceiling', Measure>> = {};
    const keep = (k: EventFormat | 'ceiling', m: Measure) => {
      if (!best[k] || m.seconds < best[k].seconds) best[k] = m;
    };
    for (let r = 0; r < RUNS; r++) {
      if (WITH_PG) keep('ceiling', { seconds: await ceilingSeconds(), cpuSeconds: 0, bytes: 0 });
      for (const format of FORMATS) keep(format, await encodeAll(format, byType));
    }
    const ceiling = best.ceiling?.seconds;
    if (ceiling) console.log(`ceiling (psql COPY | gzip -1): ${perSecond(ceiling)} events/s`);
    for (const format of FORMATS) {
      const m = best[format]!;
      const ratio = ceiling ? ` = ${(ceiling / m.seconds).toFixed(2)} of the ceiling (target ${TARGETS[format]})` : '';
      console.log(
        `${format.padEnd(7)} ${perSecond(m.seconds)} events/s${ratio}; ` +
          `${((m.cpuSeconds / EVENTS) * 1e6).toFixed(2)} CPU s per million; ${(m.bytes / 1e6).toFixed(1)} MB`,
      );
    }
  } finally {
    if (WITH_PG) await dropTable();
  }
}

await main();
