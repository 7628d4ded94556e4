import type { z } from 'zod';
import type { ClaimedKey } from '../../platform/idempotency/keys.js';
import { stageCommands } from '../../pipelines/ingest/accept/stage-commands.js';
import { kickApply, type TrackDeps } from '../../pipelines/ingest/accept/track.js';
import { planRemovals, planRenames } from '../../profiles/commands/external-ids.js';
import type { UserDataCommand } from '../../profiles/commands/apply-commands.js';
import {
  aliasNewCommands,
  deleteCommands,
  identifyCommands,
  mergeCommands,
  type AliasNewBody,
  type DeleteBody,
  type IdentifyBody,
  type MergeBody,
  type RemoveBody,
  type RenameBody,
} from './requests.js';

/**
 * Accepting a user-data request: its commands are committed to the staging log (with the answer of its Idempotency-Key,
 * in the same statement) before the answer, then a worker is asked to apply them
 * (src/pipelines/ingest/apply/command-rows.ts). The answer says what was accepted; the commands take effect in their
 * turn, within moments.
 */

export type UserDataDeps = Pick<TrackDeps, 'pool' | 'queues' | 'log' | 'health'>;

export interface Accepted<S extends number, B> {
  status: S;
  body: B;
}

async function accept<S extends number, B>(
  deps: UserDataDeps,
  workspaceId: string,
  commands: UserDataCommand[],
  answer: Accepted<S, B>,
  key?: ClaimedKey,
): Promise<Accepted<S, B>> {
  if (commands.length > 0) {
    await stageCommands(deps.pool, workspaceId, commands, key && { key, status: answer.status, body: answer.body });
    // Not awaited: the commands are committed; if the job cannot be queued now, the sweep applies them.
    kickApply(deps);
  }
  return answer;
}

export function acceptDelete(deps: UserDataDeps, workspaceId: string, body: DeleteBody, key?: ClaimedKey) {
  const commands = deleteCommands(body);
  return accept(
    deps,
    workspaceId,
    commands,
    { status: 202 as const, body: { deleted: commands.length, message: 'success' as const } },
    key,
  );
}

export function acceptAliasNew(
  deps: UserDataDeps,
  workspaceId: string,
  body: z.infer<typeof AliasNewBody>,
  key?: ClaimedKey,
) {
  const commands = aliasNewCommands(body);
  return accept(
    deps,
    workspaceId,
    commands,
    { status: 201 as const, body: { aliases_processed: commands.length, message: 'success' as const } },
    key,
  );
}

export function acceptIdentify(
  deps: UserDataDeps,
  workspaceId: string,
  body: z.infer<typeof IdentifyBody>,
  key?: ClaimedKey,
) {
  const commands = identifyCommands(body);
  return accept(
    deps,
    workspaceId,
    commands,
    { status: 201 as const, body: { aliases_processed: commands.length, message: 'success' as const } },
    key,
  );
}

export function acceptMerge(
  deps: UserDataDeps,
  workspaceId: string,
  body: z.infer<typeof MergeBody>,
  key?: ClaimedKey,
) {
  return accept(
    deps,
    workspaceId,
    mergeCommands(body),
    { status: 202 as const, body: { message: 'success' as const } },
    key,
  );
}

/** `[index in the request, why]`: how rename_errors and removal_errors name a refused entry. */
export type EntryError = [number, string];

/**
 * Renames are planned against the stored ids now (each entry seeing the earlier ones); the refused ones are answered in
 * rename_errors and the others staged, to be planned again when applied (docs/user-data.md says what a rename still
 * queued behind another means for a third).
 */
export async function acceptRename(
  deps: UserDataDeps,
  workspaceId: string,
  body: z.infer<typeof RenameBody>,
  key?: ClaimedKey,
) {
  const renames = body.external_id_renames.map((r) => ({ current: r.current_external_id, next: r.new_external_id }));
  const { plan } = await planRenames(deps.pool, workspaceId, renames);
  const allowed = renames.filter((_, i) => plan[i] === null);
  const errors: EntryError[] = plan.flatMap((why, i) => (why === null ? [] : [[i, why] as EntryError]));
  const answer = {
    status: 202 as const,
    body: { message: 'success' as const, external_ids: allowed.map((r) => r.current), rename_errors: errors },
  };
  return accept(deps, workspaceId, allowed.length > 0 ? [{ kind: 'rename', renames: allowed }] : [], answer, key);
}

export async function acceptRemove(
  deps: UserDataDeps,
  workspaceId: string,
  body: z.infer<typeof RemoveBody>,
  key?: ClaimedKey,
) {
  const plan = await planRemovals(deps.pool, workspaceId, body.external_ids);
  const allowed = body.external_ids.filter((_, i) => plan[i] === null);
  const errors: EntryError[] = plan.flatMap((why, i) => (why === null ? [] : [[i, why] as EntryError]));
  const answer = {
    status: 202 as const,
    body: { message: 'success' as const, removed_ids: allowed, removal_errors: errors },
  };
  return accept(deps, workspaceId, allowed.length > 0 ? [{ kind: 'remove', externalIds: allowed }] : [], answer, key);
}
