import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/**
 * Cloud Data Ingestion: the runs of syncs (src/pipelines/cdi/sync.ts), the integrations' schedules (one BullMQ job
 * scheduler each), and the periodic re-sync of those schedulers with the workspace file's integrations.
 */
export const CDI_SYNC_QUEUE = 'cdi-sync' as const;
type Queues = QueueOf<typeof CDI_SYNC_QUEUE, typeof CdiSyncPayload>;

export const CdiSyncPayload = z.union([
  /** Runs (or resumes) a recorded sync job. */
  z.object({ jobId: z.uuid() }),
  /** A schedule's tick: records a run of the integration and runs it (none when one already runs). */
  z.object({ integrationId: z.uuid() }),
  /** Brings the schedulers in line with cdi_integrations. */
  z.object({ sync: z.literal(true) }),
]);
export type CdiSyncPayload = z.infer<typeof CdiSyncPayload>;

/** The job row holds the run's progress, so retries resume; history kept a week. */
const JOB_OPTIONS = {
  attempts: 10,
  backoff: { type: 'exponential', delay: 2000 },
  removeOnComplete: { age: 7 * 24 * 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600 },
};

export const syncJobId = (jobId: string) => `cdi-${jobId}`;
const SCHEDULER_PREFIX = 'cdi-schedule-';
const SYNC_SCHEDULER_ID = 'cdi-schedules-sync';
const SYNC_EVERY_MS = 5 * 60_000;

/** Hands a recorded run to the workers; its job id is the run's, so queueing it again adds nothing while it exists. */
export async function enqueueSync(queues: Queues, jobId: string): Promise<void> {
  await queues.get(CDI_SYNC_QUEUE).add('sync', { jobId }, { ...JOB_OPTIONS, jobId: syncJobId(jobId) });
}

/** When a scheduler fires: every n minutes, or on a cron pattern in a time zone (an integration's `schedule`). */
export type SyncSchedule = { every_minutes: number } | { cron: string; time_zone: string };

/** Creates or updates an integration's scheduler (throws on an invalid cron pattern or time zone). */
export async function upsertCdiSchedule(queues: Queues, integrationId: string, schedule: SyncSchedule): Promise<void> {
  const repeat =
    'every_minutes' in schedule
      ? { every: schedule.every_minutes * 60_000 }
      : { pattern: schedule.cron, tz: schedule.time_zone };
  await queues.get(CDI_SYNC_QUEUE).upsertJobScheduler(`${SCHEDULER_PREFIX}${integrationId}`, repeat, {
    name: 'scheduled-sync',
    data: { integrationId },
  });
}

/** When an integration's scheduler fires next, or null (none, or Redis cannot say). */
export async function nextScheduledRun(queues: Queues, integrationId: string): Promise<Date | null> {
  const scheduler = await queues.get(CDI_SYNC_QUEUE).getJobScheduler(`${SCHEDULER_PREFIX}${integrationId}`);
  return scheduler?.next ? new Date(scheduler.next) : null;
}

/** Drops the schedulers of integrations other than `keep`; returns how many went. */
export async function removeCdiSchedulesBut(queues: Queues, keep: Set<string>): Promise<number> {
  const queue = queues.get(CDI_SYNC_QUEUE);
  let removed = 0;
  for (const s of await queue.getJobSchedulers(0, -1)) {
    if (!s.key.startsWith(SCHEDULER_PREFIX) || keep.has(s.key.slice(SCHEDULER_PREFIX.length))) continue;
    await queue.removeJobScheduler(s.key);
    removed++;
  }
  return removed;
}

/** The re-sync of the schedulers with cdi_integrations, every five minutes (a repeatable job). */
export async function registerCdiSchedulesSync(queues: Queues): Promise<void> {
  await queues
    .get(CDI_SYNC_QUEUE)
    .upsertJobScheduler(SYNC_SCHEDULER_ID, { every: SYNC_EVERY_MS }, { name: 'sync', data: { sync: true } });
}
