import type { Config } from '../../platform/config.js';
import { withTransaction, type Pool } from '../../platform/db/pool.js';
import { forgetExportBases } from '../../pipelines/exports/incremental.js';
import { forgetExpiredKeys } from '../../platform/idempotency/keys.js';
import { maintainEventLogDays } from '../../profiles/event-log.js';
import { forgetOldErasures } from '../../pipelines/events/event-exports.js';
import type { Logger } from '../../platform/logger.js';
import type { Queues } from '../../platform/queues/index.js';
import { redisKeyPrefix, type Redis } from '../../platform/redis.js';
import { REPAIRS, type RepairDeps, type Repaired } from './repairs.js';
import { lockNames, tryLockForTransaction } from '../../platform/db/advisory-locks.js';

/**
 * The reconciler: PostgreSQL is the record of every piece of work, and whatever Redis holds of it (jobs, export holds,
 * job schedulers) is rebuilt from there. Every worker process runs one; on each tick one of them (a PostgreSQL
 * advisory lock, and the time of the last pass) compares unfinished work with Redis and queues again what is missing
 * (src/runtime/reconcile/repairs.ts). Redis losing everything is noticed without traffic: a marker key vanishes, and a
 * reconnect of the connection triggers a pass at once.
 */

export interface ReconcilerDeps {
  config: Config;
  pool: Pool;
  redis: Redis;
  queues: Queues;
  log: Logger;
}

export interface ReconcilerOptions {
  /** Time between passes (RECONCILE_INTERVAL_SECONDS). */
  intervalMs: number;
}

export interface PassResult {
  /** False when another process passed (or is passing) within the interval. */
  ran: boolean;
  /** Redis had lost this install's data (the marker key was gone). */
  redisLost?: boolean;
  repaired?: Repaired;
  /** Kinds of work whose repair failed (Redis or PostgreSQL away); retried at the next pass. */
  failed?: string[];
}

/** Kinds whose counts are not lost work queued again (registrations, clean-up): not in the pass's log line. */
const QUIET_KINDS = new Set(['schedules', 'expired idempotency keys', 'export bases past retention', 'event log days']);

/** Every this many passes, canvas schedules are re-armed in full even when Redis kept its marker. */
const FULL_EVERY_PASSES = 10;

export class Reconciler {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<PassResult> | undefined;
  private passes = 0;
  private stopped = false;
  private readonly onReady = () => this.soon();

  constructor(
    private readonly deps: ReconcilerDeps,
    private readonly options: ReconcilerOptions,
  ) {}

  private get markerKey(): string {
    return `${redisKeyPrefix(this.deps.config)}:reconciler:alive`;
  }

  start(): void {
    this.stopped = false;
    // A connection coming back may be to a Redis that lost everything: look at once rather than at the next tick.
    this.deps.redis.on('ready', this.onReady);
    this.schedule(0);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.deps.redis.off('ready', this.onReady);
    clearTimeout(this.timer);
    await this.running?.catch(() => undefined);
  }

  /** Runs a pass now (unless one runs already), regardless of when the last one was. */
  passNow(): Promise<PassResult> {
    this.running ??= this.pass(true).finally(() => (this.running = undefined));
    return this.running;
  }

  private soon(): void {
    if (!this.stopped) this.schedule(500);
  }

  private schedule(delayMs: number): void {
    clearTimeout(this.timer);
    this.timer = setTimeout(() => {
      const forced = delayMs < this.options.intervalMs;
      this.running ??= this.pass(forced).finally(() => (this.running = undefined));
      this.running
        .catch((err: unknown) => this.deps.log.warn({ err }, 'reconciler pass failed'))
        .finally(() => {
          if (!this.stopped) this.schedule(this.options.intervalMs);
        });
    }, delayMs);
    this.timer.unref();
  }

  /** One pass, if this process is the one to make it: the lock is free and (unless forced) the last pass is old. */
  private async pass(forced: boolean): Promise<PassResult> {
    const { pool, config } = this.deps;
    return withTransaction(pool, async (client) => {
      if (!(await tryLockForTransaction(client, lockNames.reconciler(config.DATABASE_SCHEMA)))) return { ran: false };
      const last = await client.query<{ due: boolean }>(
        `SELECT last_pass_at < now() - make_interval(secs => $1) AS due FROM reconciler_state`,
        [Math.max(0, this.options.intervalMs / 1000 - 1)],
      );
      if (!forced && last.rows[0] && !last.rows[0].due) return { ran: false };
      await client.query(
        `INSERT INTO reconciler_state (id, last_pass_at) VALUES (true, now()) ON CONFLICT (id) DO UPDATE SET last_pass_at = excluded.last_pass_at`,
      );
      return this.repair();
    });
  }

  private async repair(): Promise<PassResult> {
    const { redis, log } = this.deps;
    const redisLost = (await redis.exists(this.markerKey)) === 0;
    this.passes++;
    const deps: RepairDeps = this.deps;
    const full = redisLost || this.passes % FULL_EVERY_PASSES === 1;
    const kinds: Array<[string, () => Promise<number>]> = [
      ...REPAIRS.map((r): [string, () => Promise<number>] => [r.kind, () => r.run(deps, full)]),
      // Not lost work: records past their use, dropped here because a pass runs anyway.
      ['expired idempotency keys', () => forgetExpiredKeys(deps.pool)],
      [
        'event log days',
        async () => {
          const days = await maintainEventLogDays(deps.pool, deps.config.EVENT_LOG_RETENTION_DAYS);
          const erasures = await forgetOldErasures(deps.pool, deps.config.TOMBSTONE_RETENTION_DAYS);
          return days.made + days.dropped + erasures;
        },
      ],
      [
        'export bases past retention',
        async () => {
          const forgotten = await forgetExportBases(
            deps.pool,
            deps.config.EXPORT_INCREMENTAL_RETENTION_DAYS,
            deps.config.TOMBSTONE_RETENTION_DAYS,
          );
          return forgotten.exports + forgotten.tombstones + forgotten.changes;
        },
      ],
    ];
    const repaired: Repaired = {};
    const failed: string[] = [];
    for (const [kind, repairKind] of kinds) {
      try {
        repaired[kind] = await repairKind();
      } catch (err) {
        failed.push(kind);
        log.warn({ err, kind }, 'reconciler could not repair this kind of work; it tries again at the next pass');
      }
    }
    // Only a pass that rebuilt everything may say Redis holds this install's work again.
    if (failed.length === 0) await redis.set(this.markerKey, new Date().toISOString());
    const queued = Object.entries(repaired).filter(([kind, n]) => !QUIET_KINDS.has(kind) && n > 0);
    // A brand-new install (or one restarted with nothing pending) has nothing to rebuild: no warning for that.
    if (redisLost && queued.length > 0) {
      log.warn(
        { repaired: Object.fromEntries(queued) },
        "Redis had lost this install's work (restarted without persistence, or flushed): queued it again from PostgreSQL",
      );
    } else if (redisLost) {
      log.info(
        'Redis holds no work of this install (new, or restarted or flushed with nothing pending): nothing to rebuild',
      );
    } else if (queued.length > 0) {
      log.info({ repaired: Object.fromEntries(queued) }, 'reconciler queued lost work again');
    }
    return { ran: true, redisLost, repaired, failed };
  }
}

/** Starts a reconciler in this process (worker processes run one); `stop` waits for a pass under way. */
export function startReconciler(deps: ReconcilerDeps, options: ReconcilerOptions): Reconciler {
  const reconciler = new Reconciler(deps, options);
  reconciler.start();
  return reconciler;
}
