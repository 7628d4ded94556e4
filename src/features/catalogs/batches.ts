import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import type { Logger } from '../../platform/logger.js';
import { CatalogBatchPayload, enqueueCatalogBatch } from '../../platform/queues/catalog-batch.js';
import type { Queues } from '../../platform/queues/index.js';
import { queueRecorded } from '../../platform/queues/queue-recorded.js';
import { guarded } from './errors.js';

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

/** What accepting a change needs: the record, the queue, and a log for a change recorded but not queued. */
export interface AcceptBatchDeps {
  pool: Pool;
  queues: Queues;
  log: Pick<Logger, 'warn'>;
}

/** Runs in the transaction that records a change (an Idempotency-Key answers there). */
export type OnBatchRecorded = (db: PoolClient) => Promise<void>;

/**
 * Records a validated change (and the caller's answer) in one transaction, then queues it. Resolves once recorded, so
 * a 202 means it will be applied even if Redis is away (the reconciler queues it then).
 */
export async function acceptChange(
  deps: AcceptBatchDeps,
  payload: CatalogBatchPayload,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  await guarded(() =>
    withTransaction(deps.pool, async (client) => {
      await recordBatch(client, payload);
      await onRecorded?.(client);
    }),
  );
  await queueRecorded(deps.log, 'catalog batch', { version: payload.version, op: payload.op }, () =>
    enqueueCatalogBatch(deps.queues, payload),
  );
}
