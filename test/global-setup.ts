import pg from 'pg';
import { Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';
import { startOwnRedisCluster } from './helpers/own-servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** REDIS_CLUSTER_NODES of the cluster the run started (CES_TEST_REDIS=cluster), for every test env. */
    redisClusterNodes: string | undefined;
  }
}

/**
 * Fails the run early, with a clear message, when PostgreSQL or Redis is not reachable
 * (`.ci/run` and `scripts/services.sh` start them).
 */
export default async function setup(project: TestProject): Promise<(() => Promise<void>) | undefined> {
  const url = process.env.TEST_DATABASE_URL ?? process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
  const client = new pg.Client({ connectionString: url });
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    throw new Error(`PostgreSQL is not reachable at ${url}: ${(err as Error).message}. Run scripts/services.sh first.`);
  } finally {
    await client.end().catch(() => {});
  }
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { lazyConnect: true, maxRetriesPerRequest: 1 });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new Error(`Redis is not reachable: ${(err as Error).message}. Run scripts/services.sh first.`);
  } finally {
    redis.disconnect();
  }
  // `npm run test:cluster`: the run's test envs use a 3-master Redis Cluster of their own instead of the shared Redis.
  if (process.env.CES_TEST_REDIS === 'cluster') {
    const cluster = await startOwnRedisCluster();
    project.provide('redisClusterNodes', cluster.nodes);
    return () => cluster.close();
  }
  project.provide('redisClusterNodes', undefined);
  return undefined;
}
