import type { Pool, PoolClient } from '../platform/db/pool.js';
import type { EventData, EventType } from './event-log-types.js';
import { ROLLUP_CTES, ROLLUP_RETURNING, ROLLUPS_SKIPPED_FOR_BENCH } from './analytics-rollups.js';

/**
 * Writing the event log (migration 0320, docs/events.md): each writer of profiles logs what it applied in the same
 * transaction, so an event is in the log exactly when its change is on the profile. One statement per batch.
 */

/** An event to log, as a writer of profiles knows it. */
export interface EventEntry<T extends EventType = EventType> {
  type: T;
  workspaceId: string;
  /**
   * What makes the event the same across retries of the same accepted object (a staged row's id and the object's
   * place in it, an import's line...): its id is derived from it. Null: a fresh id (the writer has no such key, and
   * its transaction is the only one that can log the event).
   */
  key: string | null;
  /** The profile the event is about: its `service_id` and `external_id` go in the row, read as the batch commits. */
  profileId: number | null;
  /** Given when the profile is gone by then (a deletion): the identifiers it had. */
  userId?: string | null;
  externalUserId?: string | null;
  /** When it happened, ISO 8601. */
  time: string;
  appId?: string | null;
  name?: string | null;
  properties?: Record<string, unknown> | null;
  data?: EventData[T];
}

/**
 * SQL of an event's id from SQL of its workspace id and key: a UUID made of the md5 of the two (stable, and unique as
 * the key is), or a fresh one when the key is null. For writers that log in the statement that applies the change.
 */
export const eventIdSql = (workspaceId: string, key: string): string =>
  `CASE WHEN ${key} IS NULL THEN gen_random_uuid() ELSE md5(${workspaceId}::text || ':' || ${key})::uuid END`;

const INSERT_LOG = `
INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, app_id, name, properties, data)
SELECT e.ws, ${eventIdSql('e.ws', 'e.key')},
       e.type, e.time, e.profile_id, coalesce(e.user_id, p.service_id), coalesce(e.external_user_id, p.external_id),
       e.app_id, e.name, e.properties, coalesce(e.data, '{}')
  FROM unnest($1::uuid[], $2::text[], $3::text[], $4::timestamptz[], $5::bigint[], $6::text[], $7::text[], $8::text[],
              $9::text[], $10::jsonb[], $11::jsonb[])
       AS e(ws, key, type, time, profile_id, user_id, external_user_id, app_id, name, properties, data)
  LEFT JOIN profiles p ON p.id = e.profile_id`;

/**
 * For benchmarks only: with CES_BENCH_EVENT_LOG=off, logEvents writes nothing (nor the analytics rollups its statement
 * keeps), so that `bench:ingest` can measure ingestion with the log on and off in one run (BENCHMARKS.md). Never set it
 * in an install: events accepted meanwhile are in no file an event export delivers, ever. Read here and nowhere else.
 */
const BENCHMARK_WITHOUT_LOG = process.env.CES_BENCH_EVENT_LOG === 'off';

/** The log's rows and, in the same statement, the analytics rollups of its events and purchases (migration 0380). */
const INSERT_SQL = ROLLUPS_SKIPPED_FOR_BENCH
  ? INSERT_LOG
  : `WITH logged AS (${INSERT_LOG}\n  ${ROLLUP_RETURNING}),\n${ROLLUP_CTES}\nSELECT 1`;

/**
 * Logs the entries in the caller's transaction (the one that applies them to the profiles), and counts their events and
 * purchases in the analytics rollups (src/profiles/analytics-rollups.ts).
 */
export async function logEvents(client: PoolClient, entries: EventEntry[]): Promise<void> {
  if (entries.length === 0 || BENCHMARK_WITHOUT_LOG) return;
  const cols: unknown[][] = Array.from({ length: 11 }, () => new Array(entries.length));
  entries.forEach((e, i) => {
    cols[0]![i] = e.workspaceId;
    cols[1]![i] = e.key;
    cols[2]![i] = e.type;
    cols[3]![i] = e.time;
    cols[4]![i] = e.profileId;
    cols[5]![i] = e.userId ?? null;
    cols[6]![i] = e.externalUserId ?? null;
    cols[7]![i] = e.appId ?? null;
    cols[8]![i] = e.name ?? null;
    cols[9]![i] = e.properties ? JSON.stringify(e.properties) : null;
    cols[10]![i] = e.data ? JSON.stringify(e.data) : null;
  });
  await client.query(INSERT_SQL, cols);
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
