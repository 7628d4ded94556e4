import { spawn, type ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import os from 'node:os';
import type { Logger } from '../platform/logger.js';
import type { MetricsSnapshot } from '../platform/metrics.js';

/** Messages between `ces start` and its worker process, over the child's IPC channel. */
export type ParentMessage = { type: 'metrics'; id: number };
export type ChildMessage = { type: 'metrics'; id: number; metrics: MetricsSnapshot };

const RESTART_DELAY_MS = 1000;
const METRICS_TIMEOUT_MS = 2000;

/**
 * The queue processors of `ces start`, as a `ces worker` child process. Applying a batch or cutting an export part
 * keeps a Node thread busy for tens of milliseconds at a time; in the API's own thread that delay lands on
 * acknowledgements (their p99 under load was several times higher in one process: BENCHMARKS.md). The child runs at a
 * lower priority (`niceness`) so that, when the cores are short, the API goes first. A child that dies is started
 * again; the parent stops it by closing the IPC channel, on which it stops gracefully.
 */
export class WorkerProcess {
  private child?: ChildProcess;
  private stopping = false;
  private restartTimer?: NodeJS.Timeout;
  private nextId = 0;
  private readonly pending = new Map<number, (metrics: MetricsSnapshot) => void>();

  constructor(
    private readonly log: Logger,
    private readonly niceness: number,
  ) {}

  start(): void {
    // The same entry point and loader flags as this process (tsx in development, plain node when built).
    const child = spawn(process.execPath, [...process.execArgv, process.argv[1]!, 'worker'], {
      env: { ...process.env, MIGRATE_ON_START: 'false' },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    this.child = child;
    if (this.niceness > 0 && child.pid !== undefined) {
      try {
        os.setPriority(child.pid, this.niceness);
      } catch (err) {
        this.log.warn({ err, niceness: this.niceness }, 'could not lower the worker process priority');
      }
    }
    child.on('message', (message: ChildMessage) => {
      if (message?.type !== 'metrics') return;
      this.pending.get(message.id)?.(message.metrics);
      this.pending.delete(message.id);
    });
    child.once('exit', (code, signal) => {
      if (this.child === child) this.child = undefined;
      for (const resolve of this.pending.values()) resolve([]);
      this.pending.clear();
      if (this.stopping) return;
      this.log.error({ code, signal }, `worker process exited; starting another in ${RESTART_DELAY_MS} ms`);
      this.restartTimer = setTimeout(() => this.start(), RESTART_DELAY_MS);
    });
    this.log.info({ pid: child.pid, niceness: this.niceness }, 'worker process started');
  }

  /** The child's metrics, or none when it is not running or does not answer in time. */
  metrics(): Promise<MetricsSnapshot> {
    const child = this.child;
    if (!child?.connected) return Promise.resolve([]);
    const id = ++this.nextId;
    return new Promise((resolve) => {
      const timer = setTimeout(() => {
        this.pending.delete(id);
        resolve([]);
      }, METRICS_TIMEOUT_MS);
      this.pending.set(id, (metrics) => {
        clearTimeout(timer);
        resolve(metrics);
      });
      child.send({ type: 'metrics', id } satisfies ParentMessage, (err) => {
        if (err) this.pending.get(id)?.([]);
      });
    });
  }

  /** Asks the child to stop gracefully and waits for it; kills it after `timeoutMs`. */
  async stop(timeoutMs: number): Promise<void> {
    this.stopping = true;
    clearTimeout(this.restartTimer);
    const child = this.child;
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const exited = once(child, 'exit');
    if (child.connected) child.disconnect();
    const killer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    await exited;
    clearTimeout(killer);
  }
}
