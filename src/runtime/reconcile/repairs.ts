import { forgetAppliedBatches, waitingBatches } from '../../features/catalogs/batches.js';
import { rearmSchedules } from '../../features/canvases/schedules.js';
import type { Config } from '../../platform/config.js';
import type { Pool } from '../../platform/db/pool.js';
import { exportLockKeys, releaseExportLock, renewExportLock } from '../../pipelines/exports/holds.js';
import { exportCallback } from '../../pipelines/exports/finish/finish-export.js';
import { pendingCallbacksBefore, unfinishedExportsBefore } from '../../pipelines/exports/export-rows.js';
import { syncExportSchedules } from '../../pipelines/exports/request/schedules.js';
import { syncCdiSchedules } from '../../pipelines/cdi/schedules.js';
import { CDI_SYNC_QUEUE, enqueueSync, syncJobId } from '../../platform/queues/cdi-sync.js';
import { CANVAS_SCHEDULE_QUEUE } from '../../platform/queues/canvas-schedule.js';
import { EXPORT_SHARD_QUEUE } from '../../platform/queues/export-shard.js';
import { SCHEDULED_EXPORT_QUEUE } from '../../platform/queues/scheduled-export.js';
import { EVENT_EXPORT_QUEUE } from '../../platform/queues/event-export.js';
import { WORKSPACE_STATS_QUEUE } from '../../platform/queues/workspace-stats.js';
import { lockNames } from '../../platform/db/advisory-locks.js';
import { exportShards } from '../../pipelines/exports/shard/shard-ranges.js';
import type { Logger } from '../../platform/logger.js';
import { BULK_IMPORT_QUEUE, enqueueImport, importJobId } from '../../platform/queues/bulk-import.js';
import { batchJobId, CATALOG_BATCH_QUEUE, enqueueCatalogBatch } from '../../platform/queues/catalog-batch.js';
import { callbackJobId, enqueueExportCallback, EXPORT_CALLBACK_QUEUE } from '../../platform/queues/export-callback.js';
import type { Queues, QueueName } from '../../platform/queues/index.js';
import { enqueuePush, LIVE_ACTIVITY_PUSH_QUEUE, pushJobId } from '../../platform/queues/live-activity-push.js';
import {
  enqueueRemoval,
  LIVE_ACTIVITY_REMOVAL_QUEUE,
  removalJobId,
} from '../../platform/queues/live-activity-removal.js';
import { registerRepeatableJobs } from '../../platform/queues/repeatables.js';
import { enqueueExportFlow, SEGMENT_EXPORT_QUEUE } from '../../platform/queues/segment-export.js';
import { enqueueApply, TRACK_INGEST_QUEUE } from '../../platform/queues/track-ingest.js';
import { redisKeyPrefix, type Redis } from '../../platform/redis.js';

/**
 * What the reconciler repairs, kind of work by kind of work: each compares PostgreSQL's unfinished work with what Redis
 * holds and queues again what is missing. Every job id is fixed by its work (an export's id, an import's id, a batch's
 * version...), so queueing again what Redis still holds adds nothing, and every job is safe to run twice. Work younger
 * than GRACE_MS is left alone: its producer may be between its commit and its add.
 */
export const GRACE_MS = 5_000;

export interface RepairDeps {
  config: Config;
  pool: Pool;
  redis: Redis;
  queues: Queues;
  log: Logger;
}

/** How many of each kind were queued again (or re-armed) by a pass. */
export type Repaired = Record<string, number>;

/** True when Redis has no job of that id (never added, removed, or lost). */
async function lost(queues: Queues, name: QueueName, jobId: string): Promise<boolean> {
  return (await queues.state(name, jobId)) === 'unknown';
}

const before = (ms: number) => new Date(Date.now() - ms);

/**
 * Exports queued or running: their segment hold and company slot in Redis are taken again (they are leases that a
 * lost Redis forgets), and an export whose finishing job is gone (or failed because shards were lost) is queued again
 * with only the shards that have not ended. A shard's earlier runner, if still alive, is waited for by the new one.
 */
