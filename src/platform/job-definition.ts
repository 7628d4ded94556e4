import type { Job, WorkerOptions } from 'bullmq';
import type { AppContext } from './context.js';
import type { QueueName } from './queues/index.js';

/** A queue processor: one per file under jobs/. The payload arrives as unknown and is parsed by the processor. */
export interface JobDefinition {
  queue: QueueName;
  /** Jobs this process runs at once from this queue; WORKER_CONCURRENCY when absent. */
  concurrency?: (ctx: AppContext) => number;
  workerOptions?: Partial<Omit<WorkerOptions, 'connection' | 'prefix' | 'concurrency'>>;
  process: (job: Job, ctx: AppContext) => Promise<unknown>;
  /**
   * Runs when this process starts the queue's worker (e.g. re-arming delayed jobs from the store), again whenever
   * the worker's Redis connection comes back after an outage, and until it succeeds when it fails for want of
   * PostgreSQL or Redis; must be idempotent.
   */
  onStart?: (ctx: AppContext) => Promise<void>;
  /**
   * Runs when an attempt fails and none will follow (its attempts are spent), before BullMQ records the failure: where
   * the work's row in PostgreSQL is ended, so that neither the API nor the reconciler waits for it any more. Not for an
   * UnrecoverableError: a processor throws one after ending the row itself.
   */
  onLastAttemptFailed?: (job: Job, err: unknown, ctx: AppContext) => Promise<void>;
}

/** Whether a failing attempt is the job's last: BullMQ counts attemptsMade before this attempt ends. */
export const isLastAttempt = (job: Job) => job.attemptsMade + 1 >= (job.opts.attempts ?? 1);

export const defineJob = (definition: JobDefinition): JobDefinition => definition;
