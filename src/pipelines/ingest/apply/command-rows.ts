import { z } from 'zod';
import { withTransaction, type Pool } from '../../../platform/db/pool.js';
import type { Logger } from '../../../platform/logger.js';
import type { Metrics } from '../../../platform/metrics.js';
import { PRIORITIZATIONS } from '../../../profiles/lookup.js';
import { applyCommands, outcomeLabels, type UserDataCommand } from '../../../profiles/commands/apply-commands.js';
import { lockWorkspaceProfiles } from '../../../profiles/write/locks.js';
import { dataErrorOf, type DataError } from '../../../profiles/write/data-errors.js';
import { insertDeadLetters } from './dead-letters.js';
import { COMMAND_PART } from '../accept/stage-commands.js';

/**
 * The apply side of user-data command rows (src/pipelines/ingest/accept/stage-commands.ts stages them): a row is a
 * barrier for its workspace, taken once every row staged before it is applied, and applied under the whole workspace's
 * profile lock.
 */

/** The SQL condition that a staged row `s` is not held back by an earlier command row of its workspace. */
export const NOT_BEHIND_A_COMMAND = `NOT EXISTS (SELECT 1 FROM ingest_staging c WHERE c.part = ${COMMAND_PART} AND c.workspace_id = s.workspace_id AND c.id < s.id)`;

const Text = z.string();
const Prioritization = z.array(z.enum(PRIORITIZATIONS)).optional();
const Ref = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('external_id'), value: Text }),
  z.object({ kind: z.literal('service_id'), value: Text }),
  z.object({ kind: z.literal('user_alias'), label: Text, name: Text }),
  z.object({ kind: z.literal('email'), value: Text, prioritization: Prioritization }),
  z.object({ kind: z.literal('phone'), value: Text, prioritization: Prioritization }),
  z.object({ kind: z.literal('device_id'), value: Text }),
]);
const IdentifyTarget = z.discriminatedUnion('kind', [
  z.object({ kind: z.literal('user_alias'), label: Text, name: Text }),
  z.object({ kind: z.literal('email'), value: Text, prioritization: Prioritization }),
  z.object({ kind: z.literal('phone'), value: Text, prioritization: Prioritization }),
]);

/** A staged row of commands, parsed again when applied: rows outlive versions, and an operator may edit a dead letter. */
const CommandPayload = z.object({
  commands: z.array(
    z.discriminatedUnion('kind', [
      z.object({ kind: z.literal('delete'), target: Ref }),
      z.object({ kind: z.literal('merge'), merge: Ref, keep: Ref }),
      z.object({ kind: z.literal('identify'), externalId: Text, target: IdentifyTarget }),
      z.object({ kind: z.literal('alias_new'), externalId: Text.optional(), label: Text, name: Text }),
      z.object({ kind: z.literal('rename'), renames: z.array(z.object({ current: Text, next: Text })) }),
      z.object({ kind: z.literal('remove'), externalIds: z.array(Text) }),
    ]),
  ),
});

function parseCommands(payload: string): { commands: UserDataCommand[] } | { error: DataError } {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch (err) {
    return { error: { code: 'payload', message: `not JSON: ${(err as Error).message.slice(0, 200)}` } };
  }
  const parsed = CommandPayload.safeParse(value);
  if (!parsed.success)
    return {
      error: {
        code: 'payload',
        message: `not a row of user-data commands: ${parsed.error.issues[0]?.message ?? 'invalid'}`,
      },
    };
  return { commands: parsed.data.commands as UserDataCommand[] };
}

/**
 * The oldest command row through `$1` that nothing holds back: no earlier row of its workspace is left, in any
 * partition (`$2`, and any partition from `$3` up, which a process configured with more partitions may have staged),
 * nor an earlier command row. Taken with FOR UPDATE SKIP LOCKED; a row another transaction is applying or deleting is
 * still seen as left (its deletion is not committed), so a command never overtakes a batch in flight.
 */
