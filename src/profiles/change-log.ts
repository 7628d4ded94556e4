import type { QueryResult, QueryResultRow } from 'pg';
import type { PoolClient } from '../db/pool.js';

/**
 * The log of profile writes that incremental exports read (profile_changes, migration 0240). A row trigger logs every
 * insert and update of a profile; ingestion's statements that write many profiles at once log them here instead, in
 * the same statement, which costs the write nothing measurable where the trigger cost it 10-28% (BENCHMARKS.md,
 * "Recording changes").
 */

/** The transaction-local setting that keeps the row trigger from logging a statement's rows a second time. */
const QUIET_TRIGGER = `SELECT set_config('ces.profile_changes', 'logged', true)`;
const WAKE_TRIGGER = `SELECT set_config('ces.profile_changes', '', true)`;

/**
 * Runs `statement`, an INSERT or UPDATE of profiles whose RETURNING list includes `workspace_id`, `id` and
 * `random_bucket` of each profile written, and logs those profiles in the same statement; answers `select` over the
 * returned rows (`written`), all of them by default.
 *
 * The trigger is quieted for this statement only, by a transaction-local setting set before and cleared after it: run
 * it inside a transaction. Outside one the setting lasts only for its own statement, so the trigger logs the rows too:
 * twice, never missed.
 */
export async function writeProfilesLogged<R extends QueryResultRow>(
  client: PoolClient,
  statement: string,
  params: unknown[],
  select = 'SELECT * FROM written',
): Promise<QueryResult<R>> {
  const sql = `WITH written AS (${statement}),
  logged AS (INSERT INTO profile_changes (workspace_id, xid, profile_id, random_bucket)
             SELECT w.workspace_id, pg_current_xact_id(), w.id, w.random_bucket FROM written w)
  ${select}`;
  await client.query(QUIET_TRIGGER);
  try {
    return await client.query<R>(sql, params);
  } finally {
    // After a failed statement the transaction is aborted and refuses this too; the setting goes with it.
    await client.query(WAKE_TRIGGER).catch(() => {});
  }
}
