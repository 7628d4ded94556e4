import { z } from 'zod';

/**
 * The payload of a catalog-batch job: a request that was validated in full before it was queued. The items carry
 * catalog content, never personal data. Changes stay additive: old jobs must still parse.
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

export const CATALOG_BATCH_QUEUE = 'catalog-batch';
