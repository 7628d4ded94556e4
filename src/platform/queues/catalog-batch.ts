import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/** Asynchronous catalog batch replace and delete, recorded in catalog_batches before the 202 (src/features/catalogs/batches.ts). */
export const CATALOG_BATCH_QUEUE = 'catalog-batch' as const;
type Queues = QueueOf<typeof CATALOG_BATCH_QUEUE, typeof CatalogBatchPayload>;

/**
 * A request that was validated in full before it was queued. The items carry catalog content, never personal data.
 * Changes stay additive: old jobs must still parse.
 */
export const CatalogBatchPayload = z.discriminatedUnion('op', [
  z.object({
    op: z.literal('replace'),
    workspaceId: z.uuid(),
    catalogId: z.uuid(),
    /** Taken when the request was accepted; orders this write against every other write of the same items. */
    version: z.number().int().positive(),
    items: z.array(z.object({ id: z.string(), data: z.record(z.string(), z.unknown()) })).min(1),
  }),
  z.object({
    op: z.literal('delete'),
    workspaceId: z.uuid(),
    catalogId: z.uuid(),
    version: z.number().int().positive(),
    ids: z.array(z.string()).min(1),
  }),
]);
export type CatalogBatchPayload = z.infer<typeof CatalogBatchPayload>;

export const batchJobId = (payload: Pick<CatalogBatchPayload, 'op' | 'version'>) =>
  `catalog-${payload.op}-${payload.version}`;

/** Queues a recorded batch; its job id is fixed by its version, so queueing it twice adds one job. */
export async function enqueueCatalogBatch(queues: Queues, payload: CatalogBatchPayload): Promise<void> {
  await queues.get(CATALOG_BATCH_QUEUE).add(CATALOG_BATCH_QUEUE, payload, { jobId: batchJobId(payload) });
}
