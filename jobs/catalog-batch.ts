import { CatalogBatchPayload, CATALOG_BATCH_QUEUE } from '../src/platform/queues/catalog-batch.js';
import { applyBatch } from '../src/features/catalogs/apply-batch.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * Applies an asynchronous catalog change that the API validated, recorded and queued (items created, replaced, edited
 * or deleted; fields added or deleted; selections created or deleted), each in one transaction that also marks it
 * applied. Applied exactly once: item rows only move to higher versions, and field and selection changes skip what is
 * already done, so a retry after a crash changes nothing twice.
 */
export const catalogBatchJob = defineJob({
  queue: CATALOG_BATCH_QUEUE,
  async process(job, ctx) {
    const payload = CatalogBatchPayload.parse(job.data);
    return applyBatch(ctx.pool, payload, ctx.log);
  },
});
