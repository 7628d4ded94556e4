import type { Pool } from '../../../platform/db/pool.js';
import type { UserDataCommand } from '../../../profiles/commands/apply-commands.js';
import { stageRows, type StagedAnswer } from './staging-writer.js';

/**
 * User-data commands on the durable path of /users/track: a request's commands are committed to ingest_staging as one
 * row (part COMMAND_PART) before the answer, and applied by the same apply jobs, so an accepted command is applied
 * whatever fails in between (a worker killed, Redis lost, PostgreSQL restarted). A command row is a barrier for its
 * workspace: the rows staged before it (tracked objects of every partition, and earlier commands) are applied first,
 * and the rows staged after it wait until it has been (TAKE_BATCH_SQL in src/pipelines/ingest/apply/drain-staging.ts
 * holds them back). So a delete, merge, identify or rename is applied in the order it was accepted relative to every
 * tracked object of the workspace, whichever identifier names the user (docs/ingestion.md, "Order").
 */

/** ingest_staging.part of a row of commands (tracked objects use 0..INGEST_PARTITIONS-1). */
export const COMMAND_PART = -1;

/** Commits one request's commands (possibly in one commit with other requests' rows); returns the row's id. */
export async function stageCommands(
  pool: Pool,
  workspaceId: string,
  commands: UserDataCommand[],
  answer?: StagedAnswer,
): Promise<number> {
  const [id] = await stageRows(
    pool,
    workspaceId,
    [{ part: COMMAND_PART, count: commands.length, payload: JSON.stringify({ commands }) }],
    answer,
  );
  return id!;
}
