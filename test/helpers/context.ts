import { randomBytes } from 'node:crypto';
import { rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Writable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import type { DestinationStream } from 'pino';
import { afterAll, beforeAll, inject } from 'vitest';
import { buildApp } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/platform/config.js';
import { closeContext, createContext, type AppContext } from '../../src/platform/context.js';
import { migrate } from '../../src/platform/db/migrate.js';
import { createLogger } from '../../src/platform/logger.js';
import { type JobDefinition } from '../../src/platform/job-definition.js';
import { startWorkers, type RunningWorkers } from '../../src/runtime/workers.js';
import { redisKeyPrefix, scanTargets } from '../../src/platform/redis.js';
import { openApiPath } from '../../src/platform/http/error-responses.js';
import { seedWorkspace, type SeededWorkspace } from './seed.js';

export interface TestEnv {
  config: Config;
  ctx: AppContext;
  app: FastifyInstance;
  /** Starts processors for the given jobs in this process (stopped by `close`). */
  startWorkers(jobs: JobDefinition[]): RunningWorkers;
  close(): Promise<void>;
}

/**
 * A private world for one test file: its own PostgreSQL schema (migrated), its own Redis key prefix and queue
 * names, an app built over them. `close` drops the schema and deletes the keys, so runs never see each other.
 */
export interface TestEnvOptions {
  /** Where the process's log lines go (at LOG_LEVEL, default silent): for tests that read what is logged. */
  logDestination?: DestinationStream;
}

export async function createTestEnv(
  overrides: Record<string, string> = {},
  options: TestEnvOptions = {},
): Promise<TestEnv> {
  const id = `t_${Date.now().toString(36)}_${randomBytes(4).toString('hex')}`;
  const config = loadConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: process.env.TEST_LOG_LEVEL ?? 'silent',
    DATABASE_URL: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
    DATABASE_SCHEMA: id,
    DATABASE_POOL_SIZE: '5',
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_PREFIX: `ces-${id}`,
    // Set for the `cluster` project (test/global-setup.ts): the env then runs on a Redis Cluster, unless the test
    // gives a Redis of its own.
    ...(inject('redisClusterNodes') && !('REDIS_URL' in overrides)
      ? { REDIS_CLUSTER_NODES: inject('redisClusterNodes')! }
      : {}),
    LOCAL_STORE_DIR: `/tmp/ces-test/${id}/bucket`,
    METRICS_ENABLED: 'true',
    ...overrides,
  });
  const ctx = await createContext(config, { log: createLogger(config.LOG_LEVEL, {}, options.logDestination) });
  let app: FastifyInstance;
  try {
    await migrate(ctx.pool, config.DATABASE_SCHEMA);
    app = await buildApp(ctx, { observeResponse: statusRecorder.observe });
    await app.ready();
  } catch (err) {
    // A half-made world must not outlive a failed set-up.
    await ctx.pool.query(`DROP SCHEMA IF EXISTS "${config.DATABASE_SCHEMA}" CASCADE`).catch(() => {});
    await closeContext(ctx);
    throw err;
  }
  const running: RunningWorkers[] = [];

  return {
    config,
    ctx,
    app,
    startWorkers(jobs) {
      const w = startWorkers(ctx, jobs);
      running.push(w);
      return w;
    },
    async close() {
      for (const w of running) await w.close(5_000);
      await app.close();
      await ctx.pool.query(`DROP SCHEMA IF EXISTS "${config.DATABASE_SCHEMA}" CASCADE`).catch(() => {});
      await deleteKeys(ctx, `${redisKeyPrefix(config)}:*`);
      await statusRecorder.flush(app);
      await closeContext(ctx);
      await rm(`/tmp/ces-test/${id}`, { recursive: true, force: true });
    },
  };
}

/**
 * What every app of this test process answered (route as registered, status), written on close to the directory the
 * run's global set-up gave, with the statuses the OpenAPI document declares per operation: test/global-setup.ts
 * compares the two when the run ends.
 */
