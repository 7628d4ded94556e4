import type { Job } from 'bullmq';
import { fireSchedule } from '../src/features/canvases/fire.js';
import {
  CANVAS_SCHEDULE_QUEUE,
  CanvasSchedulePayload,
  registerCanvasSweep,
} from '../src/platform/queues/canvas-schedule.js';
import { rearmSchedules } from '../src/features/canvases/schedules.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * Fires one instant of a scheduled canvas trigger. At worker start it arms every schedule still to send, and a
 * periodic sweep arms those the workspace file writes or changes while the worker runs.
 */
export const canvasScheduleJob = defineJob({
  queue: CANVAS_SCHEDULE_QUEUE,
  async process(job: Job, ctx) {
    const payload = CanvasSchedulePayload.parse(job.data);
    if ('sweep' in payload) return rearmSchedules(ctx.pool, ctx.queues, ctx.log, { onlyUnarmed: true });
    const result = await fireSchedule(ctx.pool, payload, {
      maxLatenessMs: ctx.config.CANVAS_SCHEDULE_MAX_LATENESS_SECONDS * 1000,
      batchSize: Math.max(1, ctx.config.CANVAS_ENTRY_BATCH_SIZE),
      log: ctx.log,
    });
    if (result.outcome !== 'done')
      ctx.log.info(
        { scheduleRowId: payload.scheduleRowId, outcome: result.outcome },
        'canvas schedule firing did nothing',
      );
    return result;
  },
  async onStart(ctx) {
    await registerCanvasSweep(ctx.queues, ctx.config);
    const armed = await rearmSchedules(ctx.pool, ctx.queues, ctx.log);
    ctx.log.info(armed, 'canvas schedules armed');
  },
});
