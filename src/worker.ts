import { Worker, type Job, type WorkerOptions } from 'bullmq';
import type { AppContext } from './context.js';
import { bullPrefix, type QueueName } from './queues.js';
import { createRedis } from './redis.js';

/** A queue processor: one per file under jobs/. The payload arrives as unknown and is parsed by the processor. */
export interface JobDefinition {
  queue: QueueName;
  /** Jobs this process runs at once from this queue; WORKER_CONCURRENCY when absent. */
  concurrency?: (ctx: AppContext) => number;
  workerOptions?: Partial<Omit<WorkerOptions, 'connection' | 'prefix' | 'concurrency'>>;
  process: (job: Job, ctx: AppContext) => Promise<unknown>;
  /** Runs once when this process starts the queue's worker (e.g. re-arming delayed jobs from the store); must be idempotent. */
  onStart?: (ctx: AppContext) => Promise<void>;
}

export const defineJob = (definition: JobDefinition): JobDefinition => definition;

export interface RunningWorkers {
  workers: Worker[];
  /** Lets running jobs finish for up to `timeoutMs`, then hands the rest back to the queue. */
  close(timeoutMs: number): Promise<void>;
}

/** Starts one BullMQ worker per job definition, all in this process. */
export function startWorkers(ctx: AppContext, definitions: JobDefinition[]): RunningWorkers {
  const workers = definitions.map((def) => {
    const connection = createRedis(ctx.config.REDIS_URL, 'worker');
    const worker = new Worker(
      def.queue,
      async (job: Job) => {
        const started = performance.now();
        const log = ctx.log.child({ queue: def.queue, jobId: job.id, attempt: job.attemptsMade + 1 });
        try {
          const result = await def.process(job, { ...ctx, log });
          ctx.metrics.jobDuration.observe({ queue: def.queue, outcome: 'completed' }, (performance.now() - started) / 1000);
          return result;
        } catch (err) {
          ctx.metrics.jobDuration.observe({ queue: def.queue, outcome: 'failed' }, (performance.now() - started) / 1000);
          ctx.metrics.jobFailures.inc({ queue: def.queue });
          log.warn({ err }, 'job attempt failed');
          throw err;
        }
      },
      {
        connection,
        prefix: bullPrefix(ctx.config.REDIS_PREFIX),
        concurrency: def.concurrency?.(ctx) ?? ctx.config.WORKER_CONCURRENCY,
        ...def.workerOptions,
      },
    );
    worker.on('error', (err) => ctx.log.error({ err, queue: def.queue }, 'worker error'));
    def.onStart?.(ctx).catch((err: unknown) => ctx.log.error({ err, queue: def.queue }, 'worker start hook failed'));
    return { worker, connection };
  });

  return {
    workers: workers.map((w) => w.worker),
    async close(timeoutMs: number) {
      const graceful = Promise.all(workers.map((w) => w.worker.close()));
      const timedOut = await Promise.race([graceful.then(() => false), new Promise<boolean>((r) => setTimeout(() => r(true), timeoutMs).unref())]);
      if (timedOut) {
        ctx.log.warn({ timeoutMs }, 'jobs still running at shutdown: handing them back to the queue');
        await Promise.all(workers.map((w) => w.worker.close(true)));
      }
      await Promise.all(workers.map((w) => w.connection.quit().catch(() => w.connection.disconnect())));
    },
  };
}
