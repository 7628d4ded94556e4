import type { PoolClient } from '../../platform/db/pool.js';
import { addAliases, identifyProfiles, type Identification } from './aliases.js';
import { deleteProfiles } from './erase.js';
import { applyRemovals, applyRenames, type Rename } from './external-ids.js';
import { resolveOne, type UserRef } from '../lookup.js';
import { mergeProfiles } from './merge.js';

/**
 * The user-data commands: what POST /users/delete, /users/merge, /users/identify, /users/alias/new and
 * /users/external_ids/rename and /remove stage (src/pipelines/ingest/apply/command-rows.ts), and how each is applied
 * when its turn comes, through the profiles module. A request's commands are staged as one row, applied in one
 * transaction, in order.
 */
export type UserDataCommand =
  | { kind: 'delete'; target: UserRef }
  | { kind: 'merge'; merge: UserRef; keep: UserRef }
  | { kind: 'identify'; externalId: string; target: Identification['target'] }
  | { kind: 'alias_new'; externalId?: string; label: string; name: string }
  /** One request's renames together: each entry sees the earlier ones' effects (a -> b, then b -> c). */
  | { kind: 'rename'; renames: Rename[] }
  | { kind: 'remove'; externalIds: string[] };

export type CommandKind = UserDataCommand['kind'];

/** What applying a row of commands did: per command kind, per outcome, a count (for metrics and logs). */
export type CommandOutcomes = Map<string, number>;

const count = (outcomes: CommandOutcomes, kind: CommandKind, outcome: string, n = 1) => {
  const key = `${kind}\u0000${outcome}`;
  outcomes.set(key, (outcomes.get(key) ?? 0) + n);
};

/** Splits an outcome key back into its command and outcome. */
export const outcomeLabels = (key: string) => {
  const [command = '', outcome = ''] = key.split('\u0000');
  return { command, outcome };
};

/**
 * Applies one row's commands, in order, inside the caller's transaction, which holds the workspace's whole ingestion
 * lock. A command whose users are not there (any more) changes nothing, as the public API does: that is an outcome,
 * not an error.
 */
export async function applyCommands(
  client: PoolClient,
  workspaceId: string,
  commands: UserDataCommand[],
): Promise<CommandOutcomes> {
  const outcomes: CommandOutcomes = new Map();
  for (let i = 0; i < commands.length;) {
    const command = commands[i]!;
    // Consecutive deletes go together: one lookup and one erasure for up to 50 users.
    if (command.kind === 'delete') {
      let j = i;
      while (j < commands.length && commands[j]!.kind === 'delete') j++;
      const targets = commands.slice(i, j).map((c) => (c as { target: UserRef }).target);
      const found = await resolveOne(client, workspaceId, targets);
      const ids = [...new Set(found.flatMap((f) => (typeof f === 'object' ? [f.id] : [])))];
      const deleted = await deleteProfiles(client, workspaceId, ids, { erase: true });
      count(outcomes, 'delete', 'applied', deleted);
      for (const f of found) if (typeof f !== 'object') count(outcomes, 'delete', f);
      i = j;
      continue;
    }
    await applyOne(client, workspaceId, command, outcomes);
    i++;
  }
  return outcomes;
}

async function applyOne(
  client: PoolClient,
  workspaceId: string,
  command: Exclude<UserDataCommand, { kind: 'delete' }>,
  outcomes: CommandOutcomes,
): Promise<void> {
  switch (command.kind) {
    case 'merge': {
      const [merge, keep] = await resolveOne(client, workspaceId, [command.merge, command.keep]);
      if (typeof merge !== 'object' || typeof keep !== 'object') {
        count(outcomes, 'merge', typeof merge !== 'object' ? `merge ${merge}` : `keep ${keep}`);
        return;
      }
      count(outcomes, 'merge', (await mergeProfiles(client, workspaceId, merge.id, keep.id)) ? 'applied' : 'same user');
      return;
    }
    case 'identify': {
      const [outcome] = await identifyProfiles(client, workspaceId, [
        { externalId: command.externalId, target: command.target },
      ]);
      count(outcomes, 'identify', outcome === 'identified' || outcome === 'merged' ? 'applied' : outcome!);
      return;
    }
    case 'alias_new': {
      const { added } = await addAliases(client, workspaceId, [
        { externalId: command.externalId, label: command.label, name: command.name },
      ]);
      count(outcomes, 'alias_new', added > 0 ? 'applied' : 'unchanged');
      return;
    }
    case 'rename': {
      const plan = await applyRenames(client, workspaceId, command.renames);
      for (const why of plan) count(outcomes, 'rename', why === null ? 'applied' : 'refused');
      return;
    }
    case 'remove': {
      const plan = await applyRemovals(client, workspaceId, command.externalIds);
      for (const why of plan) count(outcomes, 'remove', why === null ? 'applied' : 'refused');
      return;
    }
  }
}
