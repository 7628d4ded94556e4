import { hash, randomUUID } from 'node:crypto';
import { finished } from 'node:stream/promises';
import { from as copyFrom } from 'pg-copy-streams';
import { LOG_COPY_COLUMNS, LogRowsEncoder, type LogRow } from './event-log-copy.js';
import type { Pool, PoolClient } from '../platform/db/pool.js';
import type { EventEntry } from './event-log-types.js';
import { ROLLUP_CTES, rollupParams, ROLLUPS_SKIPPED_FOR_BENCH } from './analytics-rollups.js';

/**
 * Writing the event log (migration 0320, docs/events.md): each writer of profiles logs what it applied in the same
 * transaction, so an event is in the log exactly when its change is on the profile. One COPY per batch (and one
 * statement for the analytics rollups).
 */

/**
 * SQL of an event's id from SQL of its workspace id and key: a UUID made of the md5 of the two (stable, and unique as
 * the key is), or a fresh one when the key is null. For writers that log in the statement that applies the change;
 * `eventId` is the same in the process.
 */
export const eventIdSql = (workspaceId: string, key: string): string =>
  `CASE WHEN ${key} IS NULL THEN gen_random_uuid() ELSE md5(${workspaceId}::text || ':' || ${key})::uuid END`;

/** An event's id as `eventIdSql` makes it (a workspace id is lower-case text in PostgreSQL, as `uuid::text` prints it). */
export const eventId = (workspaceId: string, key: string | null): string => idOf(idPrefix(workspaceId), key);

/** The part of an id's hashed text that its workspace gives (made once per workspace of a batch by `logRows`). */
const idPrefix = (workspaceId: string) => `${workspaceId.toLowerCase()}:`;
const idOf = (prefix: string, key: string | null): string => (key === null ? randomUUID() : hash('md5', prefix + key));

/**
 * The rows, every value made by the writer (no join to `profiles` for the identifiers, no id hashed in SQL), written by
 * COPY in its binary format (./event-log-copy.ts): 200,000 rows took PostgreSQL 1.15 s so (text format) against
 * 1.98 s as an INSERT from one jsonb parameter, which was itself cheaper in the process than eleven array parameters
 * pg escaped element by element (BENCHMARKS.md).
 */
const COPY_LOG = `COPY event_log (${LOG_COPY_COLUMNS}) FROM STDIN (FORMAT binary)`;

/** Where a profile's identifiers come from when the writer did not give them (`identifiersOf`). */
type ReadIdentifiers = Map<number, { service_id: string; external_id: string | null }>;

/** COPY_LOG's input: the entries as rows, their ids made and their identifiers given or read. */
export function logRows(entries: EventEntry[], read: ReadIdentifiers = new Map()): Buffer[] {
  const encoder = new LogRowsEncoder();
  const row: LogRow = { ...EMPTY_ROW };
  // The ids' prefix, made once per workspace rather than lower-cased again for every event.
  let workspace = '';
  let prefix = '';
  for (const e of entries) {
    if (e.workspaceId !== workspace) [workspace, prefix] = [e.workspaceId, idPrefix(e.workspaceId)];
    const ids = e.userId === undefined && e.profileId !== null ? read.get(e.profileId) : undefined;
    row.workspaceId = e.workspaceId;
    row.id = idOf(prefix, e.key);
    row.type = e.type;
    row.time = e.time;
    row.profileId = e.profileId;
    row.userId = ids ? ids.service_id : (e.userId ?? null);
    row.externalUserId = ids ? ids.external_id : (e.externalUserId ?? null);
    row.appId = e.appId ?? null;
    row.name = e.name ?? null;
    row.properties = e.properties ? JSON.stringify(e.properties) : null;
    row.data = e.data ? JSON.stringify(e.data) : '{}';
    encoder.add(row);
  }
  return encoder.finish();
}

const EMPTY_ROW: LogRow = {
  workspaceId: '',
  id: '',
  type: '',
  time: '',
  profileId: null,
  userId: null,
  externalUserId: null,
  appId: null,
  name: null,
  properties: null,
  data: '{}',
};

/** Writes COPY_LOG's input in the client's transaction. */
export async function copyLogRows(client: PoolClient, rows: Buffer[]): Promise<void> {
  const copy = client.query(copyFrom(COPY_LOG));
  for (const chunk of rows) copy.write(chunk);
  copy.end();
  await finished(copy);
}

/**
 * For benchmarks only: with CES_BENCH_EVENT_LOG=off, logEvents writes nothing (nor the analytics rollups its statement
 * keeps), so that `bench:ingest` can measure ingestion with the log on and off in one run (BENCHMARKS.md). Never set it
 * in an install: events accepted meanwhile are in no file an event export delivers, ever. Read here and nowhere else.
 */
const BENCHMARK_WITHOUT_LOG = process.env.CES_BENCH_EVENT_LOG === 'off';

/**
 * SQL of a profile's `event_log_hours` (migration 0460) after the apply's rewrite of `p` logs events or purchases of
 * it (when `logs`, SQL of a boolean, holds): the hour of the transaction (the log rows' `accepted_at`) added, the hours
 * the log no longer holds dropped. Null when the log is not written (`CES_BENCH_EVENT_LOG=off`): nothing to stamp.
 * It reads `h`, the FROM item `LOGGED_HOURS_FROM`.
 */
