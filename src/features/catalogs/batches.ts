import type { Pool, PoolClient } from '../../platform/db/pool.js';
import { CatalogBatchPayload } from '../../platform/queues/catalog-batch.js';

/**
 * Asynchronous catalog batches are work of record: a batch is written to `catalog_batches` before the 202 that
 * accepts it, then queued; the job marks it applied in the transaction that applies it. A batch whose job Redis lost
 * is queued again by the reconciler (src/runtime/reconcile/), so a 202 always ends applied.
 */

/** Records an accepted batch (its version is its key). */
export async function recordBatch(db: Pool | PoolClient, payload: CatalogBatchPayload): Promise<void> {
  await db.query(
    `INSERT INTO catalog_batches (version, workspace_id, catalog_id, op, payload) VALUES ($1, $2, $3, $4, $5) ON CONFLICT (version) DO NOTHING`,
    [payload.version, payload.workspaceId, payload.catalogId, payload.op, JSON.stringify(payload)],
  );
}

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
