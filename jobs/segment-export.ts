import { failExport, finishExport, ShardsNotEndedError } from '../src/pipelines/exports/finish/finish-export.js';
import { SegmentExportPayload, SEGMENT_EXPORT_QUEUE } from '../src/platform/queues/segment-export.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * The parent of an export's shard jobs: runs once every shard has finished (or failed for good) and completes the
 * export: merges the shard tails, writes the manifest, marks it ready, calls back, releases the locks.
 */
export const segmentExportJob = defineJob({
  queue: SEGMENT_EXPORT_QUEUE,
  workerOptions: { lockDuration: 20_000, stalledInterval: 5_000, maxStalledCount: 2 },
  async process(job, ctx) {
    const { exportId } = SegmentExportPayload.parse(job.data);
    const failures = Object.values(await job.getIgnoredChildrenFailures());
    await finishExport(ctx, exportId, failures);
  },
  async onLastAttemptFailed(job, err, ctx) {
    // Shards lost with Redis are not a failure of the export: the reconciler queues them (and this job) again.
    if (err instanceof ShardsNotEndedError) return;
    await failExport(
      ctx,
      SegmentExportPayload.parse(job.data).exportId,
      `the export failed while assembling its last part or manifest: ${String((err as Error).message).slice(0, 300)}`,
    );
  },
});