const statusRecorder = (() => {
  const seen = new Set<string>();
  let declaredWritten = false;
  return {
    observe: (method: string, url: string, status: number) =>
      void seen.add(`${method.toLowerCase()} ${openApiPath(url)} ${status}`),
    async flush(app: FastifyInstance): Promise<void> {
      const dir = inject('statusesDir');
      if (!dir) return;
      await writeFile(
        path.join(dir, `observed-${process.pid}-${Date.now()}-${randomBytes(3).toString('hex')}.txt`),
        [...seen].join('\n'),
      );
      seen.clear();
      if (declaredWritten) return;
      declaredWritten = true;
      const doc = app.swagger() as { paths?: Record<string, Record<string, { responses?: Record<string, unknown> }>> };
      const declared: Record<string, string[]> = {};
      for (const [p, ops] of Object.entries(doc.paths ?? {}))
        for (const [m, op] of Object.entries(ops)) declared[`${m} ${p}`] = Object.keys(op.responses ?? {});
      await writeFile(path.join(dir, `declared-${process.pid}.json`), JSON.stringify(declared));
    },
  };
})();

export interface UseTestEnvOptions<N extends string> extends TestEnvOptions {
  /** Configuration overrides (environment variables), as `createTestEnv` takes them. */
  config?: Record<string, string>;
  /** Workspaces to seed, each in a company of its own, in this order: each name becomes a field of the env. */
  workspaces?: readonly NoClash<N>[];
}

/** A workspace may not be named like a field of the env it is added to. */
type NoClash<N extends string> = N extends keyof TestEnv ? never : N;

/** The env of a test file (or of a `describe`) with its seeded workspaces by name: `env.ws`, `env.other`... */
export type SuiteEnv<N extends string = never> = TestEnv & { readonly [K in N]: SeededWorkspace };

/**
 * The usual set-up of a test file (or of the `describe` it is called in): a `beforeAll` that creates the env and seeds
 * the named workspaces, an `afterAll` that closes it. The answer is filled in when the `beforeAll` has run: read it in
 * hooks and tests only. Seeding of the file's own goes in a `beforeAll` after this call, which runs after this one
 * (and its `afterAll` before this one's `close`).
 *
 *     const env = useTestEnv({ config: { INGEST_PARTITIONS: '4' }, workspaces: ['ws', 'other'] });
 *     // env.app, env.ctx.pool, env.ws.apiKey, env.other.workspaceId
 */
export function useTestEnv<const N extends string = never>(options: UseTestEnvOptions<N> = {}): SuiteEnv<N> {
  const { config = {}, workspaces = [], ...envOptions } = options;
  const env = {} as SuiteEnv<N>;
  beforeAll(async () => {
    const created = await createTestEnv(config, envOptions);
    Object.assign(env, created);
    for (const name of workspaces) {
      if (name in created) throw new Error(`useTestEnv: a workspace may not be named ${name}`);
      Object.assign(env, { [name]: await seedWorkspace(created.ctx.pool) });
    }
  });
  afterAll(async () => (env as Partial<TestEnv>).close?.());
  return env;
}

async function deleteKeys(ctx: AppContext, pattern: string): Promise<void> {
  // A cluster's keys are spread over its masters: each is scanned (an env's keys share one slot, so one UNLINK each).
  for (const node of scanTargets(ctx.redis)) {
    let cursor = '0';
    do {
      const [next, keys] = await node.scan(cursor, 'MATCH', pattern, 'COUNT', 1000);
      cursor = next;
      if (keys.length > 0) await node.unlink(...keys);
    } while (cursor !== '0');
  }
}

/** A log destination that keeps every line a process writes (pass it as `logDestination`, with a LOG_LEVEL). */
export function captureLogs(): { lines: string[]; destination: DestinationStream } {
  const lines: string[] = [];
  const destination = new Writable({
    write(chunk: Buffer, _enc, cb) {
      lines.push(chunk.toString('utf8'));
      cb();
    },
  });
  return { lines, destination };
}
