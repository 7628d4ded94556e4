import type { AppContext } from '../src/context.js';
import { ScheduledExportPayload, SCHEDULED_EXPORT_QUEUE } from '../src/exports/payloads.js';
import { runScheduledExport, syncExportSchedules } from '../src/exports/schedules.js';
import { defineJob } from '../src/worker.js';

const RESYNC_MS = 5 * 60_000;

/**
 * Keeps the job schedulers in step with scheduled_exports: once when the worker starts and every few minutes, so a
 * re-applied workspace file takes effect without a restart.
 */
function startScheduleSync(ctx: AppContext): void {
  const sync = () =>
    syncExportSchedules(ctx).then(
      (r) => ctx.log.info(r, 'export schedules synced'),
      (err: unknown) => ctx.log.warn({ err }, 'export schedule sync failed'),
    );
  void sync();
  setInterval(sync, RESYNC_MS).unref();
}

/** One run of a scheduled export: queues an export like POST /users/export/segment would. */
export const scheduledExportJob = defineJob({
  queue: SCHEDULED_EXPORT_QUEUE,
  // JobDefinition has no start hook yet; concurrency is read exactly once when this queue's worker starts.
  concurrency: (ctx) => {
    startScheduleSync(ctx);
    return 1;
  },
  async process(job, ctx) {
    const { scheduledExportId } = ScheduledExportPayload.parse(job.data);
    return runScheduledExport(ctx, scheduledExportId);
  },
});
