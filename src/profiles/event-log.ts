import { createHash, randomUUID } from 'node:crypto';
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
  key === null ? randomUUID() : createHash('md5').update(`${workspaceId.toLowerCase()}:${key}`).digest('hex');

/**
 * The rows, every value made by the writer: no join to `profiles` for the identifiers, no id hashed in SQL. Written
 * this way the log costs the apply about half what a join and ids made in SQL did (BENCHMARKS.md, bench:event-log-write).
 */
export const INSERT_LOG = `
INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, app_id, name, properties, data)
SELECT * FROM unnest($1::uuid[], $2::uuid[], $3::text[], $4::timestamptz[], $5::bigint[], $6::text[], $7::text[],
                     $8::text[], $9::text[], $10::jsonb[], $11::jsonb[])`;

/**
 * For benchmarks only: with CES_BENCH_EVENT_LOG=off, logEvents writes nothing (nor the analytics rollups its statement
 * keeps), so that `bench:ingest` can measure ingestion with the log on and off in one run (BENCHMARKS.md). Never set it
 * in an install: events accepted meanwhile are in no file an event export delivers, ever. Read here and nowhere else.
 */
const BENCHMARK_WITHOUT_LOG = process.env.CES_BENCH_EVENT_LOG === 'off';

/** The log's rows and, in the same statement, the analytics rollups of its events and purchases (migration 0380). */
const INSERT_SQL = ROLLUPS_SKIPPED_FOR_BENCH ? INSERT_LOG : `WITH logged AS (${INSERT_LOG}),\n${ROLLUP_CTES}\nSELECT 1`;

/**
 * Logs the entries in the caller's transaction (the one that applies them to the profiles), and counts their events and
 * purchases in the analytics rollups (src/profiles/analytics-rollups.ts).
 */
export async function logEvents(client: PoolClient, entries: EventEntry[]): Promise<void> {
  if (entries.length === 0 || BENCHMARK_WITHOUT_LOG) return;
  const ids = await identifiersOf(client, entries);
  const cols: unknown[][] = Array.from({ length: 11 }, () => new Array(entries.length));
  entries.forEach((e, i) => {
    const read = e.userId === undefined && e.profileId !== null ? ids.get(e.profileId) : undefined;
    cols[0]![i] = e.workspaceId;
    cols[1]![i] = eventId(e.workspaceId, e.key);
    cols[2]![i] = e.type;
    cols[3]![i] = e.time;
    cols[4]![i] = e.profileId;
    cols[5]![i] = read ? read.service_id : (e.userId ?? null);
    cols[6]![i] = read ? read.external_id : (e.externalUserId ?? null);
    cols[7]![i] = e.appId ?? null;
    cols[8]![i] = e.name ?? null;
    cols[9]![i] = e.properties ? JSON.stringify(e.properties) : null;
    cols[10]![i] = e.data ? JSON.stringify(e.data) : '{}';
  });
  await client.query(INSERT_SQL, ROLLUPS_SKIPPED_FOR_BENCH ? cols : [...cols, ...rollupParams(entries)]);
}

/** The identifiers of the entries' profiles that the writer did not give, read in its transaction. */
async function identifiersOf(
  client: PoolClient,
  entries: EventEntry[],
): Promise<Map<number, { service_id: string; external_id: string | null }>> {
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
