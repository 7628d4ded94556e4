import { FlowProducer } from 'bullmq';
import type { Config } from '../config.js';
import { bullPrefix, DEFAULT_JOB_OPTIONS } from '../queues.js';
import type { Redis } from '../redis.js';
import { EXPORT_SHARD_QUEUE, SEGMENT_EXPORT_QUEUE } from './payloads.js';

const flows = new WeakMap<Redis, FlowProducer>();
function flowProducer(redis: Redis, config: Pick<Config, 'REDIS_PREFIX'>): FlowProducer {
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

/** What queueing an export's jobs needs to know of it (columns of `exports`). */
export interface ExportFlowRow {
  id: string;
  /** random_bucket values per shard when it was requested; null for exports recorded before it was kept. */
  shard_buckets: number | null;
  shard_count: number;
}

/** The shard ranges an export was cut into, as recorded; exports from before the record get even ranges. */
export function exportShards(row: ExportFlowRow): Array<[number, number]> {
  return shardRanges(row.shard_buckets ?? Math.ceil(10_000 / Math.max(1, row.shard_count)));
}

/**
 * Queues an export as one flow: its shard jobs (all, or only `shards`) and the finishing job that waits for them.
 * Job ids are fixed by the export (`<id>` and `<id>.<shard>`), so queueing again what Redis still holds adds nothing;
 * the reconciler (src/reconcile/) calls this for an export whose jobs Redis lost, with the shards not yet ended.
 */
export async function enqueueExportFlow(redis: Redis, config: Pick<Config, 'REDIS_PREFIX' | 'EXPORT_SHARD_ATTEMPTS'>, row: ExportFlowRow, shards?: number[]): Promise<void> {
  const ranges = exportShards(row);
  const wanted = shards ? new Set(shards) : null;
  await flowProducer(redis, config).add({
    name: 'finish',
    queueName: SEGMENT_EXPORT_QUEUE,
    data: { exportId: row.id },
    opts: { ...DEFAULT_JOB_OPTIONS, jobId: row.id, attempts: 3 },
    children: ranges
      .map(([bucketFrom, bucketTo], shard) => ({ shard, bucketFrom, bucketTo }))
      .filter(({ shard }) => !wanted || wanted.has(shard))
      .map(({ shard, bucketFrom, bucketTo }) => ({
        name: 'shard',
        queueName: EXPORT_SHARD_QUEUE,
        data: { exportId: row.id, shard, bucketFrom, bucketTo },
        opts: {
          ...DEFAULT_JOB_OPTIONS,
          jobId: `${row.id}.${shard}`,
          attempts: Math.max(1, config.EXPORT_SHARD_ATTEMPTS),
          // A shard that fails for good still lets the finishing job run, which then fails the export cleanly.
          ignoreDependencyOnFailure: true,
        },
      })),
  });
}
