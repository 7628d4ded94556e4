import { UnrecoverableError, Worker, type Job, type WorkerOptions } from 'bullmq';
import type { Config } from '../platform/config.js';
import type { AppContext } from '../platform/context.js';
import { isLastAttempt, type JobDefinition } from '../platform/job-definition.js';
import { isSocketError, tagDependency } from '../platform/lib/dependency-health.js';
import { bullPrefix } from '../platform/queues/index.js';
import { closeRedis, createRedis, redisKeyPrefix } from '../platform/redis.js';

export interface RunningWorkers {
  workers: Worker[];
  /** Lets running jobs finish for up to `timeoutMs`, then hands the rest back to the queue. */
  close(timeoutMs: number): Promise<void>;
}

/** What the workers of one `startWorkers` call share. */
interface WorkersState {
  /** Set once `close` is called: start hooks stop running and retrying. */
  closing: boolean;
  /** Jobs this process is running now, all queues together. */
  running: number;
  /** Pending retries of start hooks, cleared on close. */
  startHookTimers: Set<NodeJS.Timeout>;
}

interface StartedWorker {
  worker: Worker;
  connection: ReturnType<typeof createRedis>;
}

/** Runs one job of the definition's queue: counted as running, timed, and its failure counted and logged. */
function jobProcessor(def: JobDefinition, ctx: AppContext, state: WorkersState): (job: Job) => Promise<unknown> {
  return async (job: Job) => {
    const started = performance.now();
    state.running++;
    const log = ctx.log.child({ queue: def.queue, jobId: job.id, attempt: job.attemptsMade + 1 });
    try {
      const result = await def.process(job, { ...ctx, log });
      ctx.metrics.jobDuration.observe({ queue: def.queue, outcome: 'completed' }, (performance.now() - started) / 1000);
      return result;
    } catch (caught) {
      // As if the processor had ended its row itself: a failure to end it is the attempt's failure.
      const err = await endOnLastAttempt(def, job, caught, { ...ctx, log });
      ctx.metrics.jobDuration.observe({ queue: def.queue, outcome: 'failed' }, (performance.now() - started) / 1000);
      ctx.metrics.jobFailures.inc({ queue: def.queue });
      // An attempt that failed because PostgreSQL or Redis is away is retried with backoff like any other; the
      // outage itself is logged once by ctx.health, so no stack per attempt.
      const dependency = ctx.health.report(err);
      if (dependency) log.debug({ dependency }, 'job attempt failed: dependency unavailable; it will be retried');
      else log.warn({ err }, 'job attempt failed');
      throw err;
    } finally {
      state.running--;
    }
  };
}

async function endOnLastAttempt(def: JobDefinition, job: Job, err: unknown, ctx: AppContext): Promise<unknown> {
  if (!def.onLastAttemptFailed || !isLastAttempt(job) || err instanceof UnrecoverableError) return err;
  try {
    await def.onLastAttemptFailed(job, err, ctx);
    return err;
  } catch (endFailure) {
    return endFailure;
  }
}

/**
 * The definition's start hook as a function to call whenever it should run: never twice at once (a call while it runs
 * makes it run once more after), and retried (1 s, 2 s, ... at most a minute apart) when it failed for want of
 * PostgreSQL or Redis: what it arms must not wait for the next restart.
 */
function startHookRunner(def: JobDefinition, ctx: AppContext, state: WorkersState): () => void {
  let hookRunning = false;
  let hookAgain = false;
  let hookAttempt = 0;
  const retryLater = (err: unknown) => {
    if (state.closing) return;
    const dependency = ctx.health.report(err);
    if (!dependency) {
      ctx.log.error({ err, queue: def.queue }, 'worker start hook failed');
      return;
    }
    const delayMs = Math.min(1000 * 2 ** hookAttempt++, 60_000);
    ctx.log.debug(
      { queue: def.queue, dependency, delayMs },
      'worker start hook failed: dependency unavailable; trying again',
    );
    const timer = setTimeout(() => {
      state.startHookTimers.delete(timer);
      runStartHook();
    }, delayMs).unref();
    state.startHookTimers.add(timer);
  };
  const runStartHook = () => {
    if (!def.onStart || state.closing) return;
    if (hookRunning) {
      hookAgain = true;
      return;
    }
    hookRunning = true;
    def
      .onStart(ctx)
      .then(() => {
        hookAttempt = 0;
      }, retryLater)
      .finally(() => {
        hookRunning = false;
        if (hookAgain) {
          hookAgain = false;
          runStartHook();
        }
      });
  };
  return runStartHook;
}

