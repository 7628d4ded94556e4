import type { Job } from 'bullmq';
import { exportsDue } from '../src/pipelines/events/export-failures.js';
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
 * (src/pipelines/events/flush-export.ts). A pass its destination refuses is recorded, not failed: the sweep skips the
 * export until its backoff ends (src/pipelines/events/export-failures.ts). A pass that fails otherwise (PostgreSQL
 * away) is retried by BullMQ with backoff. Ingestion never waits for either: events wait in the log.
 */
export const eventExportJob = defineJob({
  queue: EVENT_EXPORT_QUEUE,
  async process(job: Job, ctx) {
    const payload = EventExportPayload.parse(job.data);
    if ('sweep' in payload) {
      const due = await exportsDue(ctx.pool);
      await enqueueFlushes(ctx.queues, due);
      return { queued: due.length };
    }
    return flushEventExport(ctx, payload.exportId);
  },
  async onStart(ctx) {
    await registerEventExportSweep(ctx.queues, ctx.config);
  },
});
