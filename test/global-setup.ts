import pg from 'pg';
import { Redis } from 'ioredis';
import type { TestProject } from 'vitest/node';
import { mkdtemp } from 'node:fs/promises';
import { readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startOwnRedisCluster } from './helpers/own-servers.js';

declare module 'vitest' {
  export interface ProvidedContext {
    /** REDIS_CLUSTER_NODES of the cluster the `cluster` project started, for every test env of it. */
    redisClusterNodes: string | undefined;
    /** Where the test processes write the statuses they saw and the OpenAPI document declares (helpers/context.ts). */
    statusesDir: string | undefined;
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
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', {
    lazyConnect: true,
    maxRetriesPerRequest: 1,
  });
  try {
    await redis.connect();
    await redis.ping();
  } catch (err) {
    throw new Error(`Redis is not reachable: ${(err as Error).message}. Run scripts/services.sh first.`);
  } finally {
    redis.disconnect();
  }
  const statusesDir = await mkdtemp(path.join(tmpdir(), 'ces-statuses-'));
  project.provide('statusesDir', statusesDir);
  // The `cluster` project (vitest.config.ts): its test envs use a 3-master Redis Cluster of their own instead of the
  // shared Redis.
  const cluster = project.name === 'cluster' ? await startOwnRedisCluster() : undefined;
  project.provide('redisClusterNodes', cluster?.nodes);
  return async () => {
    await cluster?.close();
    try {
      checkStatusesDeclared(statusesDir);
    } catch (err) {
      // vitest reports an error thrown here but still exits 0: the exit code must say the run failed.
      process.exitCode = 1;
      throw err;
    } finally {
      rmSync(statusesDir, { recursive: true, force: true });
    }
  };
}

/**
 * Every status the suite saw a route answer must be one the OpenAPI document declares for that operation (the document
 * is generated from the route schemas and the error model: src/platform/http/error-responses.ts). A status a route
 * answers and the document does not name fails the run, naming the operation.
 */
function checkStatusesDeclared(dir: string): void {
  const files = readdirSync(dir);
  const declaredFile = files.find((f) => f.startsWith('declared-'));
  if (!declaredFile) return;
  const declared = JSON.parse(readFileSync(path.join(dir, declaredFile), 'utf8')) as Record<string, string[]>;
  const missing = new Set<string>();
  for (const file of files.filter((f) => f.startsWith('observed-'))) {
    for (const line of readFileSync(path.join(dir, file), 'utf8').split('\n').filter(Boolean)) {
      const at = line.lastIndexOf(' ');
      const operation = line.slice(0, at);
      const status = line.slice(at + 1);
      // Routes the document leaves out (probes, the docs page, the queue dashboard) are not checked.
      if (declared[operation] && !declared[operation].includes(status)) missing.add(`${operation} answered ${status}`);
    }
  }
  if (missing.size > 0) {
    throw new Error(
      `The OpenAPI document does not declare statuses the suite saw:\n  ${[...missing].sort().join('\n  ')}`,
    );
  }
}
