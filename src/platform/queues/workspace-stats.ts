import { z } from 'zod';
import type { Config } from '../config.js';
import type { QueueOf } from './queue-access.js';

/**
 * The statistics the read endpoints answer from without reading every profile: each workspace's segment sizes of the
 * day (GET /segments/data_series) and the custom attribute names its profiles hold (GET /custom_attributes). A sweep
 * every WORKSPACE_STATS_INTERVAL_SECONDS queues one pass per workspace; a pass counts and records what is there now,
 * so a job lost with Redis loses nothing the next sweep does not take again.
 */
export const WORKSPACE_STATS_QUEUE = 'workspace-stats' as const;
type Queues = QueueOf<typeof WORKSPACE_STATS_QUEUE, typeof WorkspaceStatsPayload>;

export const WorkspaceStatsPayload = z.union([
  /** One workspace's pass: its counts are recorded for the UTC day the pass runs on. */
  z.object({ workspaceId: z.uuid() }),
  /** The periodic sweep that queues a pass of every workspace. */
  z.object({ sweep: z.literal(true) }),
]);

const SWEEP_SCHEDULER_ID = 'workspace-stats-sweep';

/** While a workspace's pass waits, another adds nothing; it frees its id when it ends, failed too. */
export const statsJobId = (workspaceId: string) => `workspace-stats-${workspaceId}`;

export async function enqueueStatsPasses(queues: Queues, workspaceIds: string[]): Promise<void> {
  await queues.get(WORKSPACE_STATS_QUEUE).addBulk(
    workspaceIds.map((workspaceId) => ({
      name: 'pass',
      data: { workspaceId },
      opts: {
        jobId: statsJobId(workspaceId),
        attempts: 3,
        backoff: { type: 'exponential', delay: 5000 },
        removeOnComplete: true,
        removeOnFail: true,
      },
    })),
  );
}

/** The sweep, a repeatable job. */
export async function registerWorkspaceStatsSweep(
  queues: Queues,
  config: Pick<Config, 'WORKSPACE_STATS_INTERVAL_SECONDS'>,
): Promise<void> {
  await queues
    .get(WORKSPACE_STATS_QUEUE)
    .upsertJobScheduler(
      SWEEP_SCHEDULER_ID,
      { every: config.WORKSPACE_STATS_INTERVAL_SECONDS * 1000 },
      { name: 'sweep', data: { sweep: true }, opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } } },
    );
}
