import { lockForTransaction, lockNames } from '../../../platform/db/advisory-locks.js';
import { publicBaseUrl, type Config } from '../../../platform/config.js';
import { withTransaction, type Pool, type PoolClient } from '../../../platform/db/pool.js';
import { AppError, badRequest } from '../../../platform/errors.js';
import { redisKeyPrefix, type Redis } from '../../../platform/redis.js';
import type { Destination } from '../../../platform/storage/destination.js';
import { workspaceDestination } from '../../../platform/storage/stores.js';
import { downloadUrl } from '../finish/download.js';
import { enqueueExportFlow } from '../../../platform/queues/segment-export.js';
import type { Queues } from '../../../platform/queues/index.js';
import { queueRecorded } from '../../../platform/queues/queue-recorded.js';
import { segmentByApiId, type SegmentRow } from '../../../profiles/segments/store.js';
import type { Logger } from '../../../platform/logger.js';
import { exportShards, shardRanges } from '../shard/shard-ranges.js';
import {
  acquireExportLock,
  exportLockKeys,
  releaseExportLock,
  type AcquireResult,
  type ExportLockKeys,
} from '../holds.js';
import { deltaShardBuckets, resolveExportBase } from '../incremental.js';
import { newMemberLayers } from '../member-layers.js';
import { countUnfinishedExports, insertExportRow, unfinishedExportIds } from '../export-rows.js';
import { newObjectPrefix } from '../key-layout.js';
import {
  callbackPolicy,
  callbackRefusal,
  hasIncrementalKey,
  normaliseRequest,
  partSizingRefusal,
  type ExportRequestBody,
  type ExportSpec,
} from './request-body.js';

export interface CreateExportDeps {
  config: Config;
  pool: Pool;
  redis: Redis;
  queues: Queues;
  log: Pick<Logger, 'warn'>;
}

export interface CreatedExport {
  exportId: string;
  objectPrefix: string;
  /** Download address, for exports to the built-in store. */
  url?: string;
  /** False when Redis refused the jobs after the export was recorded: the reconciler queues them. */
  queued: boolean;
  /** Why an export asked to be incremental runs full (its base is older than the tombstones' bound). */
  full?: string;
}

export interface CreateExportOptions {
  scheduledBy?: string;
  now?: Date;
  /** Runs in the transaction that records the export (an Idempotency-Key answers there). */
  onRecorded?: (db: PoolClient, created: CreatedExport) => Promise<void>;
}

/** An export of the segment, or a company slot, is taken: the spec's 429. */
class ExportLimitReached extends Error {
  constructor(readonly limit: 'segment' | 'company') {
    super(`export ${limit} limit reached`);
  }
}

/**
 * Takes the Redis holds; when Redis refuses, asks PostgreSQL (the record) whether the holders are still unfinished
 * exports, releases those that are not (a release lost while Redis was away) and tries once more.
 */
async function acquireHolds(
  pool: Pool,
  redis: Redis,
  keys: ExportLockKeys,
  exportId: string,
  config: Config,
): Promise<AcquireResult> {
  const take = () =>
    acquireExportLock(redis, keys, exportId, config.EXPORT_QUEUED_LEASE_MS, config.EXPORT_MAX_RUNNING_PER_COMPANY);
  const first = await take();
  if (first.ok) return first;
  const holders = first.limit === 'segment' ? [first.holder] : await redis.zrange(keys.company, '0', '-1');
  const live = await unfinishedExportIds(pool, holders);
  const stale = holders.filter((h) => !live.has(h));
  if (stale.length === 0) return first;
  for (const holder of stale) await releaseExportLock(redis, keys, holder);
  return take();
}

/** The request as the export will run it, refused (400) when its part sizing or callback endpoint is not allowed. */
function validatedSpec(body: ExportRequestBody, config: Config): ExportSpec {
  const sizing = partSizingRefusal(body);
  if (sizing) throw badRequest(sizing);
  const spec = normaliseRequest(body);
  if (spec.callbackEndpoint) {
    const refusal = callbackRefusal(spec.callbackEndpoint, callbackPolicy(config));
    if (refusal) throw badRequest(refusal);
  }
  return spec;
}