export async function repairExports(deps: RepairDeps): Promise<number> {
  const { pool, redis, queues, config, log } = deps;
  const rows = await unfinishedExportsBefore(pool, before(GRACE_MS));
  let queued = 0;
  for (const exp of rows) {
    const keys = exportLockKeys(redisKeyPrefix(config), exp.segment_id, exp.company_id);
    if (!(await renewExportLock(redis, keys, exp.id, config.EXPORT_QUEUED_LEASE_MS))) {
      // Held by another export: PostgreSQL allows one unfinished export per segment, so that hold is stale.
      const holder = await redis.get(keys.segment);
      if (holder) await releaseExportLock(redis, keys, holder);
      await renewExportLock(redis, keys, exp.id, config.EXPORT_QUEUED_LEASE_MS);
    }
    const state = await queues.state(SEGMENT_EXPORT_QUEUE, exp.id);
    if (state !== 'unknown' && state !== 'failed') continue;
    if (state === 'failed') await queues.remove(SEGMENT_EXPORT_QUEUE, exp.id);
    const ended = await pool.query<{ shard: number }>('SELECT shard FROM export_shards_done WHERE export_id = $1', [
      exp.id,
    ]);
    const done = new Set(ended.rows.map((r) => r.shard));
    const all = exportShards(exp);
    const shards = all.filter((s) => !done.has(s.shard));
    await enqueueExportFlow(queues, exp.id, shards, config.EXPORT_SHARD_ATTEMPTS);
    log.warn(
      { exportId: exp.id, shards: shards.length, ended: done.size },
      'export queued again: Redis had lost its jobs',
    );
    queued++;
  }
  return queued;
}

/** Callbacks of exports that finished in the last day and were neither delivered nor given up. */
export async function repairExportCallbacks(deps: RepairDeps): Promise<number> {
  const { pool, queues, config, log } = deps;
  const rows = await pendingCallbacksBefore(pool, before(GRACE_MS));
  let queued = 0;
  for (const exp of rows) {
    if (!(await lost(queues, EXPORT_CALLBACK_QUEUE, callbackJobId(exp.id)))) continue;
    const callback = exportCallback(config, exp);
    if (!callback) continue;
    await enqueueExportCallback(queues, config.CALLBACK_MAX_ATTEMPTS, exp.id, callback);
    log.warn({ exportId: exp.id }, 'export callback queued again: Redis had lost its job');
    queued++;
  }
  return queued;
}

/** Staged /users/track rows: an apply job is queued (a no-op while one waits). */
export async function repairStagedTrack(deps: RepairDeps): Promise<number> {
  const { rows } = await deps.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM (SELECT 1 FROM ingest_staging WHERE accepted_at < $1 LIMIT 1) s',
    [before(GRACE_MS)],
  );
  if (rows[0]!.n === 0) return 0;
  await enqueueApply(deps.queues);
  return 1;
}

/** Catalog batches answered 202 and not applied, whose job is gone; applied ones older than a week are forgotten. */
export async function repairCatalogBatches(deps: RepairDeps): Promise<number> {
  let queued = 0;
  for (const batch of await waitingBatches(deps.pool, before(GRACE_MS))) {
    if (!(await lost(deps.queues, CATALOG_BATCH_QUEUE, batchJobId(batch)))) continue;
    await enqueueCatalogBatch(deps.queues, batch);
    deps.log.warn({ version: batch.version, op: batch.op }, 'catalog batch queued again: Redis had lost its job');
    queued++;
  }
  await forgetAppliedBatches(deps.pool);
  return queued;
}

/**
 * Bulk imports run by the workers, queued or running, whose job is gone and that no process is running (a runner
 * holds the import's advisory lock for its whole run).
 */
export async function repairImports(deps: RepairDeps): Promise<number> {
  const { rows } = await deps.pool.query<{ id: string }>(
    `SELECT id FROM imports WHERE status IN ('queued', 'running') AND via_queue AND updated_at < $1 ORDER BY created_at`,
    [before(GRACE_MS)],
  );
  let queued = 0;
  for (const { id } of rows) {
    if (!(await lost(deps.queues, BULK_IMPORT_QUEUE, importJobId(id)))) continue;
    const free = await deps.pool.query<{ free: boolean }>(
      `SELECT NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
                            AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)) AS free`,
      [`ces-import:${id}`],
    );
    if (!free.rows[0]!.free) continue;
    await enqueueImport(deps.queues, id);
    deps.log.warn({ importId: id }, 'import queued again: Redis had lost its job');
    queued++;
  }
  return queued;
}

