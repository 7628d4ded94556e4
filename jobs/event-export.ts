import type { Job } from 'bullmq';
import { allEventExports } from '../src/pipelines/events/event-exports.js';
import { flushEventExport } from '../src/pipelines/events/flush-export.js';
import {
  enqueueFlushes,
  EVENT_EXPORT_QUEUE,
  EventExportPayload,
  registerEventExportSweep,
} from '../src/platform/queues/event-export.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * The event stream's delivery: a sweep queues a pass of every event export; a pass writes the files that are due
 * (src/pipelines/events/flush-export.ts). A destination that refuses a write fails the pass, which is retried with
 * backoff and taken up again by the next sweep; ingestion never waits for it.
 */
export const eventExportJob = defineJob({
  queue: EVENT_EXPORT_QUEUE,
  async process(job: Job, ctx) {
    const payload = EventExportPayload.parse(job.data);
    if ('sweep' in payload) {
      const exports = await allEventExports(ctx.pool);
      await enqueueFlushes(
        ctx.queues,
        exports.map((e) => e.id),
      );
      return { queued: exports.length };
    }
    return flushEventExport(ctx, payload.exportId);
  },
  async onStart(ctx) {
    await registerEventExportSweep(ctx.queues, ctx.config);
  },
});
