import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/** Asynchronous catalog changes (item batches, fields, selections), recorded in catalog_batches before the 202 (src/features/catalogs/batches.ts). */
export const CATALOG_BATCH_QUEUE = 'catalog-batch' as const;
type Queues = QueueOf<typeof CATALOG_BATCH_QUEUE, typeof CatalogBatchPayload>;

/**
 * A request that was validated in full before it was queued. The items carry catalog content, never personal data.
 * Changes stay additive: old jobs must still parse.
 */
const Base = {
  workspaceId: z.uuid(),
  catalogId: z.uuid(),
  /** Taken when the request was accepted; orders this write against every other write of the same items. */
  version: z.number().int().positive(),
};
const Items = z.array(z.object({ id: z.string(), data: z.record(z.string(), z.unknown()) })).min(1);
/** An edit of one item: values to set, and strings to remove from and add to array fields ($remove, then $add). */
const ItemEdit = z.object({
  id: z.string(),
  data: z.record(z.string(), z.unknown()),
  arrays: z.record(z.string(), z.object({ add: z.array(z.string()), remove: z.array(z.string()) })).default({}),
});
export type ItemEdit = z.infer<typeof ItemEdit>;
const Field = z.object({ name: z.string(), type: z.string() });
export const SelectionDefinition = z.object({
  name: z.string(),
  description: z.string().nullable(),
  external_id: z.string().nullable(),
  source: z.string().nullable(),
  filters: z.array(z.object({ field: z.string(), operator: z.string(), value: z.unknown() })),
  results_limit: z.number().int().nullable(),
  sort_field: z.string().nullable(),
  sort_order: z.enum(['asc', 'desc']).nullable(),
});
export type SelectionDefinition = z.infer<typeof SelectionDefinition>;

/**
 * A request that was validated in full before it was queued. The items carry catalog content, never personal data.
 * Changes stay additive: old jobs must still parse.
 */
export const CatalogBatchPayload = z.discriminatedUnion('op', [
  z.object({ op: z.literal('replace'), ...Base, items: Items }),
  z.object({ op: z.literal('delete'), ...Base, ids: z.array(z.string()).min(1) }),
  /** Creates the items that do not exist; items that exist are left as they are. */
  z.object({ op: z.literal('create'), ...Base, items: Items }),
  /** Edits the items that exist; ids that name no item are ignored. */
  z.object({ op: z.literal('update'), ...Base, edits: z.array(ItemEdit).min(1) }),
  z.object({ op: z.literal('add_fields'), ...Base, fields: z.array(Field).min(1) }),
  z.object({ op: z.literal('delete_field'), ...Base, field: z.string() }),
  z.object({ op: z.literal('create_selection'), ...Base, selection: SelectionDefinition }),
  z.object({ op: z.literal('delete_selection'), ...Base, name: z.string() }),
]);
export type CatalogBatchPayload = z.infer<typeof CatalogBatchPayload>;

export const batchJobId = (payload: Pick<CatalogBatchPayload, 'op' | 'version'>) =>
  `catalog-${payload.op}-${payload.version}`;

/** Queues a recorded batch; its job id is fixed by its version, so queueing it twice adds one job. */
export async function enqueueCatalogBatch(queues: Queues, payload: CatalogBatchPayload): Promise<void> {
  await queues.get(CATALOG_BATCH_QUEUE).add(CATALOG_BATCH_QUEUE, payload, { jobId: batchJobId(payload) });
}
