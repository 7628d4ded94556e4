import { Redis, type RedisOptions } from 'ioredis';

export type { Redis };

/**
 * Producers (the API) fail fast when Redis is away; workers wait for it (BullMQ requires
 * maxRetriesPerRequest: null on connections that block).
 */
export function createRedis(url: string, role: 'producer' | 'worker' = 'producer', extra: RedisOptions = {}): Redis {
  return new Redis(url, {
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    enableOfflineQueue: role === 'worker',
    lazyConnect: false,
    ...extra,
  });
}
