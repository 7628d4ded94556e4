import type { ChildProcess } from 'node:child_process';
import { once } from 'node:events';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { spawnCli, waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { startOwnPostgres, startOwnRedis, type OwnPostgres, type OwnRedis } from '../helpers/own-servers.js';
import { bearer, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/**
 * A real `ces worker` applying /users/track rows while its PostgreSQL restarts, cleanly (`fast`) and as after a
 * crash (`immediate`): connections checked out in a transaction are lost mid-batch. The process must live on and
 * apply every staged row once PostgreSQL is back, with no restart and no new request.
 */

let pgServer: OwnPostgres;
let redisServer: OwnRedis;
let env: TestEnv;
let ws: SeededWorkspace;
let worker: ChildProcess;
let workerOutput = '';
let workerExit: Promise<unknown[]>;
/** Which server a test has stopped and not started again (starting a running one would leave a stray process). */
const down = { pg: false, redis: false };

const REQUESTS = 160;
const PER_REQUEST = 50;

beforeAll(async () => {
  [pgServer, redisServer] = await Promise.all([startOwnPostgres(), startOwnRedis()]);
  env = await createTestEnv({ DATABASE_URL: pgServer.url, REDIS_URL: redisServer.url });
  ws = await seedWorkspace(env.ctx.pool);
  worker = spawnCli(['worker'], {
    NODE_ENV: 'test',
    LOG_LEVEL: 'info',
    DATABASE_URL: pgServer.url,
    DATABASE_SCHEMA: env.config.DATABASE_SCHEMA,
    REDIS_URL: redisServer.url,
    REDIS_PREFIX: env.config.REDIS_PREFIX,
    LOCAL_STORE_DIR: env.config.LOCAL_STORE_DIR,
    MIGRATE_ON_START: 'false',
    // One staged row per transaction: a batch is being applied, on a checked-out connection, nearly all the time.
    INGEST_BATCH_MAX_JOBS: '1',
    INGEST_PARTITIONS: '2',
  });
  worker.stdout!.on('data', (d) => (workerOutput += d));
  worker.stderr!.on('data', (d) => (workerOutput += d));
  workerExit = once(worker, 'exit');
  await waitFor(() => workerOutput.includes('workers started'), 30_000);
}, 120_000);

afterAll(async () => {
  if (worker && worker.exitCode === null && worker.signalCode === null) {
    worker.kill('SIGTERM');
    const killer = setTimeout(() => worker.kill('SIGKILL'), 5_000);
    await workerExit;
    clearTimeout(killer);
  }
  if (down.pg) await pgServer.start().catch(() => {});
  if (down.redis) await redisServer.start().catch(() => {});
  await env?.close();
  await Promise.all([pgServer?.close(), redisServer?.close()]);
});

async function stage(batch: string): Promise<void> {
  for (let i = 0; i < REQUESTS; i++) {
    const attributes = Array.from({ length: PER_REQUEST }, (_, j) => ({ external_id: `${batch}-${i}-${j}`, score: j }));
    const res = await env.app.inject({
      method: 'POST',
      url: '/users/track',
      headers: { ...bearer(ws.apiKey), 'content-type': 'application/json' },
      payload: JSON.stringify({ attributes }),
    });
    expect(res.statusCode, res.body).toBe(201);
  }
}

/** Fails at once, with what it printed last, when the worker process has died. */
function expectAlive(): void {
  if (worker.exitCode !== null || worker.signalCode !== null) {
    throw new Error(`ces worker exited (${worker.exitCode ?? worker.signalCode}):\n${workerOutput.slice(-2000)}`);
  }
}

const count = async (sql: string, params: unknown[] = []) =>
  (await env.ctx.pool.query<{ n: number }>(sql, params)).rows[0]!.n;
const staged = () => count(`SELECT count(*)::int AS n FROM ingest_staging`);
const profiles = (batch: string) =>
  count(`SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1 AND external_id LIKE $2`, [
    ws.workspaceId,
    `${batch}-%`,
  ]);

/** Waits until the worker has applied part of what is staged (and not all), then restarts PostgreSQL under it. */
async function restartWhileApplying(mode: 'fast' | 'immediate', batch: string): Promise<void> {
  await waitFor(
    async () => {
      expectAlive();
      return (await profiles(batch)) > 0;
    },
    30_000,
    20,
  );
  expect(await staged()).toBeGreaterThan(0);
  await pgServer.stop(mode);
  down.pg = true;
  await new Promise((r) => setTimeout(r, 1_000));
  await pgServer.start();
  down.pg = false;
}

describe('ces worker across PostgreSQL restarts', () => {
  for (const mode of ['fast', 'immediate'] as const) {
    it(`lives through a ${mode} restart mid-apply and applies every staged row afterwards`, async () => {
      const batch = `b-${mode}`;
      await stage(batch);
      await restartWhileApplying(mode, batch);
      // Nothing is asked of anyone from here on: no request, no restart.
      await waitFor(
        async () => {
          expectAlive();
          return (await staged()) === 0;
        },
        45_000,
        250,
      );
      expect(await profiles(batch)).toBe(REQUESTS * PER_REQUEST);
      expectAlive();
      expect(workerOutput).not.toMatch(/Unhandled 'error' event|Unhandled error event|uncaughtException/);
    });
  }

  it('lives on with Redis gone, logging the outage once, and still stops within 2 s of SIGTERM', async () => {
    const before = workerOutput.length;
    await redisServer.kill();
    down.redis = true;
    await new Promise((r) => setTimeout(r, 4_000));
    expectAlive();
    const during = workerOutput.slice(before);
    expect(during.split('\n').filter((l) => l.includes('"msg":"Redis is unavailable"'))).toHaveLength(1);
    expect(during).not.toMatch(/Unhandled error event|"stack"/);

    const signalled = Date.now();
    worker.kill('SIGTERM');
    const [code] = await workerExit;
    expect(Date.now() - signalled).toBeLessThan(2_000);
    expect(code).toBe(0);
  });
});
