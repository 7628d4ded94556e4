import type { Pool } from '../../platform/db/pool.js';
import { AppError } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import { enqueueSync, removeCdiSchedulesBut, upsertCdiSchedule } from '../../platform/queues/cdi-sync.js';
import type { Queues } from '../../platform/queues/index.js';
import { queueRecorded } from '../../platform/queues/queue-recorded.js';
import { allIntegrations } from './integrations.js';
import { recordSyncJob, type JobTrigger, type SyncJob } from './sync-runs.js';

export interface ScheduleDeps {
  pool: Pool;
  queues: Queues;
  log: Logger;
}

/** Brings the schedulers in line with the integrations (at worker start, every five minutes, and by the reconciler). */
export async function syncCdiSchedules(deps: ScheduleDeps): Promise<{ active: number; removed: number }> {
  const scheduled = (await allIntegrations(deps.pool)).filter((i) => i.schedule !== null);
  for (const i of scheduled) {
    try {
      await upsertCdiSchedule(deps.queues, i.id, i.schedule!);
    } catch (err) {
      deps.log.warn(
        { integrationId: i.id, reason: (err as Error).message },
        'CDI schedule not armed: the cron pattern or time zone is refused',
      );
    }
  }
  const removed = await removeCdiSchedulesBut(deps.queues, new Set(scheduled.map((i) => i.id)));
  return { active: scheduled.length, removed };
}

/**
 * Starts a run of the integration: recorded first (429 when one runs), then queued. A run recorded but not queued
 * (Redis away) is queued by the reconciler, so the answer does not wait for Redis.
 */
export async function startSync(
  deps: ScheduleDeps,
  workspaceId: string,
  integrationId: string,
  trigger: JobTrigger,
): Promise<SyncJob> {
  const job = await recordSyncJob(deps.pool, workspaceId, integrationId, trigger);
  await queueRecorded(deps.log, 'CDI sync', { cdiJobId: job.id }, () => enqueueSync(deps.queues, job.id));
  return job;
}

/** A schedule's tick: a run, unless one already runs (then this tick is skipped, as the public API skips it). */
export async function startScheduledSync(deps: ScheduleDeps, integrationId: string): Promise<SyncJob | null> {
  const { rows } = await deps.pool.query<{ workspace_id: string }>(
    `SELECT workspace_id FROM cdi_integrations WHERE id = $1`,
    [integrationId],
  );
  if (!rows[0]) return null;
  try {
    return await startSync(deps, rows[0].workspace_id, integrationId, 'schedule');
  } catch (err) {
    if (err instanceof AppError && err.code === 'rate_limited') {
      deps.log.info({ integrationId }, 'scheduled CDI sync skipped: the previous run still runs');
      return null;
    }
    throw err;
  }
}