/** The segment the request names, in the workspace and not archived, or a 400 saying why not. */
async function exportableSegment(pool: Pool, workspaceId: string, segmentApiId: string): Promise<SegmentRow> {
  const segment = await segmentByApiId(pool, workspaceId, segmentApiId);
  if (!segment)
    throw badRequest(`segment_id ${JSON.stringify(segmentApiId)} does not name a segment of this workspace`);
  if (segment.archived) throw badRequest(`segment ${JSON.stringify(segmentApiId)} is archived and cannot be exported`);
  return segment;
}

/**
 * For an incremental export (changes_since), the export it follows: set as `spec.changesSince`, and its member layers
 * returned (null for a full export), or why the export runs full after all. A base older than the tombstones' bound
 * (TOMBSTONE_RETENTION_DAYS) cannot name every user deleted since: the export falls back to a full one (no
 * changes_since in its manifest, so a loader replaces the table), the only answer that is right whatever was deleted.
 */
async function resolveIncrementalBase(
  { pool, config, log }: Pick<CreateExportDeps, 'pool' | 'config' | 'log'>,
  workspaceId: string,
  segment: SegmentRow,
  body: ExportRequestBody,
  spec: ExportSpec,
): Promise<{ layers: string[] | null; full?: string }> {
  if (!body.changes_since) return { layers: null };
  // Applying an incremental export means matching its lines to rows loaded before: it needs a key.
  if (!hasIncrementalKey(spec.fields)) {
    throw badRequest(
      'an incremental export (changes_since) must export external_id or service_id, so that its lines can be matched to the rows loaded before',
    );
  }
  const resolved = await resolveExportBase(
    pool,
    workspaceId,
    segment.id,
    body.changes_since,
    config.TOMBSTONE_RETENTION_DAYS,
  );
  if ('tooOld' in resolved) {
    log.warn({ workspaceId, reason: resolved.tooOld }, 'incremental export base too old: running a full export');
    return { layers: null, full: resolved.tooOld };
  }
  spec.changesSince = resolved.base;
  return { layers: resolved.memberLayers };
}

/** The workspace's export destination (null: the built-in store), a 500 naming the operator's part when unreadable. */
async function exportDestination(pool: Pool, workspaceId: string): Promise<Destination | null> {
  try {
    return await workspaceDestination(pool, workspaceId);
  } catch (err) {
    throw new AppError(
      'internal',
      'The workspace export destination is misconfigured; ask the operator to fix the workspace file',
      { cause: err },
    );
  }
}

/** The spec's 429 for a segment export already running, or for the company's running exports at their limit. */
function limitReached(limit: 'segment' | 'company', segmentApiId: string, config: Config): AppError {
  return new AppError(
    'rate_limited',
    limit === 'segment'
      ? `An export of segment ${segmentApiId} is already running; only one export per segment may run at a time. Retry when it has finished.`
      : `Your company already has ${config.EXPORT_MAX_RUNNING_PER_COMPANY} segment exports running, the most that may run at once. Retry when one has finished.`,
    { retryAfter: 60 },
  );
}

/** What the exports row records, beyond its ids. */
interface ExportRecord {
  exportId: string;
  objectPrefix: string;
  segmentId: string;
  spec: ExportSpec;
  destination: Destination | null;
  shardCount: number;
  shardBuckets: number;
  now: Date;
  baseLayers: string[] | null;
}

/**
 * Records the export, in the caller's transaction. PostgreSQL holds the limits too, so that they survive Redis losing
 * its holds: a unique index lets one unfinished export per segment in, and the company's unfinished exports are
 * counted under a lock of the company. Throws ExportLimitReached when either is taken.
 */
