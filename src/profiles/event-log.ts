import { hash, randomUUID } from 'node:crypto';
import type { Pool, PoolClient } from '../platform/db/pool.js';
import type { EventEntry } from './event-log-types.js';
import { ROLLUP_CTES, rollupParams, ROLLUPS_SKIPPED_FOR_BENCH } from './analytics-rollups.js';

/**
 * Writing the event log (migration 0320, docs/events.md): each writer of profiles logs what it applied in the same
 * transaction, so an event is in the log exactly when its change is on the profile. One statement per batch.
 */

/**
 * SQL of an event's id from SQL of its workspace id and key: a UUID made of the md5 of the two (stable, and unique as
 * the key is), or a fresh one when the key is null. For writers that log in the statement that applies the change;
 * `eventId` is the same in the process.
 */
export const eventIdSql = (workspaceId: string, key: string): string =>
  `CASE WHEN ${key} IS NULL THEN gen_random_uuid() ELSE md5(${workspaceId}::text || ':' || ${key})::uuid END`;

/** An event's id as `eventIdSql` makes it (a workspace id is lower-case text in PostgreSQL, as `uuid::text` prints it). */
export const eventId = (workspaceId: string, key: string | null): string =>
  key === null ? randomUUID() : hash('md5', `${workspaceId.toLowerCase()}:${key}`);

/**
 * The rows, every value made by the writer: no join to `profiles` for the identifiers, no id hashed in SQL. Written
 * this way the log costs the apply about half what a join and ids made in SQL did (BENCHMARKS.md, bench:event-log-write).
 * The rows come as one JSON array of arrays ($1, `logRowsJson`): one JSON.stringify in the process and one jsonb parse
 * in PostgreSQL, where eleven array parameters had pg escape every element (every quote of every properties object)
 * and the garbage of it was a sixth of the ingestion worker's time (bench:ingest, BENCHMARKS.md).
 */
export const INSERT_LOG = `
INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, app_id, name, properties, data)
SELECT (r->>0)::uuid, (r->>1)::uuid, r->>2, (r->>3)::timestamptz, (r->>4)::bigint, r->>5, r->>6, r->>7, r->>8,
       nullif(r->9, 'null'::jsonb), r->10
  FROM jsonb_array_elements($1::jsonb) AS r`;

/** Where a profile's identifiers come from when the writer did not give them (`identifiersOf`). */
type ReadIdentifiers = Map<number, { service_id: string; external_id: string | null }>;

/** INSERT_LOG's parameter: each entry as the array of its columns, in INSERT_LOG's order. */
export function logRowsJson(entries: EventEntry[], read: ReadIdentifiers = new Map()): string {
  return JSON.stringify(
    entries.map((e) => {
      const ids = e.userId === undefined && e.profileId !== null ? read.get(e.profileId) : undefined;
      return [
        e.workspaceId,
        eventId(e.workspaceId, e.key),
        e.type,
        e.time,
        e.profileId,
        ids ? ids.service_id : (e.userId ?? null),
        ids ? ids.external_id : (e.externalUserId ?? null),
        e.appId ?? null,
        e.name ?? null,
        e.properties ?? null,
        e.data ?? {},
      ];
    }),
  );
}

/**
 * For benchmarks only: with CES_BENCH_EVENT_LOG=off, logEvents writes nothing (nor the analytics rollups its statement
 * keeps), so that `bench:ingest` can measure ingestion with the log on and off in one run (BENCHMARKS.md). Never set it
 * in an install: events accepted meanwhile are in no file an event export delivers, ever. Read here and nowhere else.
 */
const BENCHMARK_WITHOUT_LOG = process.env.CES_BENCH_EVENT_LOG === 'off';

/** The log's rows and, in the same statement, the analytics rollups of its events and purchases (migration 0380). */
const INSERT_SQL = ROLLUPS_SKIPPED_FOR_BENCH ? INSERT_LOG : `WITH logged AS (${INSERT_LOG}),\n${ROLLUP_CTES}\nSELECT 1`;

/** A batch's log made ready in the process (`prepareLog`): the statement's parameters, or the entries still to read. */
export interface PreparedLog {
  entries: EventEntry[];
  /** logEvents' parameters; absent when an entry's identifiers are to be read in the transaction first. */
  params?: unknown[];
}

/**
 * Makes the statement's parameters of a batch whose writer gave every entry's identifiers (the JSON of its rows, its
 * rollups): the part of the log's cost that is the process's, which a writer can run while PostgreSQL works on
 * something else of the same transaction (the profiles' rewrite: src/profiles/tracked-objects.ts).
 */
export function prepareLog(entries: EventEntry[]): PreparedLog {
  if (entries.length === 0 || BENCHMARK_WITHOUT_LOG) return { entries: [] };
  if (entries.some((e) => e.userId === undefined && e.profileId !== null)) return { entries };
  return { entries, params: paramsOf(entries, new Map()) };
}

const paramsOf = (entries: EventEntry[], read: ReadIdentifiers): unknown[] => {
  const rows = logRowsJson(entries, read);
  return ROLLUPS_SKIPPED_FOR_BENCH ? [rows] : [rows, ...rollupParams(entries)];
};

/**
 * Logs the entries in the caller's transaction (the one that applies them to the profiles), and counts their events and
 * purchases in the analytics rollups (src/profiles/analytics-rollups.ts).
 */
export async function logEvents(client: PoolClient, batch: EventEntry[] | PreparedLog): Promise<void> {
  const { entries, params } = Array.isArray(batch) ? { entries: batch, params: undefined } : batch;
  if (entries.length === 0 || BENCHMARK_WITHOUT_LOG) return;
  await client.query(INSERT_SQL, params ?? paramsOf(entries, await identifiersOf(client, entries)));
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
 * those older than `retentionDays` whole UTC days are dropped. Returns how many were made and dropped. The
 * reconciler's pass runs it, so one process of the install does it at a time.
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
  return { made: made.rows[0]!.made, dropped: rows.length };
}
