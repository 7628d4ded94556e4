import { PrincipalResolver } from './auth/principals.js';
import { RateLimiter } from './auth/rate-limit.js';
import type { Config } from './config.js';
import { createPool, type Pool } from './db/pool.js';
import { DEPENDENCY_NAMES, DependencyHealth, maskUrl, type Dependency } from './lib/dependency-health.js';
import { createLogger, type Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { Queues } from './queues/index.js';
import { closeRedis, createRedis, redisKeyPrefix, type Redis } from './redis.js';

/**
 * The long-lived resources of one process, created once by an entry point and handed to the app, the workers and
 * the CLI commands. Domain functions take the parts they need, never the whole context.
 */
export interface AppContext {
  config: Config;
  log: Logger;
  pool: Pool;
  /** Where export shards read segment members: a pool on EXPORT_DATABASE_URL, or `pool` itself when it is unset. */
  exportReadPool: Pool;
  /** Producer connection: queues, locks, rate-limit counters. Fails fast when Redis is away. */
  redis: Redis;
  queues: Queues;
  principals: PrincipalResolver;
  rateLimiter: RateLimiter;
  metrics: Metrics;
  /** Outages of PostgreSQL and Redis as this process sees them: logged once, mapped to 503. */
  health: DependencyHealth;
}

export interface ContextOptions {
  log?: Logger;
  metrics?: Metrics;
}

export async function createContext(config: Config, options: ContextOptions = {}): Promise<AppContext> {
  const log = options.log ?? createLogger(config.LOG_LEVEL);
  const health = new DependencyHealth(log, config);
  const pool = createPool(config, undefined, health);
  // Not reported to `health`: a replica that is away only sends export reads back to the primary
  // (src/pipelines/exports/shard/read-source.ts).
  const exportReadPool = config.EXPORT_DATABASE_URL
    ? createPool({ ...config, DATABASE_URL: config.EXPORT_DATABASE_URL })
    : pool;
  const redis = createRedis(config, 'producer', { enableOfflineQueue: true }, health);
  const metrics = options.metrics ?? new Metrics();
  const queues = new Queues(redis, redisKeyPrefix(config));
  // Every queue handle now, each with an 'error' listener: BullMQ repeats each connection error on every handle,
  // and prints (with a stack) those nobody listens to.
  for (const queue of queues.all())
    queue.on('error', (err) => health.report(err) ?? log.error({ err, queue: queue.name }, 'queue error'));
  return {
    config,
    log,
    pool,
    exportReadPool,
    redis,
    queues,
    principals: new PrincipalResolver(pool),
    rateLimiter: new RateLimiter(redis, redisKeyPrefix(config), config, health),
    metrics,
    health,
  };
}

export async function closeContext(ctx: AppContext): Promise<void> {
  await ctx.queues.close().catch(() => {});
  await closeRedis(ctx.redis);
  await ctx.pool.end().catch(() => {});
  if (ctx.exportReadPool !== ctx.pool) await ctx.exportReadPool.end().catch(() => {});
}

/** `ces serve|worker|start|migrate` could not reach a dependency in time: the one line the command prints. */
export class StartupError extends Error {}

const VARIABLES: Record<Dependency, 'DATABASE_URL' | 'REDIS_URL'> = { postgresql: 'DATABASE_URL', redis: 'REDIS_URL' };

/**
 * Waits, for at most STARTUP_TIMEOUT_SECONDS, until PostgreSQL (and Redis, when given) answer, retrying meanwhile
 * (a compose file may start the service before its servers). Throws a StartupError naming each that did not, by its
 * variable and its address, password masked.
 */
export async function reachDependencies(config: Config, pool: Pool, redis?: Redis): Promise<void> {
  const deadline = Date.now() + config.STARTUP_TIMEOUT_SECONDS * 1000;
  const attempt = async (dependency: Dependency, check: () => Promise<unknown>): Promise<string | undefined> => {
    let last: unknown;
    for (;;) {
      const left = deadline - Date.now();
      if (left <= 0) break;
      let timer: NodeJS.Timeout | undefined;
      const timeout = new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error('no answer')), left);
      });
      try {
        await Promise.race([check(), timeout]);
        return undefined;
      } catch (err) {
        last = err;
      } finally {
        clearTimeout(timer);
      }
      await new Promise((r) => setTimeout(r, Math.min(250, Math.max(0, deadline - Date.now()))));
    }
    const reason = last instanceof Error ? last.message || (last as { code?: string }).code : undefined;
    const variable = VARIABLES[dependency];
    const where = `${DEPENDENCY_NAMES[dependency]} at ${maskUrl(config[variable])} (${variable})`;
    return `cannot reach ${where} within ${config.STARTUP_TIMEOUT_SECONDS} s${reason ? `: ${reason}` : ''}`;
  };
  const failures = await Promise.all([
    attempt('postgresql', () => pool.query('SELECT 1')),
    redis ? attempt('redis', () => readyThenPing(redis)) : undefined,
  ]);
  const missing = failures.filter((f): f is string => f !== undefined);
  if (missing.length > 0) throw new StartupError(missing.join('; '));
}

async function readyThenPing(redis: Redis): Promise<void> {
  if (redis.status !== 'ready') {
    await new Promise<void>((resolve, reject) => {
      const onReady = () => {
        redis.off('error', onError);
        resolve();
      };
      const onError = (err: unknown) => {
        redis.off('ready', onReady);
        reject(err);
      };
      redis.once('ready', onReady);
      redis.once('error', onError);
    });
  }
  await redis.ping();
}
