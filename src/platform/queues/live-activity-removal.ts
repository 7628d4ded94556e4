import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/** Takes an ended live activity off the UI at its dismissal date. */
export const LIVE_ACTIVITY_REMOVAL_QUEUE = 'live-activity-removal' as const;
type Queues = QueueOf<typeof LIVE_ACTIVITY_REMOVAL_QUEUE, typeof LiveActivityRemovalPayload>;

export const LiveActivityRemovalPayload = z.object({ liveActivityId: z.uuid() });

export const removalJobId = (liveActivityId: string) => `la-remove-${liveActivityId}`;

/** Arms the removal of an ended activity at its dismissal date (a delayed job; one per activity). */
export async function enqueueRemoval(
  queues: Queues,
  liveActivityId: string,
  dismissal: Date,
  now = new Date(),
): Promise<void> {
  await queues
    .get(LIVE_ACTIVITY_REMOVAL_QUEUE)
    .add(
      'remove',
      { liveActivityId },
      { jobId: removalJobId(liveActivityId), delay: Math.max(0, dismissal.getTime() - now.getTime()) },
    );
}
