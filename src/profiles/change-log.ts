import type { QueryResult, QueryResultRow } from 'pg';
import type { PoolClient } from '../platform/db/pool.js';

/**
 * The log of profile writes that incremental exports read (profile_changes, migration 0240). A row trigger logs every
 * insert and update of a profile; ingestion's statements that write many profiles at once log them here instead, in
 * the same statement, which costs the write nothing measurable where the trigger cost it 10-28% (BENCHMARKS.md,
 * "Recording changes").
 */

/**
 * `statement` with the profiles it writes logged in the same statement, answering `select` over them; `more`, further
 * CTEs over `written` (a writer's own log of what changed, such as the event log's).
 */
const loggedSql = (statement: string, select: string, more?: string) => `WITH written AS (${statement}),
  logged AS (INSERT INTO profile_changes (workspace_id, xid, profile_id, random_bucket)
             SELECT w.workspace_id, pg_current_xact_id(), w.id, w.random_bucket FROM written w)${
               more
                 ? `,
  ${more}`
                 : ''
             }
  ${select}`;

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
  await client.query(QUIET_TRIGGER);
  try {
    return await client.query<R>(loggedSql(statement, select), params);
  } finally {
    // After a failed statement the transaction is aborted and refuses this too; the setting goes with it.
    await client.query(WAKE_TRIGGER).catch(() => {});
  }
}

/**
 * writeProfilesLogged for statements produced one after another (a batch's UPDATE in chunks): the next statement is
 * built while the one before runs, and sent as soon as it has ended (a client runs one query at a time), so that
 * PostgreSQL rewrites one chunk while the caller builds the next. The trigger is quieted once around all of them (not
 * at all when the producer has nothing to write). A statement's `more` is added to it as `loggedSql` says. Throws the
 * first failure, of a statement or of the producer; the producer builds nothing after it.
 */
export async function writeProfilesLoggedEach(
  client: PoolClient,
  statements: AsyncIterable<{ statement: string; params: unknown[]; more?: string }>,
  select = 'SELECT * FROM written',
): Promise<void> {
  const it = statements[Symbol.asyncIterator]();
  let building = it.next();
  let quieted = false;
  try {
    for (;;) {
      const built = await building;
      if (built.done) break;
      building = it.next();
      // A producer's failure is seen when its turn comes (above), or never, once a statement has failed.
      building.catch(() => {});
      if (!quieted) await client.query(QUIET_TRIGGER);
      quieted = true;
      await client.query(loggedSql(built.value.statement, select, built.value.more), built.value.params);
    }
  } finally {
    // The chunk being built ends before the producer is closed; the transaction is the caller's.
    await building.catch(() => {});
    await it.return?.(undefined);
    // After a failed statement the transaction is aborted and refuses this too; the setting goes with it.
    if (quieted) await client.query(WAKE_TRIGGER).catch(() => {});
  }
}
