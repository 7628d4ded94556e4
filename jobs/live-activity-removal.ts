import type { Job } from 'bullmq';
import { removeEndedActivity } from '../src/features/live-activities/push.js';
import {
  LIVE_ACTIVITY_REMOVAL_QUEUE,
  LiveActivityRemovalPayload,
} from '../src/platform/queues/live-activity-removal.js';
import { defineJob } from '../src/platform/job-definition.js';

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
