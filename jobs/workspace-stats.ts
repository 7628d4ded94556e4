import type { Job } from 'bullmq';
import { allWorkspaceIds, takeWorkspaceStats } from '../src/profiles/workspace-stats.js';
import { utcDay } from '../src/platform/lib/iso-time.js';
import {
  enqueueStatsPasses,
  registerWorkspaceStatsSweep,
  WORKSPACE_STATS_QUEUE,
  WorkspaceStatsPayload,
} from '../src/platform/queues/workspace-stats.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * The workspaces' statistics: a sweep queues a pass of every workspace; a pass records the size of each of its
 * segments for today and the custom attribute names its profiles hold (src/profiles/workspace-stats.ts).
 */
export const workspaceStatsJob = defineJob({
  queue: WORKSPACE_STATS_QUEUE,
  // A pass reads a whole workspace's profiles: one at a time per process, so that statistics never take the
  // connections and cores that ingestion and exports need (more processes take more at once).
  concurrency: () => 1,
  async process(job: Job, ctx) {
    const payload = WorkspaceStatsPayload.parse(job.data);
    if ('sweep' in payload) {
      const ids = await allWorkspaceIds(ctx.pool);
      await enqueueStatsPasses(ctx.queues, ids);
      return { queued: ids.length };
    }
    // The day the counts are taken on, not the sweep's: a pass that waited past midnight counts the new day.
    const day = utcDay(new Date());
    return { day, ...(await takeWorkspaceStats(ctx.pool, payload.workspaceId, day)) };
  },
  async onStart(ctx) {
    await registerWorkspaceStatsSweep(ctx.queues, ctx.config);
  },
});
