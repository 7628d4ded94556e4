import type { ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { startReconciler } from '../../src/runtime/reconcile/reconciler.js';
import { QUICK_STALLED_CHECK, spawnCli, waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { startOwnPostgres, startOwnRedis, type OwnPostgres, type OwnRedis } from '../helpers/own-servers.js';
import { bearer, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/**
 * A CDI sync survives a worker SIGKILLed mid-run, PostgreSQL stopped under it (its own server, also the warehouse
 * here) and a Redis that lost its job: it resumes from its last committed batch with no manual step, and ends with
 * every row counted once (rows_synced equals the table's rows) and every profile at its row's value.
 */

let pgServer: OwnPostgres;
let redis: OwnRedis;
let env: TestEnv;
let ws: SeededWorkspace;
let child: ChildProcess | undefined;
const down = { pg: false };
const ROWS = 12_000;
const URL_ENV = `CES_TEST_CDI_CRASH_${randomUUID().slice(0, 8).toUpperCase()}`;

beforeAll(async () => {
  [pgServer, redis] = await Promise.all([startOwnPostgres(), startOwnRedis()]);
  env = await createTestEnv({
    DATABASE_URL: pgServer.url,
    REDIS_URL: redis.url,
    CDI_BATCH_ROWS: '400',
    ...QUICK_STALLED_CHECK,
  });
  ws = await seedWorkspace(env.ctx.pool);
  process.env[URL_ENV] = pgServer.url;
  await env.ctx.pool.query(`CREATE SCHEMA warehouse`);
}, 60_000);

afterAll(async () => {
  child?.kill('SIGKILL');
  if (down.pg) await pgServer.start().catch(() => {});
  await env?.close();
  await Promise.all([pgServer?.close(), redis?.close()]);
  delete process.env[URL_ENV];
});

/** A table of ROWS rows for users `${round}-i`, each setting tier = i, and an integration over it. */
async function prepare(round: string): Promise<string> {
  await env.ctx.pool.query(
    `CREATE TABLE warehouse.${round} (updated_at timestamptz NOT NULL, external_id text, payload text)`,
  );
  await env.ctx.pool.query(
    `INSERT INTO warehouse.${round} SELECT timestamptz '2026-01-01' + (g / 7) * interval '1 second', '${round}-' || g, json_build_object('tier', g)::text FROM generate_series(1, ${ROWS}) g`,
  );
  const id = randomUUID();
  await env.ctx.pool.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, $3, $4)`, [
    id,
    ws.workspaceId,
    round,
    JSON.stringify({ type: 'postgres', url_env: URL_ENV, table: `warehouse.${round}` }),
  ]);
  return id;
}

async function trigger(integration: string): Promise<void> {
  const res = await env.app.inject({
    method: 'POST',
    url: `/cdi/integrations/${integration}/sync`,
    headers: bearer(ws.apiKey),
  });
  expect(res.statusCode, res.body).toBe(202);
}

const job = async (integration: string) =>
  (
    await env.ctx.pool.query<{ status: string; rows_synced: number; rows_failed: number }>(
      `SELECT status, rows_synced, rows_failed FROM cdi_sync_jobs WHERE integration_id = $1 ORDER BY started_at DESC LIMIT 1`,
      [integration],
    )
  ).rows[0];

async function expectExact(integration: string, round: string): Promise<void> {
  expect(await job(integration)).toMatchObject({ status: 'success', rows_synced: ROWS, rows_failed: 0 });
  const { rows } = await env.ctx.pool.query<{ n: number; wrong: number }>(
    `SELECT count(*)::int AS n, count(*) FILTER (WHERE custom_attributes->>'tier' <> substr(external_id, length($2) + 2))::int AS wrong
       FROM profiles WHERE workspace_id = $1 AND external_id LIKE $2 || '-%'`,
    [ws.workspaceId, round],
  );
  expect(rows[0]).toEqual({ n: ROWS, wrong: 0 });
}

/** A worker process; `batchRows` (CDI_BATCH_ROWS) 400 by default: many batches, so a fault falls mid-run. */
function spawnWorker(batchRows = 400): { child: ChildProcess; output: () => string } {
  let output = '';
  const c = spawnCli(['worker', '--queues', 'cdi-sync'], {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    DATABASE_URL: pgServer.url,
    DATABASE_SCHEMA: env.config.DATABASE_SCHEMA,
    REDIS_URL: redis.url,
    REDIS_PREFIX: env.config.REDIS_PREFIX,
    LOCAL_STORE_DIR: env.config.LOCAL_STORE_DIR,
    MIGRATE_ON_START: 'false',
    CDI_BATCH_ROWS: String(batchRows),
    [URL_ENV]: pgServer.url,
    ...QUICK_STALLED_CHECK,
  });
  c.stdout!.on('data', (d) => (output += d));
  c.stderr!.on('data', (d) => (output += d));
  return { child: c, output: () => output };
}

const midRun = (integration: string) => async () => {
  const j = await job(integration);
  return j !== undefined && j.status === 'running' && j.rows_synced > 0 && j.rows_synced < ROWS;
};

describe('a CDI sync and its faults', () => {
  it('a worker SIGKILLed mid-run: the next worker resumes it, every row once', async () => {
    const integration = await prepare('killed');
    const worker = spawnWorker();
    child = worker.child;
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      worker.child.on('exit', (_c, signal) => resolve(signal)),
    );
    await trigger(integration);
    await waitFor(midRun(integration), 60_000, 5);
    worker.child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    child = undefined;
    // The job is still Redis's, taken by a dead worker: BullMQ's stalled-job check gives it to the next one, once the
    // dead worker's lock has lapsed and a check has run: seconds with QUICK_STALLED_CHECK, up to a minute and a half
    // with the queue's own timings.
    const workers = env.startWorkers([cdiSyncJob]);
    try {
      await waitFor(async () => (await job(integration))?.status !== 'running', 150_000, 200);
    } finally {
      await workers.close(5_000);
    }
    await expectExact(integration, 'killed');
  }, 240_000);

  for (const mode of ['fast', 'immediate'] as const) {
    it(`PostgreSQL stopped (${mode}) mid-run: the worker lives on and finishes it`, async () => {
      const integration = await prepare(`pg_${mode}`);
      // Batches of 4,800: each lane's UPDATE goes as two or three statements (1,000 profiles each), so the stop
      // can fall between the statements of one transaction.
      const worker = spawnWorker(4_800);
      child = worker.child;
      try {
        await trigger(integration);
        await waitFor(midRun(integration), 60_000, 5);
        await pgServer.stop(mode);
        down.pg = true;
        await new Promise((r) => setTimeout(r, 1_000));
        await pgServer.start();
        down.pg = false;
        await waitFor(
          async () => {
            if (worker.child.exitCode !== null) throw new Error(`ces worker exited:\n${worker.output().slice(-2000)}`);
            return ((await job(integration).catch(() => undefined))?.status ?? 'running') !== 'running';
          },
          120_000,
          200,
        );
      } finally {
        worker.child.kill('SIGTERM');
        child = undefined;
      }
      await expectExact(integration, `pg_${mode}`);
    }, 240_000);
  }

  it("Redis lost the run's job (flushed before any worker took it): the reconciler queues it, the run completes", async () => {
    const integration = await prepare('redis_lost');
    await trigger(integration);
    await redis.flush();
    const workers = env.startWorkers([cdiSyncJob]);
    const reconciler = startReconciler(env.ctx, { intervalMs: 1_000 });
    try {
      await waitFor(async () => (await job(integration))?.status !== 'running', 90_000, 200);
    } finally {
      await reconciler.stop();
      await workers.close(5_000);
    }
    await expectExact(integration, 'redis_lost');
  }, 180_000);
});
