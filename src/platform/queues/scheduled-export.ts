import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/** Runs of the scheduled exports of the workspace file (one job scheduler each), and their periodic re-sync. */
export const SCHEDULED_EXPORT_QUEUE = 'scheduled-export' as const;
type Queues = QueueOf<typeof SCHEDULED_EXPORT_QUEUE, typeof ScheduledExportPayload>;

export const ScheduledExportPayload = z.union([
  z.object({ scheduledExportId: z.uuid() }),
  z.object({ sync: z.literal(true) }),
]);

const SCHEDULER_PREFIX = 'export-schedule-';
const SYNC_SCHEDULER_ID = 'scheduled-exports-sync';
const SYNC_EVERY_MS = 5 * 60_000;

/** Creates or updates the job scheduler of one scheduled export (throws on an invalid cron pattern or time zone). */
export async function upsertExportSchedule(
  queues: Queues,
  scheduledExportId: string,
  cron: string,
  timeZone: string,
): Promise<void> {
  await queues
    .get(SCHEDULED_EXPORT_QUEUE)
    .upsertJobScheduler(
      `${SCHEDULER_PREFIX}${scheduledExportId}`,
      { pattern: cron, tz: timeZone },
      { name: 'scheduled-export', data: { scheduledExportId } },
    );
}

/** Drops the schedulers of scheduled exports other than `keep`; returns how many went. */
export async function removeExportSchedulesBut(queues: Queues, keep: Set<string>): Promise<number> {
  const queue = queues.get(SCHEDULED_EXPORT_QUEUE);
  let removed = 0;
  for (const s of await queue.getJobSchedulers(0, -1)) {
    if (!s.key.startsWith(SCHEDULER_PREFIX) || keep.has(s.key.slice(SCHEDULER_PREFIX.length))) continue;
    await queue.removeJobScheduler(s.key);
    removed++;
  }
  return removed;
}

/** The re-sync of the schedulers with the workspace file's rows, every five minutes (a repeatable job). */
export async function registerExportSchedulesSync(queues: Queues): Promise<void> {
  await queues
    .get(SCHEDULED_EXPORT_QUEUE)
    .upsertJobScheduler(SYNC_SCHEDULER_ID, { every: SYNC_EVERY_MS }, { name: 'sync', data: { sync: true } });
}
