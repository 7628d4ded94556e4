import { Redis, type RedisOptions } from 'ioredis';
import { tagDependency, type DependencyHealth } from './lib/dependency-health.js';

export type { Redis };

/** Longest pause between two reconnection attempts of a producer connection. */
const PRODUCER_MAX_RECONNECT_DELAY_MS = 1000;

/**
 * Producers (the API) fail fast when Redis is away; workers wait for it (BullMQ requires
 * maxRetriesPerRequest: null on connections that block). Either kind reconnects by itself, forever, and never emits
 * an unhandled 'error' (which ioredis would print, with its stack, at every reconnection attempt): errors and
 * reconnections are reported to `health`, which logs an outage once.
 */
export function createRedis(url: string, role: 'producer' | 'worker' = 'producer', extra: RedisOptions = {}, health?: DependencyHealth): Redis {
  const redis = new Redis(url, {
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    enableOfflineQueue: role === 'worker',
    lazyConnect: false,
    // A producer's command waiting for a reconnection fails after the second failed attempt: keep those short, so a
    // request answers 503 within about two seconds of Redis going away.
    ...(role === 'producer' ? { retryStrategy: (times: number) => Math.min(times * 100, PRODUCER_MAX_RECONNECT_DELAY_MS) } : {}),
    ...extra,
  });
  watchRedis(redis, health);
  return redis;
}

/**
 * Reports a connection's errors and returns to `health`. (The blocking connections BullMQ duplicates from a worker's
 * carry BullMQ's own listener, which hands their errors to the worker's 'error' event: src/queue-processors.ts reports those.)
 */
function watchRedis(redis: Redis, health?: DependencyHealth): void {
  redis.on('error', (err: unknown) => {
    tagDependency(err, 'redis');
    health?.down('redis', err);
  });
  redis.on('ready', () => health?.up('redis'));
}

/** Closes a connection without waiting on a Redis that is away: QUIT when connected, else drop the socket. */
export async function closeRedis(redis: Redis, timeoutMs = 2000): Promise<void> {
  if (redis.status === 'end') return;
  if (redis.status !== 'ready') {
    redis.disconnect();
    return;
  }
  let timer: NodeJS.Timeout | undefined;
  const timedOut = new Promise<void>((resolve) => {
    timer = setTimeout(resolve, timeoutMs);
    timer.unref();
  });
  await Promise.race([redis.quit().then(() => undefined, () => undefined), timedOut]);
  clearTimeout(timer);
  // quit() may have ended it meanwhile (TypeScript still sees the status as 'ready').
  if ((redis.status as string) !== 'end') redis.disconnect();
}