const TAKE_COMMAND_SQL = `
SELECT c.id, c.workspace_id, c.accepted_at, c.objects, c.payload
  FROM ingest_staging c
 WHERE c.part = ${COMMAND_PART} AND c.id <= $1
   AND NOT EXISTS (SELECT 1 FROM ingest_staging e WHERE e.part = ${COMMAND_PART} AND e.workspace_id = c.workspace_id AND e.id < c.id)
   AND NOT EXISTS (SELECT 1 FROM ingest_staging s WHERE s.part = ANY($2::smallint[]) AND s.workspace_id = c.workspace_id AND s.id < c.id)
   AND NOT EXISTS (SELECT 1 FROM ingest_staging s WHERE s.part >= $3 AND s.workspace_id = c.workspace_id AND s.id < c.id)
 ORDER BY c.id
 LIMIT 1
 FOR UPDATE OF c SKIP LOCKED`;

export interface CommandDrainOptions {
  partitions: number;
  log: Logger;
  metrics: Metrics;
}

/**
 * Applies the next command row that may go now, in one transaction with its removal from the staging log: 'applied',
 * 'waiting' when command rows through `limit` remain but each is held back (by rows still to be applied, or by
 * another worker applying it), 'none' when none remains.
 */
export async function applyNextCommand(
  pool: Pool,
  limit: number,
  options: CommandDrainOptions,
): Promise<'applied' | 'waiting' | 'none'> {
  const partitions = Array.from({ length: Math.max(1, options.partitions) }, (_, i) => i);
  const taken = await withTransaction(pool, async (client) => {
    const { rows } = await client.query<{
      id: number;
      workspace_id: string;
      accepted_at: Date;
      objects: number;
      payload: string;
    }>(TAKE_COMMAND_SQL, [limit, partitions, partitions.length]);
    const row = rows[0];
    if (!row) return null;
    await client.query('DELETE FROM ingest_staging WHERE id = $1', [row.id]);
    // The workspace's whole ingestion: no batch of its tracked objects, import chunk or alias rename runs meanwhile.
    await lockWorkspaceProfiles(client, [row.workspace_id]);
    const parsed = parseCommands(row.payload);
    let error = 'error' in parsed ? parsed.error : null;
    let outcomes = new Map<string, number>();
    if (!error && 'commands' in parsed) {
      await client.query('SAVEPOINT user_data_commands');
      try {
        outcomes = await applyCommands(client, row.workspace_id, parsed.commands);
        await client.query('RELEASE SAVEPOINT user_data_commands');
      } catch (err) {
        error = dataErrorOf(err);
        if (!error) throw err;
        await client.query('ROLLBACK TO SAVEPOINT user_data_commands; RELEASE SAVEPOINT user_data_commands');
      }
    }
    if (error) {
      const letter = {
        source: 'track' as const,
        workspaceId: row.workspace_id,
        stagedId: row.id,
        part: COMMAND_PART,
        acceptedAt: row.accepted_at,
        objects: row.objects,
        payload: row.payload,
        error,
      };
      await insertDeadLetters(client, [letter]);
    }
    return { row, outcomes, error };
  });
  if (!taken) {
    const left = await pool.query('SELECT 1 FROM ingest_staging WHERE part = $1 AND id <= $2 LIMIT 1', [
      COMMAND_PART,
      limit,
    ]);
    return left.rowCount ? 'waiting' : 'none';
  }
  const { row, outcomes, error } = taken;
  for (const [key, n] of outcomes) options.metrics.userDataCommands.inc(outcomeLabels(key), n);
  if (error) {
    // No payload and no PostgreSQL message: both may hold personal data. The table keeps them.
    options.log.error(
      { workspaceId: row.workspace_id, stagedId: row.id, code: error.code },
      'staged user-data commands refused; moved to ingest_dead_letters',
    );
  } else {
    options.log.debug(
      { workspaceId: row.workspace_id, stagedId: row.id, commands: row.objects },
      'user-data commands applied',
    );
  }
  return 'applied';
}
