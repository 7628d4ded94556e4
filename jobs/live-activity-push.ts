import type { Job } from 'bullmq';
import { deliverPush, deliveryAdapter, failPush, PushNotVisibleError } from '../src/features/live-activities/push.js';
import { LIVE_ACTIVITY_PUSH_QUEUE, LiveActivityPushPayload } from '../src/platform/queues/live-activity-push.js';
import { defineJob } from '../src/platform/job-definition.js';

/** Delivers one recorded ActivityKit push through the configured adapter (LIVE_ACTIVITY_DELIVERY). */
export const liveActivityPushJob = defineJob({
  queue: LIVE_ACTIVITY_PUSH_QUEUE,
  async process(job: Job, ctx) {
    const { pushId } = LiveActivityPushPayload.parse(job.data);
    const adapter = deliveryAdapter(ctx.config.LIVE_ACTIVITY_DELIVERY);
    const outcome = await deliverPush(ctx.pool, pushId, adapter, ctx.log);
    ctx.log.info({ pushId, adapter: adapter.name, outcome }, 'live activity push handled');
    return { outcome };
  },
  async onLastAttemptFailed(job, err, ctx) {
    // A push that never became visible belongs to a request that rolled back: nothing to mark.
    if (err instanceof PushNotVisibleError) return;
    await failPush(ctx.pool, LiveActivityPushPayload.parse(job.data).pushId, (err as Error).message);
  },
});
