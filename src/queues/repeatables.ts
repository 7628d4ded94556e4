import type { Config } from '../config.js';
import { CANVAS_SCHEDULE_QUEUE, SWEEP_SCHEDULER_ID } from '../canvases/schedule-time.js';
import { SCHEDULED_EXPORT_QUEUE } from '../exports/payloads.js';
import { scheduleTrackSweep } from '../ingest/track.js';
import type { Queues } from '../queues.js';

/**
 * Every repeatable job of the service, registered here and nowhere else: each queue's worker registers its own when
 * it starts, and the reconciler registers them all on every pass, so a Redis that lost them has them back within a
 * pass. Registering is idempotent (BullMQ job schedulers are keyed by id).
 */

/** The re-sync of scheduled exports' schedulers with the workspace file's rows (src/exports/schedules.ts). */
export const EXPORT_SCHEDULES_SYNC_ID = 'scheduled-exports-sync';
const EXPORT_SCHEDULES_SYNC_EVERY_MS = 5 * 60_000;

export async function registerExportSchedulesSync(queues: Queues): Promise<void> {
  await queues.get(SCHEDULED_EXPORT_QUEUE).upsertJobScheduler(EXPORT_SCHEDULES_SYNC_ID, { every: EXPORT_SCHEDULES_SYNC_EVERY_MS }, { name: 'sync', data: { sync: true } });
}

/** The canvas-schedule sweep that arms schedules the workspace file adds or changes (0 s: none). */
export async function registerCanvasSweep(queues: Queues, config: Pick<Config, 'CANVAS_SCHEDULE_SWEEP_SECONDS'>): Promise<void> {
  const queue = queues.get(CANVAS_SCHEDULE_QUEUE);
  const every = config.CANVAS_SCHEDULE_SWEEP_SECONDS * 1000;
  if (every > 0) {
    await queue.upsertJobScheduler(SWEEP_SCHEDULER_ID, { every }, { name: 'sweep', data: { sweep: true }, opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } } });
  } else {
    await queue.removeJobScheduler(SWEEP_SCHEDULER_ID);
  }
}

/** The staging sweep of /users/track (src/ingest/track.ts). */
export const registerTrackSweep = scheduleTrackSweep;

export async function registerRepeatableJobs(queues: Queues, config: Pick<Config, 'CANVAS_SCHEDULE_SWEEP_SECONDS'>): Promise<void> {
  await registerTrackSweep(queues);
  await registerCanvasSweep(queues, config);
  await registerExportSchedulesSync(queues);
}
