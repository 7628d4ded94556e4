import { z } from 'zod';
import type { Config } from '../config.js';
import type { QueueOf } from './queue-access.js';

/** Firings of scheduled canvas triggers (delayed jobs), and the sweep that arms schedules the workspace file wrote. */
export const CANVAS_SCHEDULE_QUEUE = 'canvas-schedule' as const;
type Queues = QueueOf<typeof CANVAS_SCHEDULE_QUEUE, typeof CanvasSchedulePayload>;

/** One firing: the schedule row, the version it was armed for, and its UTC instant. */
export const CanvasFirePayload = z.object({
  scheduleRowId: z.uuid(),
  version: z.number().int().positive(),
  fireAt: z.iso.datetime(),
});
export type CanvasFirePayload = z.infer<typeof CanvasFirePayload>;
/** The periodic sweep that arms schedules written by the workspace file while the worker runs. */
export const CanvasSweepPayload = z.object({ sweep: z.literal(true) });
export const CanvasSchedulePayload = z.union([CanvasFirePayload, CanvasSweepPayload]);

const SWEEP_SCHEDULER_ID = 'canvas-schedule-sweep';

/** The deterministic id of one firing's delayed job, so re-arming never duplicates and updates can remove it. */
export const fireJobId = (scheduleRowId: string, version: number, fireAt: Date) =>
  `cs-${scheduleRowId}-v${version}-${fireAt.getTime()}`;

/** Arms a schedule's firings at their instants. */
export async function enqueueFires(
  queues: Queues,
  row: { id: string; version: number },
  fireTimes: Date[],
  now: Date,
): Promise<void> {
  await queues.get(CANVAS_SCHEDULE_QUEUE).addBulk(
    fireTimes.map((t) => ({
      name: 'fire',
      data: { scheduleRowId: row.id, version: row.version, fireAt: t.toISOString() },
      opts: { jobId: fireJobId(row.id, row.version, t), delay: Math.max(0, t.getTime() - now.getTime()) },
    })),
  );
}

/** Best effort: a job that is running or already gone stays, and finds itself stale by its version. */
export async function removeFires(
  queues: Queues,
  rowId: string,
  version: number,
  fireTimes: Date[] | null,
): Promise<void> {
  const queue = queues.get(CANVAS_SCHEDULE_QUEUE);
  await Promise.all((fireTimes ?? []).map((t) => queue.remove(fireJobId(rowId, version, t)).catch(() => 0)));
}

/** The canvas-schedule sweep, a repeatable job every CANVAS_SCHEDULE_SWEEP_SECONDS (0: none). */
export async function registerCanvasSweep(
  queues: Queues,
  config: Pick<Config, 'CANVAS_SCHEDULE_SWEEP_SECONDS'>,
): Promise<void> {
  const queue = queues.get(CANVAS_SCHEDULE_QUEUE);
  const every = config.CANVAS_SCHEDULE_SWEEP_SECONDS * 1000;
  if (every > 0) {
    await queue.upsertJobScheduler(
      SWEEP_SCHEDULER_ID,
      { every },
      { name: 'sweep', data: { sweep: true }, opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } } },
    );
  } else {
    await queue.removeJobScheduler(SWEEP_SCHEDULER_ID);
  }
}
