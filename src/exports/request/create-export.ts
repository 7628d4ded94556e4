import { publicBaseUrl, type Config } from '../../config.js';
import { withTransaction, type Pool, type PoolClient } from '../../db/pool.js';
import { AppError, badRequest } from '../../errors.js';
import { redisKeyPrefix, type Redis } from '../../redis.js';
import { workspaceDestination } from '../../storage/stores.js';
import { downloadUrl } from '../finish/download.js';
import { enqueueExportFlow } from '../../queues/segment-export.js';
import type { Queues } from '../../queues/index.js';
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
import { newObjectPrefix } from '../key-layout.js';
import {
  callbackPolicy,
  callbackRefusal,
  hasIncrementalKey,
  normaliseRequest,
  partSizingRefusal,
  type ExportRequestBody,
} from './request-body.js';

export interface CreateExportDeps {
  config: Config;
  pool: Pool;
  redis: Redis;
  queues: Queues;
}

export interface CreatedExport {
  exportId: string;
  objectPrefix: string;
  /** Download address, for exports to the built-in store. */
  url?: string;
  /** False when Redis refused the jobs after the export was recorded: the reconciler queues them. */
  queued: boolean;
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
  const { rows } = await pool.query<{ id: string }>(
    `SELECT id::text FROM exports WHERE id = ANY($1::uuid[]) AND status IN ('queued', 'running')`,
    [holders.filter((h) => /^[0-9a-f-]{36}$/.test(h))],
  );
  const live = new Set(rows.map((r) => r.id));
  const stale = holders.filter((h) => !live.has(h));
  if (stale.length === 0) return first;
  for (const holder of stale) await releaseExportLock(redis, keys, holder);
  return take();
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
  const sizing = partSizingRefusal(body);
  if (sizing) throw badRequest(sizing);
  const spec = normaliseRequest(body);
  if (spec.callbackEndpoint) {
    const refusal = callbackRefusal(spec.callbackEndpoint, callbackPolicy(config));
    if (refusal) throw badRequest(refusal);
  }

  const { rows } = await pool.query<{ id: string; archived: boolean; filter: unknown }>(
    `SELECT id, archived, filter FROM segments WHERE workspace_id = $1 AND api_id = $2`,
    [who.workspaceId, body.segment_id],
  );
  const segment = rows[0];
  if (!segment)
    throw badRequest(`segment_id ${JSON.stringify(body.segment_id)} does not name a segment of this workspace`);
  if (segment.archived)
    throw badRequest(`segment ${JSON.stringify(body.segment_id)} is archived and cannot be exported`);
  let baseLayers: string[] | null = null;
  if (body.changes_since) {
    // Applying an incremental export means matching its lines to rows loaded before: it needs a key.
    if (!hasIncrementalKey(spec.fields)) {
      throw badRequest(
        'an incremental export (changes_since) must export external_id or service_id, so that its lines can be matched to the rows loaded before',
      );
    }
    const resolved = await resolveExportBase(pool, who.workspaceId, segment.id, body.changes_since);
    spec.changesSince = resolved.base;
    baseLayers = resolved.memberLayers;
  }

  let destination;
  try {
    destination = await workspaceDestination(pool, who.workspaceId);
  } catch (err) {
    throw new AppError(
      'internal',
      'The workspace export destination is misconfigured; ask the operator to fix the workspace file',
      { cause: err },
    );
  }

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
  const refuse = (limit: 'segment' | 'company') =>
    new AppError(
      'rate_limited',
      limit === 'segment'
        ? `An export of segment ${body.segment_id} is already running; only one export per segment may run at a time. Retry when it has finished.`
        : `Your company already has ${config.EXPORT_MAX_RUNNING_PER_COMPANY} segment exports running, the most that may run at once. Retry when one has finished.`,
      { retryAfter: 60 },
    );
  const lock = await acquireHolds(pool, redis, keys, exportId, config);
  if (!lock.ok) throw refuse(lock.limit);

  const row = { id: exportId, shard_buckets: shardBuckets, shard_count: shardRanges(shardBuckets).length };
  const created: CreatedExport = {
    exportId,
    objectPrefix,
    ...(destination ? {} : { url: downloadUrl(config, publicBaseUrl(config), objectPrefix) }),
    queued: false,
  };
  try {
    // PostgreSQL holds the limits too, so that they survive Redis losing its holds: a unique index lets one unfinished
    // export per segment in, and the company's unfinished exports are counted under a lock of the company.
    await withTransaction(pool, async (client) => {
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [
        `ces-export-company:${who.companyId}`,
      ]);
      const running = await client.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM exports WHERE company_id = $1 AND status IN ('queued', 'running')`,
        [who.companyId],
      );
      if (running.rows[0]!.n >= config.EXPORT_MAX_RUNNING_PER_COMPANY) throw new ExportLimitReached('company');
      await client
        .query(
          `INSERT INTO exports (id, object_prefix, company_id, workspace_id, segment_id, request, destination, shard_count, shard_buckets, scheduled_by,
                                public_base_url, created_at, primary_lsn, changes_since, member_layers)
           VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, pg_current_wal_lsn(), $13, $14)`,
          [
            exportId,
            objectPrefix,
            who.companyId,
            who.workspaceId,
            segment.id,
            JSON.stringify(spec),
            destination?.provider ?? 'local',
            row.shard_count,
            row.shard_buckets,
            options.scheduledBy ?? null,
            publicBaseUrl(config),
            now,
            spec.changesSince?.exportId ?? null,
            newMemberLayers(exportId, baseLayers),
          ],
        )
        .catch((err: unknown) => {
          if ((err as { code?: string }).code === '23505') throw new ExportLimitReached('segment');
          throw err;
        });
      await options.onRecorded?.(client, created);
    });
  } catch (err) {
    await releaseExportLock(redis, keys, exportId).catch(() => {});
    if (err instanceof ExportLimitReached) throw refuse(err.limit);
    throw err;
  }
  // Recorded: the export will run. Redis refusing its jobs now (it went away since the holds were taken) only delays
  // it until the reconciler queues them.
  created.queued = await enqueueExportFlow(deps.queues, exportId, exportShards(row), config.EXPORT_SHARD_ATTEMPTS).then(
    () => true,
    () => false,
  );
  return created;
}
