import type { Job } from 'bullmq';
import {
  deliverPush,
  deliveryAdapter,
  failPush,
  LIVE_ACTIVITY_PUSH_QUEUE,
  LIVE_ACTIVITY_REMOVAL_QUEUE,
  LiveActivityPushPayload,
  LiveActivityRemovalPayload,
  PushNotVisibleError,
  removeEndedActivity,
} from '../src/live-activities/push.js';
import { defineJob } from '../src/worker.js';

/** Delivers one recorded ActivityKit push through the configured adapter (LIVE_ACTIVITY_DELIVERY). */
export const liveActivityPushJob = defineJob({
  queue: LIVE_ACTIVITY_PUSH_QUEUE,
  async process(job: Job, ctx) {
    const { pushId } = LiveActivityPushPayload.parse(job.data);
    const adapter = deliveryAdapter(ctx.config.LIVE_ACTIVITY_DELIVERY);
    try {
      const outcome = await deliverPush(ctx.pool, pushId, adapter, ctx.log);
      ctx.log.info({ pushId, adapter: adapter.name, outcome }, 'live activity push handled');
      return { outcome };
    } catch (err) {
      const lastAttempt = job.attemptsMade + 1 >= (job.opts.attempts ?? 1);
      // A push that never became visible belongs to a request that rolled back: nothing to mark.
      if (lastAttempt && !(err instanceof PushNotVisibleError)) await failPush(ctx.pool, pushId, (err as Error).message);
      throw err;
    }
  },
});

/** Takes an ended activity off the UI at its dismissal date (a delayed job armed by the end update). */
export const liveActivityRemovalJob = defineJob({
  queue: LIVE_ACTIVITY_REMOVAL_QUEUE,
  async process(job: Job, ctx) {
    const { liveActivityId } = LiveActivityRemovalPayload.parse(job.data);
    const removed = await removeEndedActivity(ctx.pool, liveActivityId);
    ctx.log.info({ liveActivityId, removed }, 'live activity dismissal');
    return { removed };
  },
});
