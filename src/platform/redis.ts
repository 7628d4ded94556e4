import { Cluster, Redis as SingleRedis, type ClusterOptions, type RedisOptions } from 'ioredis';
import { tagDependency, type DependencyHealth } from './lib/dependency-health.js';

/** A connection to a single Redis or to a Redis Cluster: the service uses the commands both have. */
export type Redis = SingleRedis | Cluster;

/** Longest pause between two reconnection attempts of a producer connection. */
const PRODUCER_MAX_RECONNECT_DELAY_MS = 1000;

/** Where Redis is: one server (REDIS_URL), or the seed nodes of a cluster (REDIS_CLUSTER_NODES). */
export interface RedisTarget {
  REDIS_URL: string;
  REDIS_CLUSTER_NODES?: string | undefined;
}

/**
 * The prefix of every key of an install. In cluster mode it is a hash tag (`{ces}`), so that every key, BullMQ's
 * included, lies in one slot: the export lock script touches a segment key and a company key at once, and BullMQ's
 * scripts touch several keys of a queue. Single-node installs keep the plain prefix (their keys do not move).
 */
export function redisKeyPrefix(config: RedisTarget & { REDIS_PREFIX: string }): string {
  return config.REDIS_CLUSTER_NODES ? `{${config.REDIS_PREFIX}}` : config.REDIS_PREFIX;
}

interface SeedNodes {
  nodes: { host: string; port: number }[];
  password?: string;
  username?: string;
  tls: boolean;
}

/** Parses REDIS_CLUSTER_NODES: `host:port` entries, or URLs whose first one carries the credentials and TLS. */
export function parseClusterNodes(text: string): SeedNodes {
  const seeds: SeedNodes = { nodes: [], tls: false };
  text.split(',').forEach((raw, i) => {
    const entry = raw.trim();
    const url = new URL(entry.includes('://') ? entry : `redis://${entry}`);
    seeds.nodes.push({ host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 6379) });
    if (i === 0) {
      if (url.password) seeds.password = decodeURIComponent(url.password);
      if (url.username) seeds.username = decodeURIComponent(url.username);
      seeds.tls = url.protocol === 'rediss:';
    }
  });
  return seeds;
}

/**
 * Producers (the API) fail fast when Redis is away; workers wait for it (BullMQ requires
 * maxRetriesPerRequest: null on connections that block). Either kind reconnects by itself, forever, and never emits
 * an unhandled 'error' (which ioredis would print, with its stack, at every reconnection attempt): errors and
 * reconnections are reported to `health`, which logs an outage once.
 */
export function createRedis(
  target: RedisTarget,
  role: 'producer' | 'worker' = 'producer',
  extra: RedisOptions = {},
  health?: DependencyHealth,
): Redis {
  const options: RedisOptions = {
    maxRetriesPerRequest: role === 'worker' ? null : 1,
    enableOfflineQueue: role === 'worker',
    lazyConnect: false,
    // A producer's command waiting for a reconnection fails after the second failed attempt: keep those short, so a
    // request answers 503 within about two seconds of Redis going away.
    ...(role === 'producer'
      ? { retryStrategy: (times: number) => Math.min(times * 100, PRODUCER_MAX_RECONNECT_DELAY_MS) }
      : {}),
    ...extra,
  };
  const redis = target.REDIS_CLUSTER_NODES
    ? createCluster(target.REDIS_CLUSTER_NODES, options)
    : new SingleRedis(target.REDIS_URL, options);
  watchRedis(redis, health);
  return redis;
}

function createCluster(nodesText: string, options: RedisOptions): Cluster {
  const seeds = parseClusterNodes(nodesText);
  const { retryStrategy, enableOfflineQueue, lazyConnect, ...nodeOptions } = options;
  const clusterOptions: ClusterOptions = {
    enableOfflineQueue,
    lazyConnect,
    clusterRetryStrategy: retryStrategy ?? ((times: number) => Math.min(times * 100, 2000)),
    redisOptions: {
      ...nodeOptions,
      ...(seeds.password ? { password: seeds.password } : {}),
      ...(seeds.username ? { username: seeds.username } : {}),
      ...(seeds.tls ? { tls: {} } : {}),
    },
    // Managed clusters with TLS (ElastiCache) present certificates for the configuration endpoint's name: connect to
    // the addresses the cluster announces without resolving them again.
    ...(seeds.tls
      ? {
          dnsLookup: (address: string, callback: (err: Error | null, address: string) => void) =>
            callback(null, address),
        }
      : {}),
  };
  return new Cluster(seeds.nodes, clusterOptions);
}

/**
 * Reports a connection's errors and returns to `health`. (The blocking connections BullMQ duplicates from a worker's
 * carry BullMQ's own listener, which hands their errors to the worker's 'error' event: src/runtime/workers.ts reports
 * those.)
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
  await Promise.race([
    redis.quit().then(
      () => undefined,
      () => undefined,
    ),
    timedOut,
  ]);
  clearTimeout(timer);
  // quit() may have ended it meanwhile (TypeScript still sees the status as 'ready').
  if ((redis.status as string) !== 'end') redis.disconnect();
}

/** Every master of a cluster, or the one server: where a key scan must look. */
export function scanTargets(redis: Redis): SingleRedis[] {
  return redis instanceof Cluster ? redis.nodes('master') : [redis];
}
