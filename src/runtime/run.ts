import { createServer, type Server } from 'node:http';
import type { FastifyInstance } from 'fastify';
import { jobs as allJobs } from '../../jobs/index.js';
import { buildApp } from '../app.js';
import type { Config } from '../platform/config.js';
import { closeContext, createContext, reachDependencies, type AppContext } from '../platform/context.js';
import { migrate } from '../platform/db/migrate.js';
import { removeOrphanSpoolDirs } from '../pipelines/exports/shard/spool.js';
import { startReconciler, type Reconciler } from './reconcile/reconciler.js';
import { startWorkers, type RunningWorkers } from './workers.js';
import { WorkerProcess, type ChildMessage, type ParentMessage } from './worker-child-process.js';

export interface RunOptions {
  api: boolean;
  worker: boolean;
  /** Restrict the worker to these queues. */
  queues?: string[];
}

export interface Running {
  ctx: AppContext;
  app?: FastifyInstance;
  workers?: RunningWorkers;
  /** Graceful stop: stop accepting requests, let jobs finish or hand them back, close pools. */
  stop(): Promise<void>;
}

/** Starts the API, the workers, or both in this process, against the configured Redis and PostgreSQL. */
export async function run(config: Config, options: RunOptions): Promise<Running> {
  const ctx = await createContext(config);
  try {
    await reachDependencies(config, ctx.pool, ctx.redis);
  } catch (err) {
    await closeContext(ctx);
    throw err;
  }
  if (config.MIGRATE_ON_START) await migrate(ctx.pool, config.DATABASE_SCHEMA, ctx.log);

  let workers: RunningWorkers | undefined;
  let reconciler: Reconciler | undefined;
  if (options.worker) {
    const selected = options.queues ? allJobs.filter((j) => options.queues!.includes(j.queue)) : allJobs;
    workers = startWorkers(ctx, selected);
    ctx.log.info({ queues: selected.map((j) => j.queue) }, 'workers started');
    // Every worker process runs one; they take turns (docs/operations.md).
    reconciler = startReconciler(ctx, { intervalMs: config.RECONCILE_INTERVAL_SECONDS * 1000 });
    removeOrphanSpoolDirs().then(
      (removed) => {
        if (removed > 0) ctx.log.info({ removed }, 'removed spool directories of export workers that died mid-shard');
      },
      (err: unknown) => ctx.log.warn({ err }, 'could not look for spool directories of dead export workers'),
    );
  }

  let app: FastifyInstance | undefined;
  let metricsServer: Server | undefined;
  if (options.api) {
    app = await buildApp(ctx);
    await app.listen({ host: config.HOST, port: config.PORT });
  } else if (config.WORKER_METRICS_PORT > 0) {
    // A worker-only process has no API to scrape; job metrics live in this process, so serve them here.
    metricsServer = createServer((req, res) => {
      if (req.url !== '/metrics') {
        res.writeHead(404).end();
        return;
      }
      ctx.metrics.registry.metrics().then(
        (body) => res.writeHead(200, { 'content-type': ctx.metrics.registry.contentType }).end(body),
        () => res.writeHead(500).end(),
      );
    });
    await new Promise<void>((resolve) => metricsServer!.listen(config.WORKER_METRICS_PORT, config.HOST, resolve));
  }

  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= (async () => {
      ctx.log.info('shutting down');
      // Stop accepting first, so no request is enqueued after the workers are gone.
      await app?.close();
      await new Promise((resolve) => (metricsServer ? metricsServer.close(resolve) : resolve(undefined)));
      await reconciler?.stop();
      await workers?.close(config.SHUTDOWN_TIMEOUT_MS);
      await closeContext(ctx);
    })());
  return { ctx, app, workers, stop };
}

/**
 * `ces start`: the API in this process and the queue processors in a `ces worker` child process (see
 * WorkerProcess), whose metrics this process's /metrics includes. Migrations run here, before the child starts.
 */
export async function runWithWorkerProcess(config: Config): Promise<Running> {
  const running = await run(config, { api: true, worker: false });
  const worker = new WorkerProcess(running.ctx.log, config.WORKER_PROCESS_NICE);
  running.ctx.metrics.peers.push(() => worker.metrics());
  worker.start();
  let stopping: Promise<void> | undefined;
  const stop = () =>
    (stopping ??= Promise.all([running.stop(), worker.stop(config.SHUTDOWN_TIMEOUT_MS + 5000)]).then(() => undefined));
  return { ...running, stop };
}

/**
 * In a worker process started by `ces start`: answers the parent's metrics requests, and stops gracefully when
 * the parent closes the channel (it stops, or it died).
 */
export function serveParent(running: Running): void {
  if (!process.send) return;
  process.on('message', (message: ParentMessage) => {
    if (message?.type !== 'metrics') return;
    running.ctx.metrics.registry.getMetricsAsJSON().then(
      (metrics) => process.send?.({ type: 'metrics', id: message.id, metrics } satisfies ChildMessage),
      (err: unknown) => running.ctx.log.warn({ err }, 'could not collect metrics for the parent process'),
    );
  });
  // The parent may have let go while this process was still starting: then there is no event left to wait for.
  if (!process.connected) stopAndExit(running);
  else process.once('disconnect', () => stopAndExit(running));
}

/** Stops gracefully, then exits: 0, or 1 when the shutdown failed. */
function stopAndExit(running: Running): void {
  running.stop().then(
    () => process.exit(0),
    (err) => {
      running.ctx.log.error({ err }, 'shutdown failed');
      process.exit(1);
    },
  );
}

/** SIGTERM and SIGINT stop gracefully; a second signal exits at once. */
export function stopOnSignals(running: Running): void {
  let signalled = false;
  const onSignal = (signal: NodeJS.Signals) => {
    if (signalled) process.exit(1);
    signalled = true;
    running.ctx.log.info({ signal }, 'signal received');
    stopAndExit(running);
  };
  process.on('SIGTERM', onSignal);
  process.on('SIGINT', onSignal);
}