export const loggedHoursStamp = (logs: string): string | null =>
  BENCHMARK_WITHOUT_LOG
    ? null
    : `CASE WHEN NOT (${logs}) OR p.event_log_hours[cardinality(p.event_log_hours)] = h.now THEN p.event_log_hours
       ELSE array_append(ARRAY(SELECT x FROM unnest(p.event_log_hours) AS x WHERE x >= h.first), h.now) END`;

/** The FROM item `loggedHoursStamp` reads: this transaction's hour, and the first the log holds (whole statement). */
export const LOGGED_HOURS_FROM = `(SELECT floor(extract(epoch FROM now()) / 3600)::int AS now,
          floor(extract(epoch FROM event_log_start()) / 3600)::int AS first) AS h`;

/** The analytics rollups of the logged events and purchases (migration 0380), in the transaction that logs them. */
const ROLLUPS_SQL = `WITH ${ROLLUP_CTES}\nSELECT 1`;

/** A batch's log made ready in the process (`prepareLog`): its COPY input and rollups, or the entries still to read. */
export interface PreparedLog {
  entries: EventEntry[];
  /** COPY_LOG's input and the rollups' parameters; absent when an entry's identifiers are to be read first. */
  made?: MadeLog;
}

interface MadeLog {
  rows: Buffer[];
  rollups: unknown[] | null;
}

/**
 * Makes the COPY input and the rollups' parameters of a batch whose writer gave every entry's identifiers: the part
 * of the log's cost that is the process's, which a writer can run while PostgreSQL works on something else of the same
 * transaction (the profiles' rewrite: src/profiles/tracked-objects.ts).
 */
export function prepareLog(entries: EventEntry[]): PreparedLog {
  if (entries.length === 0 || BENCHMARK_WITHOUT_LOG) return { entries: [] };
  if (entries.some((e) => e.userId === undefined && e.profileId !== null)) return { entries };
  return { entries, made: make(entries, new Map()) };
}

const make = (entries: EventEntry[], read: ReadIdentifiers): MadeLog => ({
  rows: logRows(entries, read),
  rollups: ROLLUPS_SKIPPED_FOR_BENCH ? null : rollupParams(entries),
});

/**
 * Logs the entries in the caller's transaction (the one that applies them to the profiles), and counts their events and
 * purchases in the analytics rollups (src/profiles/analytics-rollups.ts).
 */
export async function logEvents(client: PoolClient, batch: EventEntry[] | PreparedLog): Promise<void> {
  const { entries, made } = Array.isArray(batch) ? { entries: batch, made: undefined } : batch;
  if (entries.length === 0 || BENCHMARK_WITHOUT_LOG) return;
  const { rows, rollups } = made ?? make(entries, await identifiersOf(client, entries));
  await copyLogRows(client, rows);
  if (rollups) await client.query(ROLLUPS_SQL, rollups);
}

/** The identifiers of the entries' profiles that the writer did not give, read in its transaction. */
async function identifiersOf(client: PoolClient, entries: EventEntry[]): Promise<ReadIdentifiers> {
  const missing = [
    ...new Set(entries.flatMap((e) => (e.userId === undefined && e.profileId !== null ? [e.profileId] : []))),
  ];
  if (missing.length === 0) return new Map();
  const { rows } = await client.query<{ id: string; service_id: string; external_id: string | null }>(
    `SELECT id, service_id, external_id FROM profiles WHERE id = ANY($1::bigint[])`,
    [missing],
  );
  return new Map(rows.map((r) => [Number(r.id), r]));
}

/**
 * Keeps the log's days: the partitions of yesterday to a week ahead exist (a write never meets a day without one), and
 * those older than `retentionDays` whole UTC days are dropped, with the records of merges older than the log's first
 * day (no row of the log can be the merged profile's any more: migration 0460). Returns how many partitions were made
 * and dropped. The reconciler's pass runs it, so one process of the install does it at a time.
 */
export async function maintainEventLogDays(
  pool: Pool,
  retentionDays: number,
  now = new Date(),
): Promise<{ made: number; dropped: number }> {
  const today = now.toISOString().slice(0, 10);
  const made = await pool.query<{ made: number }>(`SELECT event_log_make_partitions($1::date - 1, 9) AS made`, [today]);
  const { rows } = await pool.query<{ name: string }>(
    `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
      WHERE i.inhparent = 'event_log'::regclass AND c.relname ~ '^event_log_[0-9]{8}$'
        AND to_date(substr(c.relname, 11), 'YYYYMMDD') < $1::date - $2::int
      ORDER BY 1`,
    [today, retentionDays],
  );
  // The name comes from the catalog and matches the pattern above: no input of anyone's reaches the statement.
  for (const { name } of rows) await pool.query(`DROP TABLE IF EXISTS "${name}"`);
  // The log's first day moves only when a day is dropped; then the merges before it can go.
  if (rows.length > 0) await pool.query(`DELETE FROM event_log_merged_profiles WHERE merged_at < event_log_start()`);
  return { made: made.rows[0]!.made, dropped: rows.length };
}
