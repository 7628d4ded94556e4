import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/** Delivers recorded live activity pushes (src/features/live-activities/push.ts). */
export const LIVE_ACTIVITY_PUSH_QUEUE = 'live-activity-push' as const;
type Queues = QueueOf<typeof LIVE_ACTIVITY_PUSH_QUEUE, typeof LiveActivityPushPayload>;

/** Carries only the id of the recorded push: the payload and tokens are read from the store. */
export const LiveActivityPushPayload = z.object({ pushId: z.number().int().positive() });

export const pushJobId = (pushId: number) => `la-push-${pushId}`;

/** Queues the delivery of a recorded push (its job id is fixed by the push: queueing it twice adds one job). */
export async function enqueuePush(queues: Queues, pushId: number): Promise<void> {
  await queues.get(LIVE_ACTIVITY_PUSH_QUEUE).add('push', { pushId }, { jobId: pushJobId(pushId) });
}
