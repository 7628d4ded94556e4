import { ExportShardPayload, EXPORT_SHARD_QUEUE } from '../src/platform/queues/export-shard.js';
import { runShard } from '../src/pipelines/exports/shard/run-shard.js';
import { defineJob } from '../src/platform/job-definition.js';

/**
 * One random_bucket range of a segment export. A worker killed mid-shard stops renewing the job's lock; after
 * lockDuration another worker's stalled check (every stalledInterval) puts the shard back in the queue, and the
 * retry first deletes what the dead attempt uploaded, so every user is exported exactly once.
 */
export const exportShardJob = defineJob({
  queue: EXPORT_SHARD_QUEUE,
  // A running shard holds one connection for its COPY and borrows another to record parts: never let shards take
  // the whole pool, or they would wait on each other forever.
  concurrency: (ctx) =>
    Math.max(1, Math.min(ctx.config.WORKER_CONCURRENCY, Math.floor(ctx.config.DATABASE_POOL_SIZE / 3))),
  workerOptions: { lockDuration: 20_000, stalledInterval: 5_000, maxStalledCount: 2 },
  async process(job, ctx) {
    const payload = ExportShardPayload.parse(job.data);
    return runShard(ctx, payload);
  },
});
