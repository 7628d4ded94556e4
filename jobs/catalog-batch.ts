import { CatalogBatchPayload, CATALOG_BATCH_QUEUE } from '../src/platform/queues/catalog-batch.js';
import { applyBatch } from '../src/features/catalogs/items.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * Applies a batch replace or delete that the API validated and queued: every item of the request in one
 * transaction. Idempotent (rows only move to higher versions), so a retry after a crash is harmless.
 */
export const catalogBatchJob = defineJob({
  queue: CATALOG_BATCH_QUEUE,
  async process(job, ctx) {
    const payload = CatalogBatchPayload.parse(job.data);
    return applyBatch(ctx.pool, payload, ctx.log);
  },
});
