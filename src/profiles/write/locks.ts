import type { PoolClient } from '../../platform/db/pool.js';
import { lockForTransaction, lockNames } from '../../platform/db/advisory-locks.js';

/**
 * The locks every writer of profiles takes, in its transaction, before its first write: the whole of a workspace's
 * profiles (user-data commands, alias renames, email states, hard bounces, CDI's whole-workspace batches), or one
 * partition of them (ingestion's and imports' batches, CDI's lanes), so that two batches updating the same profiles in
 * another order wait for each other instead of deadlocking. The lock names are ingestion's (`lockNames.ingest`), the
 * first writer to take them: a name changed here would let an older process of a rolling upgrade run beside a new
 * one unordered.
 */

/**
 * Takes each workspace's profiles: `whole` (the default), every other writer waits until this transaction ends (for
 * writers that touch profiles in an order of their own: commands, alias renames, email states, CDI batches that must
 * follow the API's writes); `shared`, beside other shared holders and partitions, while a whole holder waits (CDI's
 * lanes, whose rows carry their own times).
 */
export async function lockWorkspaceProfiles(
  client: PoolClient,
  workspaceIds: string[],
  mode: 'whole' | 'shared' = 'whole',
): Promise<void> {
  // One statement per workspace, in a fixed order: the order of lock calls inside one statement is not guaranteed.
  for (const ws of [...new Set(workspaceIds)].sort()) {
    await lockForTransaction(client, lockNames.ingest(ws), mode === 'shared' ? 'shared' : 'exclusive');
  }
}

/**
 * Serializes ingestion batches of one partition of each workspace (src/pipelines/ingest/apply/partitions.ts), while batches of the other partitions go on: a shared hold on the workspace's lock (which
 * `lockWorkspaceProfiles` takes whole) and the partition's own lock.
 */
export async function lockProfilePartition(client: PoolClient, workspaceIds: string[], part: number): Promise<void> {
  for (const ws of [...new Set(workspaceIds)].sort()) {
    await lockForTransaction(client, lockNames.ingest(ws), 'shared');
    await lockForTransaction(client, lockNames.ingestPartition(ws, part));
  }
}
