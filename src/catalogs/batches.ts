import type { Pool, PoolClient } from '../db/pool.js';
import type { Queues } from '../queues.js';
import { CATALOG_BATCH_QUEUE, CatalogBatchPayload } from './batch-payload.js';

/**
 * Asynchronous catalog batches are work of record: a batch is written to `catalog_batches` before the 202 that
 * accepts it, then queued; the job marks it applied in the transaction that applies it. A batch whose job Redis lost
 * is queued again by the reconciler (src/reconcile/), so a 202 always ends applied.
 */

/** Records an accepted batch (its version is its key). */
export async function recordBatch(db: Pool | PoolClient, payload: CatalogBatchPayload): Promise<void> {
  await db.query(`INSERT INTO catalog_batches (version, workspace_id, catalog_id, op, payload) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (version) DO NOTHING`, [
    payload.version,
    payload.workspaceId,
    payload.catalogId,
    payload.op,
    JSON.stringify(payload),
  ]);
}

/** Queues a recorded batch; its job id is fixed by its version, so queueing it twice adds one job. */
export async function enqueueBatch(queues: Queues, payload: CatalogBatchPayload): Promise<void> {
  await queues.get(CATALOG_BATCH_QUEUE).add(CATALOG_BATCH_QUEUE, payload, { jobId: batchJobId(payload) });
}

export const batchJobId = (payload: Pick<CatalogBatchPayload, 'op' | 'version'>) => `catalog-${payload.op}-${payload.version}`;

/** Batches accepted before `before` and not applied yet, oldest first. */
export async function waitingBatches(pool: Pool, before: Date, limit = 1000): Promise<CatalogBatchPayload[]> {
  const { rows } = await pool.query<{ payload: unknown }>(
    `SELECT payload FROM catalog_batches WHERE applied_at IS NULL AND created_at < $1 ORDER BY version LIMIT $2`,
    [before, limit],
  );
  return rows.map((r) => CatalogBatchPayload.parse(r.payload));
}

/** Forgets applied batches older than `age` (their record is only needed until applied). */
export async function forgetAppliedBatches(pool: Pool, age = '7 days'): Promise<number> {
  const { rowCount } = await pool.query(`DELETE FROM catalog_batches WHERE applied_at < now() - $1::interval`, [age]);
  return rowCount ?? 0;
}