async function insertExport(
  client: PoolClient,
  config: Config,
  who: { workspaceId: string; companyId: string },
  record: ExportRecord,
  scheduledBy: string | undefined,
): Promise<void> {
  await lockForTransaction(client, lockNames.exportCompany(who.companyId));
  if ((await countUnfinishedExports(client, who.companyId)) >= config.EXPORT_MAX_RUNNING_PER_COMPANY)
    throw new ExportLimitReached('company');
  const inserted = await insertExportRow(client, {
    id: record.exportId,
    objectPrefix: record.objectPrefix,
    companyId: who.companyId,
    workspaceId: who.workspaceId,
    segmentId: record.segmentId,
    request: record.spec,
    destination: record.destination?.provider ?? 'local',
    shardCount: record.shardCount,
    shardBuckets: record.shardBuckets,
    scheduledBy: scheduledBy ?? null,
    publicBaseUrl: publicBaseUrl(config),
    createdAt: record.now,
    changesSince: record.spec.changesSince?.exportId ?? null,
    memberLayers: newMemberLayers(record.exportId, record.baseLayers),
  });
  if (inserted === 'segment-taken') throw new ExportLimitReached('segment');
}

/**
 * Validates what the body cannot say by itself (the segment, the callback host), takes the segment lock and a
 * company slot, records the export and enqueues it as one flow: shard jobs and the finishing job that waits for
 * them. Reads no user; a refused request leaves nothing behind.
 */
export async function createExport(
  deps: CreateExportDeps,
  who: { workspaceId: string; companyId: string },
  body: ExportRequestBody,
  options: CreateExportOptions = {},
): Promise<CreatedExport> {
  const { config, pool, redis } = deps;
  const spec = validatedSpec(body, config);
  const segment = await exportableSegment(pool, who.workspaceId, body.segment_id);
  const { layers: baseLayers, full } = await resolveIncrementalBase(deps, who.workspaceId, segment, body, spec);
  const destination = await exportDestination(pool, who.workspaceId);

  // Before the holds are taken: nothing to release if this fails.
  const shardBuckets = spec.changesSince
    ? await deltaShardBuckets(
        pool,
        who.workspaceId,
        spec.changesSince.exportId,
        segment.filter,
        config.EXPORT_SHARD_BUCKETS,
      )
    : config.EXPORT_SHARD_BUCKETS;

  const now = options.now ?? new Date();
  const { exportId, objectPrefix } = newObjectPrefix(now);
  const keys = exportLockKeys(redisKeyPrefix(config), segment.id, who.companyId);
  const lock = await acquireHolds(pool, redis, keys, exportId, config);
  if (!lock.ok) throw limitReached(lock.limit, body.segment_id, config);

  const row = { id: exportId, shard_buckets: shardBuckets, shard_count: shardRanges(shardBuckets).length };
  const created: CreatedExport = {
    exportId,
    objectPrefix,
    ...(destination ? {} : { url: downloadUrl(config, publicBaseUrl(config), objectPrefix) }),
    queued: false,
    ...(full ? { full } : {}),
  };
  const record: ExportRecord = {
    exportId,
    objectPrefix,
    segmentId: segment.id,
    spec,
    destination,
    shardCount: row.shard_count,
    shardBuckets: row.shard_buckets,
    now,
    baseLayers,
  };
  try {
    await withTransaction(pool, async (client) => {
      await insertExport(client, config, who, record, options.scheduledBy);
      await options.onRecorded?.(client, created);
    });
  } catch (err) {
    await releaseExportLock(redis, keys, exportId).catch(() => {});
    if (err instanceof ExportLimitReached) throw limitReached(err.limit, body.segment_id, config);
    throw err;
  }
  // Recorded: the export will run. Redis refusing its jobs now (it went away since the holds were taken) only delays
  // it until the reconciler queues them.
  created.queued = await queueRecorded(deps.log, 'segment export', { exportId }, () =>
    enqueueExportFlow(deps.queues, exportId, exportShards(row), config.EXPORT_SHARD_ATTEMPTS),
  );
  return created;
}
