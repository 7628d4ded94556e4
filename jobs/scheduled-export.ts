import {
  registerExportSchedulesSync,
  ScheduledExportPayload,
  SCHEDULED_EXPORT_QUEUE,
} from '../src/platform/queues/scheduled-export.js';
import { runScheduledExport, syncExportSchedules } from '../src/pipelines/exports/request/schedules.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * Runs of the scheduled exports declared in the workspace file (one BullMQ job scheduler each, with its cron), and
 * the re-sync of those schedulers with scheduled_exports: at worker start and every five minutes, so a re-applied
 * workspace file takes effect without a restart.
 */
export const scheduledExportJob = defineJob({
  queue: SCHEDULED_EXPORT_QUEUE,
  concurrency: () => 1,
  async onStart(ctx) {
    const result = await syncExportSchedules(ctx);
    ctx.log.info(result, 'export schedules synced');
    await registerExportSchedulesSync(ctx.queues);
  },
  async process(job, ctx) {
    const payload = ScheduledExportPayload.parse(job.data);
    if ('sync' in payload) return syncExportSchedules(ctx);
    return runScheduledExport(ctx, payload.scheduledExportId);
  },
});
