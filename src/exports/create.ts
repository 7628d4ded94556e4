import { FlowProducer } from 'bullmq';
import { publicBaseUrl, type Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import { AppError, badRequest } from '../errors.js';
import { bullPrefix, DEFAULT_JOB_OPTIONS } from '../queues.js';
import type { Redis } from '../redis.js';
import { workspaceDestination } from '../storage/stores.js';
import { downloadUrl } from './download.js';
import { acquireExportLock, exportLockKeys, releaseExportLock } from './locks.js';
import { newObjectPrefix } from './names.js';
import { EXPORT_SHARD_QUEUE, SEGMENT_EXPORT_QUEUE } from './payloads.js';
import { callbackPolicy, callbackRefusal, normaliseRequest, type ExportRequestBody } from './request.js';

export interface CreateExportDeps {
  config: Config;
  pool: Pool;
  redis: Redis;
}

export interface CreatedExport {
  exportId: string;
  objectPrefix: string;
  /** Download address, for exports to the built-in store. */
  url?: string;
}

const flows = new WeakMap<Redis, FlowProducer>();
function flowProducer(redis: Redis, config: Config): FlowProducer {
  let flow = flows.get(redis);
  if (!flow) {
    flow = new FlowProducer({ connection: redis, prefix: bullPrefix(config.REDIS_PREFIX) });
    flows.set(redis, flow);
  }
  return flow;
}

/** random_bucket ranges [from, to) of an export's shards. */
export function shardRanges(bucketsPerShard: number): Array<[number, number]> {
  const step = bucketsPerShard > 0 ? Math.min(bucketsPerShard, 10_000) : 10_000;
  const out: Array<[number, number]> = [];
  for (let from = 0; from < 10_000; from += step) out.push([from, Math.min(10_000, from + step)]);
  return out;
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
  options: { scheduledBy?: string; now?: Date } = {},
): Promise<CreatedExport> {
  const { config, pool, redis } = deps;
  const spec = normaliseRequest(body);
  if (spec.callbackEndpoint) {
    const refusal = callbackRefusal(spec.callbackEndpoint, callbackPolicy(config));
    if (refusal) throw badRequest(refusal);
  }

  const { rows } = await pool.query<{ id: string; archived: boolean }>(`SELECT id, archived FROM segments WHERE workspace_id = $1 AND api_id = $2`, [
    who.workspaceId,
    body.segment_id,
  ]);
  const segment = rows[0];
  if (!segment) throw badRequest(`segment_id ${JSON.stringify(body.segment_id)} does not name a segment of this workspace`);
  if (segment.archived) throw badRequest(`segment ${JSON.stringify(body.segment_id)} is archived and cannot be exported`);

  let destination;
  try {
    destination = await workspaceDestination(pool, who.workspaceId);
  } catch (err) {
    throw new AppError('internal', 'The workspace export destination is misconfigured; ask the operator to fix the workspace file', { cause: err });
  }

  const now = options.now ?? new Date();
  const { exportId, objectPrefix } = newObjectPrefix(now);
  const keys = exportLockKeys(config.REDIS_PREFIX, segment.id, who.companyId);
  const lock = await acquireExportLock(redis, keys, exportId, config.EXPORT_QUEUED_LEASE_MS, config.EXPORT_MAX_RUNNING_PER_COMPANY);
  if (!lock.ok) {
    const message =
      lock.limit === 'segment'
        ? `An export of segment ${body.segment_id} is already running; only one export per segment may run at a time. Retry when it has finished.`
        : `Your company already has ${config.EXPORT_MAX_RUNNING_PER_COMPANY} segment exports running, the most that may run at once. Retry when one has finished.`;
    throw new AppError('rate_limited', message, { retryAfter: 60 });
  }

  const ranges = shardRanges(config.EXPORT_SHARD_BUCKETS);
  try {
    await pool.query(
      `INSERT INTO exports (id, object_prefix, company_id, workspace_id, segment_id, request, destination, shard_count, scheduled_by, created_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)`,
      [exportId, objectPrefix, who.companyId, who.workspaceId, segment.id, JSON.stringify(spec), destination?.provider ?? 'local', ranges.length, options.scheduledBy ?? null, now],
    );
    await flowProducer(redis, config).add({
      name: 'finish',
      queueName: SEGMENT_EXPORT_QUEUE,
      data: { exportId },
      opts: { ...DEFAULT_JOB_OPTIONS, jobId: exportId, attempts: 3 },
      children: ranges.map(([bucketFrom, bucketTo], shard) => ({
        name: 'shard',
        queueName: EXPORT_SHARD_QUEUE,
        data: { exportId, shard, bucketFrom, bucketTo },
        opts: {
          ...DEFAULT_JOB_OPTIONS,
          jobId: `${exportId}.${shard}`,
          attempts: Math.max(1, config.EXPORT_SHARD_ATTEMPTS),
          // A shard that fails for good still lets the finishing job run, which then fails the export cleanly.
          ignoreDependencyOnFailure: true,
        },
      })),
    });
  } catch (err) {
    await pool.query(`DELETE FROM exports WHERE id = $1`, [exportId]).catch(() => {});
    await releaseExportLock(redis, keys, exportId).catch(() => {});
    throw new AppError('unavailable', 'The export could not be queued; retry shortly', { cause: err });
  }

  return { exportId, objectPrefix, url: destination ? undefined : downloadUrl(config, publicBaseUrl(config), objectPrefix) };
}