/**
 * The lock and stalled-check timings the configuration sets for every queue, over each queue's own: how soon the jobs
 * of a worker that died are taken by another (the crash tests set them short, so as not to wait a minute).
 */
function stalledCheckOptions(config: Config): Pick<WorkerOptions, 'lockDuration' | 'stalledInterval'> {
  return {
    ...(config.WORKER_LOCK_DURATION_MS === undefined ? {} : { lockDuration: config.WORKER_LOCK_DURATION_MS }),
    ...(config.WORKER_STALLED_INTERVAL_MS === undefined ? {} : { stalledInterval: config.WORKER_STALLED_INTERVAL_MS }),
  };
}

/** One BullMQ worker for the definition, on a connection of its own, its start hook run now and after each outage. */
function startWorker(def: JobDefinition, ctx: AppContext, state: WorkersState): StartedWorker {
  // Waits for Redis when it is away (maxRetriesPerRequest: null) and reports outages to ctx.health, as the
  // connections BullMQ duplicates from it do through the worker's 'error' event below.
  const connection = createRedis(ctx.config, 'worker', {}, ctx.health);
  const worker = new Worker(def.queue, jobProcessor(def, ctx, state), {
    connection,
    prefix: bullPrefix(redisKeyPrefix(ctx.config)),
    concurrency: def.concurrency?.(ctx) ?? ctx.config.WORKER_CONCURRENCY,
    ...def.workerOptions,
    ...stalledCheckOptions(ctx.config),
  });
  worker.on('error', (err) => {
    // A worker's connections are all Redis (BullMQ's duplicates of `connection` among them, which carry no tag): a
    // bare socket error here, such as read ECONNRESET, which names no address, is Redis going away.
    if (isSocketError(err)) tagDependency(err, 'redis');
    if (!ctx.health.report(err)) ctx.log.error({ err, queue: def.queue }, 'worker error');
  });
  // The start hook runs again when Redis comes back after an outage (one without persistence comes back empty,
  // without the job schedulers the hooks register).
  const runStartHook = startHookRunner(def, ctx, state);
  runStartHook();
  let lost = false;
  connection.on('close', () => (lost = true));
  connection.on('ready', () => {
    if (!lost) return;
    lost = false;
    runStartHook();
  });
  return { worker, connection };
}

/** Lets running jobs finish for up to `timeoutMs`, then hands the rest back to the queue and closes the connections. */
async function closeWorkers(
  ctx: AppContext,
  state: WorkersState,
  workers: StartedWorker[],
  timeoutMs: number,
): Promise<void> {
  state.closing = true;
  for (const timer of state.startHookTimers) clearTimeout(timer);
  let closed = false;
  const graceful = Promise.all(workers.map((w) => w.worker.close())).then(
    () => (closed = true),
    (err: unknown) => {
      closed = true;
      ctx.log.warn({ err }, 'worker close failed');
    },
  );
  // BullMQ's close waits for Redis (forever, while it is away); once no job runs, an absent Redis has nothing to
  // be told, so stop waiting then.
  const redisAway = () => workers.some((w) => w.connection.status !== 'ready');
  const deadline = Date.now() + timeoutMs;
  while (!closed && Date.now() < deadline && !(state.running === 0 && redisAway())) {
    await Promise.race([graceful, new Promise((r) => setTimeout(r, 50).unref())]);
  }
  if (!closed) {
    if (state.running > 0)
      ctx.log.warn(
        { timeoutMs, running: state.running },
        'jobs still running at shutdown: leaving them to the stalled-job check of another worker',
      );
    // worker.close(true) would only return the close still waiting: dropping the connections ends what it waits on.
    for (const w of workers) {
      w.connection.disconnect();
      w.worker.disconnect().catch(() => {});
    }
    await Promise.race([graceful, new Promise((r) => setTimeout(r, 250).unref())]);
  }
  await Promise.all(workers.map((w) => closeRedis(w.connection)));
}

/** Starts one BullMQ worker per job definition, all in this process. */
export function startWorkers(ctx: AppContext, definitions: JobDefinition[]): RunningWorkers {
  const state: WorkersState = { closing: false, running: 0, startHookTimers: new Set() };
  const workers = definitions.map((def) => startWorker(def, ctx, state));
  return {
    workers: workers.map((w) => w.worker),
    close: (timeoutMs: number) => closeWorkers(ctx, state, workers, timeoutMs),
  };
}
