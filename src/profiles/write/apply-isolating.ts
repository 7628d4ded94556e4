import type { PoolClient } from '../../platform/db/pool.js';
import { applyObjects, type ApplyResult, type WorkspaceObjects } from '../tracked-objects.js';
import { dataErrorOf, type DataError } from './data-errors.js';

/**
 * Where every batch of ingestion reaches the profile write (src/profiles/tracked-objects.ts): the staging drain, bulk
 * imports and CDI syncs apply through here, so that a row PostgreSQL refuses is set aside (a dead letter, a rejects
 * line) instead of failing its whole batch on every attempt.
 */

/** Chunks of at most this many items that fail are applied one item at a time rather than split in halves. */
const ONE_BY_ONE = 4;

const noResult = (): ApplyResult => ({ events: 0, purchases: 0, attributes: 0, unmatched: 0, profilesCreated: 0 });

function add(total: ApplyResult, r: ApplyResult): void {
  for (const k of ['events', 'purchases', 'attributes', 'unmatched', 'profilesCreated'] as const) total[k] += r[k];
}

/**
 * Applies the items' objects in the caller's transaction (which holds the ingestion locks of their workspaces),
 * leaving out the items PostgreSQL refuses, which are pushed to `refused` with their error. The first attempt is
 * the whole batch, in a savepoint; when it fails with a data error (`dataErrorOf`), the savepoint is rolled back and
 * the items are split in halves, each applied in its own savepoint and split again if it fails, down to single
 * items (chunks of a few items go one by one). One bad item among n costs about two more applies of the batch
 * (n + n/2 + n/4 ...); the items that apply stay applied, in their order, in this transaction. Any other error
 * leaves the transaction to the caller, which rolls it back whole.
 */
export async function applyIsolating<T>(
  client: PoolClient,
  items: T[],
  objectsOf: (items: T[]) => WorkspaceObjects[],
  refused: { item: T; error: DataError }[],
): Promise<ApplyResult> {
  if (items.length === 0) return noResult();
  // One savepoint at a time, released after each attempt: chunks are applied one after another, never nested.
  await client.query('SAVEPOINT ingest_apply');
  try {
    const result = await applyObjects(client, objectsOf(items));
    await client.query('RELEASE SAVEPOINT ingest_apply');
    return result;
  } catch (err) {
    const error = dataErrorOf(err);
    if (!error) throw err;
    await client.query('ROLLBACK TO SAVEPOINT ingest_apply; RELEASE SAVEPOINT ingest_apply');
    if (items.length === 1) {
      refused.push({ item: items[0]!, error });
      return noResult();
    }
    const half = Math.ceil(items.length / 2);
    const chunks = items.length <= ONE_BY_ONE ? items.map((i) => [i]) : [items.slice(0, half), items.slice(half)];
    const total = noResult();
    for (const chunk of chunks) add(total, await applyIsolating(client, chunk, objectsOf, refused));
    return total;
  }
}
