import { PrincipalResolver } from './auth/principals.js';
import { RateLimiter } from './auth/rate-limit.js';
import type { Config } from './config.js';
import { createPool, type Pool } from './db/pool.js';
import { createLogger, type Logger } from './logger.js';
import { Metrics } from './metrics.js';
import { Queues } from './queues.js';
import { createRedis, type Redis } from './redis.js';

/**
 * The long-lived resources of one process, created once by an entry point and handed to the app, the workers and
 * the CLI commands. Domain functions take the parts they need, never the whole context.
 */
export interface AppContext {
  config: Config;
  log: Logger;
  pool: Pool;
  /** Producer connection: queues, locks, rate-limit counters. Fails fast when Redis is away. */
  redis: Redis;
  queues: Queues;
  principals: PrincipalResolver;
  rateLimiter: RateLimiter;
  metrics: Metrics;
}

export interface ContextOptions {
  log?: Logger;
  metrics?: Metrics;
}

export async function createContext(config: Config, options: ContextOptions = {}): Promise<AppContext> {
  const log = options.log ?? createLogger(config.LOG_LEVEL);
  const pool = createPool(config);
  const redis = createRedis(config.REDIS_URL, 'producer', { enableOfflineQueue: true });
  const metrics = options.metrics ?? new Metrics();
  return {
    config,
    log,
    pool,
    redis,
    queues: new Queues(redis, config.REDIS_PREFIX),
    principals: new PrincipalResolver(pool),
    rateLimiter: new RateLimiter(redis, config.REDIS_PREFIX, config),
    metrics,
  };
}

export async function closeContext(ctx: AppContext): Promise<void> {
  await ctx.queues.close().catch(() => {});
  await ctx.redis.quit().catch(() => ctx.redis.disconnect());
  await ctx.pool.end().catch(() => {});
}