/** Live activity pushes recorded and not delivered, and removals of ended activities, whose jobs are gone. */
export async function repairLiveActivities(deps: RepairDeps): Promise<number> {
  const { pool, queues, log } = deps;
  let queued = 0;
  const pushes = await pool.query<{ id: number }>(
    `SELECT id FROM live_activity_pushes WHERE status = 'queued' AND created_at < $1 ORDER BY id`,
    [before(GRACE_MS)],
  );
  for (const { id } of pushes.rows) {
    if (!(await lost(queues, LIVE_ACTIVITY_PUSH_QUEUE, pushJobId(id)))) continue;
    await enqueuePush(queues, id);
    log.warn({ pushId: id }, 'live activity push queued again: Redis had lost its job');
    queued++;
  }
  const ended = await pool.query<{ id: string; dismissal_date: Date }>(
    `SELECT id, dismissal_date FROM live_activities WHERE state = 'ended' AND dismissal_date IS NOT NULL AND updated_at < $1`,
    [before(GRACE_MS)],
  );
  for (const a of ended.rows) {
    if (!(await lost(queues, LIVE_ACTIVITY_REMOVAL_QUEUE, removalJobId(a.id)))) continue;
    await enqueueRemoval(queues, a.id, a.dismissal_date);
    queued++;
  }
  return queued;
}

/**
 * Schedules: every repeatable job, the scheduled exports' schedulers, and canvas schedules (all of them re-armed when
 * `full`, which the reconciler asks for when Redis lost its data and now and then; otherwise those not yet armed).
 */
export async function repairSchedules(deps: RepairDeps, full: boolean): Promise<number> {
  await registerRepeatableJobs(deps.queues, deps.config);
  const exports = await syncExportSchedules(deps);
  const canvases = await rearmSchedules(deps.pool, deps.queues, deps.log, { onlyUnarmed: !full });
  const cdi = await syncCdiSchedules(deps);
  return exports.active + canvases.jobs + cdi.active;
}

/** CDI runs recorded and running whose job Redis lost (or never got), and that no process is running now. */
export async function repairCdiSyncs(deps: RepairDeps): Promise<number> {
  const { rows } = await deps.pool.query<{ id: string; integration_id: string }>(
    `SELECT id, integration_id FROM cdi_sync_jobs WHERE status = 'running' AND started_at < $1 ORDER BY started_at`,
    [before(GRACE_MS)],
  );
  let queued = 0;
  for (const { id, integration_id } of rows) {
    if (!(await lost(deps.queues, CDI_SYNC_QUEUE, syncJobId(id)))) continue;
    const free = await deps.pool.query<{ free: boolean }>(
      `SELECT NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' AND l.granted
                            AND ((l.classid::bigint << 32) | l.objid::bigint) = hashtextextended($1, 0)) AS free`,
      [lockNames.cdiSync(integration_id)],
    );
    if (!free.rows[0]!.free) continue;
    await enqueueSync(deps.queues, id);
    deps.log.warn({ cdiJobId: id }, 'CDI sync queued again: Redis had lost its job');
    queued++;
  }
  return queued;
}

/** One kind of lost work the reconciler queues again, and the queues whose jobs it makes. */
export interface Repair {
  kind: string;
  queues: QueueName[];
  run: (deps: RepairDeps, full: boolean) => Promise<number>;
}

/**
 * Every repair, in the order a pass runs them. A queue added to the service needs one here that names it:
 * test/platform/queue-registry.test.ts fails for a queue that no repair names, so work of a new queue that Redis loses
 * is never left unqueued.
 */
export const REPAIRS: Repair[] = [
  {
    kind: 'schedules',
    // The event exports' sweep among the repeatables: their files are planned in PostgreSQL, so the sweep's next pass
    // writes whatever a lost job had planned; and the workspaces' statistics sweep, whose next pass counts again what a
    // lost one would have.
    queues: [
      SCHEDULED_EXPORT_QUEUE,
      CANVAS_SCHEDULE_QUEUE,
      CDI_SYNC_QUEUE,
      TRACK_INGEST_QUEUE,
      EVENT_EXPORT_QUEUE,
      WORKSPACE_STATS_QUEUE,
    ],
    run: repairSchedules,
  },
  { kind: 'exports', queues: [SEGMENT_EXPORT_QUEUE, EXPORT_SHARD_QUEUE], run: repairExports },
  { kind: 'export callbacks', queues: [EXPORT_CALLBACK_QUEUE], run: repairExportCallbacks },
  { kind: 'staged track objects', queues: [TRACK_INGEST_QUEUE], run: repairStagedTrack },
  { kind: 'catalog batches', queues: [CATALOG_BATCH_QUEUE], run: repairCatalogBatches },
  { kind: 'imports', queues: [BULK_IMPORT_QUEUE], run: repairImports },
  { kind: 'CDI syncs', queues: [CDI_SYNC_QUEUE], run: repairCdiSyncs },
  {
    kind: 'live activities',
    queues: [LIVE_ACTIVITY_PUSH_QUEUE, LIVE_ACTIVITY_REMOVAL_QUEUE],
    run: repairLiveActivities,
  },
];
