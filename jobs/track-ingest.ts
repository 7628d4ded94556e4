import { drainThrough } from '../src/ingest/staging.js';
import { TRACK_INGEST_QUEUE, TrackIngestPayload } from '../src/ingest/payloads.js';
import { defineJob } from '../src/worker.js';

/**
 * Sees a staged /users/track request applied: drains the staging log, oldest first and many requests per
 * transaction (INGEST_BATCH_MAX_JOBS), until the job's own row is gone. A job whose row another worker already
 * applied finishes at once; a retried job never applies a row twice (rows are deleted as they are applied).
 */
export const trackIngestJob = defineJob({
  queue: TRACK_INGEST_QUEUE,
  async process(job, ctx) {
    const { stagedId } = TrackIngestPayload.parse(job.data);
    const result = await drainThrough(ctx.pool, stagedId, { maxRows: Math.max(1, ctx.config.INGEST_BATCH_MAX_JOBS), log: ctx.log, metrics: ctx.metrics });
    if (result.batches > 0) ctx.log.debug({ stagedId, ...result }, 'ingest drained');
    return result;
  },
});
