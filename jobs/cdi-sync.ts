import { startScheduledSync, syncCdiSchedules } from '../src/pipelines/cdi/schedules.js';
import { endFailedRun, runSync } from '../src/pipelines/cdi/sync.js';
import { CDI_SYNC_QUEUE, CdiSyncPayload, registerCdiSchedulesSync } from '../src/platform/queues/cdi-sync.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * Cloud Data Ingestion: runs of syncs (each resumes where its last committed batch left it, so a retry after a crash
 * applies nothing twice), the integrations' schedule ticks, and the re-sync of their schedulers with the workspace
 * file's integrations (at worker start and every five minutes). A run whose attempts are spent ends as `error`, its
 * refused rows written to its rejects file and gone from PostgreSQL.
 */
export const cdiSyncJob = defineJob({
  queue: CDI_SYNC_QUEUE,
  // One run at a time per process: a run keeps PostgreSQL and a core busy, as an import does.
  concurrency: () => 1,
  async onStart(ctx) {
    const result = await syncCdiSchedules(ctx);
    ctx.log.info(result, 'CDI schedules synced');
    await registerCdiSchedulesSync(ctx.queues);
  },
  async process(job, ctx) {
    const payload = CdiSyncPayload.parse(job.data);
    if ('sync' in payload) return syncCdiSchedules(ctx);
    if ('integrationId' in payload) return (await startScheduledSync(ctx, payload.integrationId))?.id ?? null;
    const done = await runSync(ctx, payload.jobId);
    return done ? { status: done.status, rowsSynced: done.rowsSynced, rowsFailed: done.rowsFailed } : null;
  },
  async onLastAttemptFailed(job, err, ctx) {
    // Only a run has a row to end; a schedule tick or re-sync failing for good leaves nothing waiting.
    const payload = CdiSyncPayload.safeParse(job.data);
    if (!payload.success || !('jobId' in payload.data)) return;
    await endFailedRun(ctx, payload.data.jobId, (err as Error).message);
  },
});
