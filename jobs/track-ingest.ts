import { drainThrough } from '../src/pipelines/ingest/apply/drain-staging.js';
import { registerTrackSweep, TRACK_INGEST_QUEUE, TrackIngestPayload } from '../src/platform/queues/track-ingest.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * Sees staged /users/track requests applied: frees the shared deduplication id (src/pipelines/ingest/accept/track.ts)
 * so that requests committed from now on queue the next job, then drains the staging log, workspaces taking turns (each
 * its oldest first), many requests per transaction (INGEST_BATCH_MAX_JOBS), through the newest row staged when it
 * started (or through `stagedId`, for jobs queued by older versions), each ingestion partition (INGEST_PARTITIONS) on
 * its own connection at once. A retried job never applies a row twice (rows are deleted as they are applied).
 */
export const trackIngestJob = defineJob({
  queue: TRACK_INGEST_QUEUE,
  // The sweep applies rows whose job was never queued (Redis was away when they were accepted).
  onStart: (ctx) => registerTrackSweep(ctx.queues),
  async process(job, ctx) {
    await job.removeDeduplicationKey();
    const { stagedId } = TrackIngestPayload.parse(job.data);
    const result = await drainThrough(ctx.pool, stagedId, {
      maxRows: Math.max(1, ctx.config.INGEST_BATCH_MAX_JOBS),
      partitions: ctx.config.INGEST_PARTITIONS,
      log: ctx.log,
      metrics: ctx.metrics,
    });
    if (result.batches > 0) ctx.log.debug({ stagedId, ...result }, 'ingest drained');
    return result;
  },
});
