import path from 'node:path';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { bulkImportJob } from '../../jobs/bulk-import.js';
import { canvasScheduleJob } from '../../jobs/canvas-schedule.js';
import { catalogBatchJob } from '../../jobs/catalog-batch.js';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { scheduledExportJob } from '../../jobs/scheduled-export.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { workspaceStatsJob } from '../../jobs/workspace-stats.js';
import { CANVAS_SCHEDULE_QUEUE, fireJobId } from '../../src/platform/queues/canvas-schedule.js';
import { SCHEDULED_EXPORT_QUEUE } from '../../src/platform/queues/scheduled-export.js';
import { TRACK_INGEST_QUEUE } from '../../src/platform/queues/track-ingest.js';
import { WORKSPACE_STATS_QUEUE } from '../../src/platform/queues/workspace-stats.js';
import { startReconciler, type Reconciler } from '../../src/runtime/reconcile/reconciler.js';
import { LocalStore, localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import type { RunningWorkers } from '../../src/runtime/workers.js';
import { waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import {
  createSegment,
  exportedExternalIds,
  exportStatus,
  insertProfiles,
  requestExport,
  startCallbackReceiver,
  waitForExport,
} from '../helpers/export-fixtures.js';
import { startOwnRedis, startOwnRedisCluster, type OwnRedis, type OwnRedisCluster } from '../helpers/own-servers.js';
import { callApi, statusAndBody } from '../helpers/http.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

// A Redis of the test's own, without persistence, that the test flushes and restarts; PostgreSQL is the shared one.
let redis: OwnRedis | OwnRedisCluster;
let env: TestEnv;
let ws: SeededWorkspace;
let receiver: Awaited<ReturnType<typeof startCallbackReceiver>>;
let receiverUrl: string;
let callbacks: Array<Record<string, unknown>> = [];
const MEMBERS = 40_000;

const EXPORT_JOBS = [segmentExportJob, exportShardJob, exportCallbackJob];

function reconciler(): Reconciler {
  return startReconciler(env.ctx, { intervalMs: 1_000 });
}

/** Stops what a test started, whatever happened. */
async function stopAll(workers: RunningWorkers[], reconcilers: Reconciler[]) {
  for (const r of reconcilers) await r.stop();
  for (const w of workers) await w.close(2_000);
}

const post = (url: string, body: unknown, method: 'POST' | 'PUT' = 'POST') =>
  callApi(env.app, method, url, { key: ws.apiKey, body }).then(statusAndBody);

/** external_ids of every line of an export's parts on disk. */
const exportedIds = (keyPrefix: string) =>
  exportedExternalIds(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws), keyPrefix));

beforeAll(async () => {
  // Under `npm run test:cluster`, a Redis Cluster of this file's own (it is flushed, so not the run's shared one).
  const clustered = inject('redisClusterNodes') !== undefined;
  redis = clustered ? await startOwnRedisCluster() : await startOwnRedis();
  const target: Record<string, string> =
    'url' in redis ? { REDIS_URL: redis.url } : { REDIS_URL: 'redis://unused', REDIS_CLUSTER_NODES: redis.nodes };
  env = await createTestEnv({
    ...target,
    EXPORT_SHARD_BUCKETS: '250',
    CALLBACK_ALLOW_PRIVATE: 'true',
    CANVAS_SCHEDULE_SWEEP_SECONDS: '60',
  });
  ws = await seedWorkspace(env.ctx.pool);
  await createSegment(env.ctx.pool, ws.workspaceId, 'us');
  await createSegment(env.ctx.pool, ws.workspaceId, 'queued-one');
  await insertProfiles(env.ctx.pool, ws.workspaceId, 1, MEMBERS);
  receiver = await startCallbackReceiver();
  receiverUrl = receiver.url;
  callbacks = receiver.received;
}, 120_000);
afterAll(async () => {
  receiver?.close();
  await env?.close();
  await redis?.close();
});

describe('Redis flushed in the middle of an export', () => {
  it('finishes the export with every member exactly once, keeps the segment locked, never shows progress going back', async () => {
    const workers = [env.startWorkers(EXPORT_JOBS)];
    const reconcilers = [reconciler()];
    try {
      const started = await requestExport(env, ws.apiKey, {
        segment_id: 'us',
        fields_to_export: ['external_id'],
        callback_endpoint: receiverUrl,
      });
      expect(started.status).toBe(201);
      const prefix = String(started.body.object_prefix);
      const exportId = (
        await env.ctx.pool.query<{ id: string }>('SELECT id FROM exports WHERE object_prefix = $1', [prefix])
      ).rows[0]!.id;

      // Some of the 40 shards have ended, not all: then Redis loses everything.
      await waitFor(
        async () => {
          const { rows } = await env.ctx.pool.query<{ n: number }>(
            'SELECT count(*)::int AS n FROM export_shards_done WHERE export_id = $1',
            [exportId],
          );
          return rows[0]!.n >= 3;
        },
        60_000,
        10,
      );
      await redis.flush();

      // The lock went with Redis, but a second export of the running segment is still refused.
      const second = await requestExport(env, ws.apiKey, { segment_id: 'us', fields_to_export: ['external_id'] });
      expect(second.status).toBe(429);

      const seen: number[] = [];
      let done: Record<string, unknown> = {};
      await waitFor(
        async () => {
          done = (await exportStatus(env, ws.apiKey, prefix)).body;
          seen.push(Number(done.users_done));
          return done.status === 'ready' || done.status === 'failed';
        },
        90_000,
        50,
      );
      expect(done).toMatchObject({ status: 'ready', users_done: MEMBERS });
      // Progress only ever grew.
      expect(seen).toEqual([...seen].sort((a, b) => a - b));

      const ids = await exportedIds(String(done.key_prefix));
      expect(ids).toHaveLength(MEMBERS);
      expect(new Set(ids).size).toBe(MEMBERS);
      await waitFor(() => callbacks.some((c) => String(c.url ?? '').includes(prefix)), 30_000);
      // The callback's link is the API's own address, not a worker's idea of it.
      expect(String(callbacks.find((c) => String(c.url ?? '').includes(prefix))!.url)).toMatch(
        /^http:\/\/127\.0\.0\.1:3000\/downloads\//,
      );
    } finally {
      await stopAll(workers, reconcilers);
    }
  });
});

describe('Redis flushed while work waits in its queues (no worker running)', () => {
  it('runs a queued export, applies a 202 catalog batch, staged track events and a queued import once workers and the reconciler run', async () => {
    const exp = await requestExport(env, ws.apiKey, { segment_id: 'queued-one', fields_to_export: ['external_id'] });
    expect(exp.status).toBe(201);
    const catalog = (
      await env.ctx.pool.query<{ id: string }>(
        `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, 'dishes', '[{"name":"Name","type":"string"}]') RETURNING id`,
        [ws.workspaceId],
      )
    ).rows[0]!.id;
    expect((await post('/catalogs/dishes/items', { items: [{ id: 'soup', Name: 'Soup' }] }, 'PUT')).status).toBe(202);
    expect(
      (await post('/users/track', { events: [{ external_id: 'ext-1', name: 'opened', time: '2026-01-02T00:00:00Z' }] }))
        .status,
    ).toBe(201);
    await LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, ws).put(
      'imports/day.ndjson',
      Buffer.from('{"external_id":"ext-2","name":"imported","time":"2026-01-03T00:00:00Z"}\n'),
    );
    const imp = await post('/users/import', { key: 'imports/day.ndjson' });
    expect(imp.status).toBe(201);

    await redis.flush();
    // Redis lost every job: nothing happens by itself until the reconciler sees the work recorded in PostgreSQL.
    await new Promise((r) => setTimeout(r, 5_500));
    const workers = [env.startWorkers([...EXPORT_JOBS, catalogBatchJob, trackIngestJob, bulkImportJob])];
    const reconcilers = [reconciler()];
    try {
      expect((await waitForExport(env, ws.apiKey, String(exp.body.object_prefix), 60_000)).status).toBe('ready');
      await waitFor(
        async () =>
          (
            await env.ctx.pool.query('SELECT 1 FROM catalog_items WHERE catalog_id = $1 AND item_id = $2', [
              catalog,
              'soup',
            ])
          ).rowCount === 1,
        30_000,
      );
      const events = async (id: string) =>
        (
          await env.ctx.pool.query<{ e: Record<string, unknown> }>(
            'SELECT custom_events AS e FROM profiles WHERE workspace_id = $1 AND external_id = $2',
            [ws.workspaceId, id],
          )
        ).rows[0]!.e;
      await waitFor(async () => 'opened' in (await events('ext-1')), 30_000);
      await waitFor(async () => 'imported' in (await events('ext-2')), 30_000);
      const status = await env.ctx.pool.query('SELECT status FROM imports WHERE id = $1', [imp.body.import_id]);
      expect(status.rows[0].status).toBe('completed');
      // Applied once: the catalog batch is marked applied, nothing is left staged.
      expect(
        (await env.ctx.pool.query('SELECT applied_at FROM catalog_batches WHERE catalog_id = $1', [catalog])).rows[0]
          .applied_at,
      ).not.toBeNull();
      expect((await env.ctx.pool.query('SELECT 1 FROM ingest_staging')).rowCount).toBe(0);
    } finally {
      await stopAll(workers, reconcilers);
    }
  });
});

describe('Redis flushed between a track request (and a delete) and its apply', () => {
  it('applies the acknowledged events and the delete with no new request, once the reconciler sees them staged', async () => {
    const reconcilers: Reconciler[] = [];
    const applied = async () =>
      (
        await env.ctx.pool.query(
          `SELECT 1 FROM profiles WHERE workspace_id = $1 AND external_id = 'ext-3' AND custom_events ? 'in-flight'`,
          [ws.workspaceId],
        )
      ).rowCount === 1 &&
      (
        await env.ctx.pool.query(`SELECT 1 FROM profiles WHERE workspace_id = $1 AND external_id = 'ext-4'`, [
          ws.workspaceId,
        ])
      ).rowCount === 0;
    // A worker starts, registers the sweep, and stops (closing waits for a sweep it may be running): the apply job of
    // the request below then waits in Redis with nobody to take it. (A paused worker may still take the job its
    // blocking fetch waits for, and BullMQ's waiting pause hangs on a cluster.)
    const starter = env.startWorkers([trackIngestJob]);
    await waitFor(
      async () => (await env.ctx.queues.get(TRACK_INGEST_QUEUE).getJobSchedulers(0, -1)).length === 1,
      10_000,
    );
    await starter.close(5_000);
    let running: RunningWorkers | undefined;
    try {
      const res = await post('/users/track', {
        events: [{ external_id: 'ext-3', name: 'in-flight', time: '2026-01-04T00:00:00Z' }],
      });
      expect(res.status).toBe(201);
      // A user-data write takes the same durable path.
      expect((await post('/users/delete', { external_ids: ['ext-4'] })).status).toBe(202);
      // The apply job is added after the answer: flush once it is in Redis, or it would land after the flush.
      await waitFor(async () => (await env.ctx.queues.get(TRACK_INGEST_QUEUE).count()) > 0, 10_000);
      await redis.flush();
      // Workers that were already running when Redis lost everything: their start-up registration is long past.
      running = env.startWorkers([{ ...trackIngestJob, onStart: undefined }]);
      // The job and the sweep went with Redis: the events stay staged, whatever the wait.
      await new Promise((r) => setTimeout(r, 6_000));
      expect(await applied()).toBe(false);
      expect(
        (await env.ctx.pool.query('SELECT 1 FROM ingest_staging WHERE workspace_id = $1', [ws.workspaceId])).rowCount,
      ).toBe(2);
      reconcilers.push(reconciler());
      await waitFor(applied, 30_000);
    } finally {
      await stopAll(running ? [running] : [], reconcilers);
    }
  });
});

describe('schedules after Redis lost them', () => {
  it('re-registers every repeatable job, the scheduled exports and the canvas firings', async () => {
    const segment = (
      await env.ctx.pool.query<{ id: string }>(`SELECT id FROM segments WHERE workspace_id = $1 AND api_id = 'us'`, [
        ws.workspaceId,
      ])
    ).rows[0]!.id;
    const scheduled = (
      await env.ctx.pool.query<{ id: string }>(
        `INSERT INTO scheduled_exports (workspace_id, name, segment_id, cron, fields_to_export) VALUES ($1, 'nightly', $2, '0 3 * * *', ARRAY['external_id']) RETURNING id`,
        [ws.workspaceId, segment],
      )
    ).rows[0]!.id;
    const canvas = (
      await env.ctx.pool.query<{ id: string }>(
        `INSERT INTO canvases (workspace_id, api_id, name) VALUES ($1, 'welcome', 'Welcome') RETURNING id`,
        [ws.workspaceId],
      )
    ).rows[0]!.id;
    const fireAt = new Date(Date.now() + 3_600_000);
    const schedule = (
      await env.ctx.pool.query<{ id: string; version: number }>(
        `INSERT INTO canvas_schedules (canvas_id, schedule_id, dispatch_id, schedule, recipients)
         VALUES ($1, 'later', 'later-dispatch', $2, '[{"external_user_id": "ext-1"}]') RETURNING id, version`,
        [canvas, JSON.stringify({ time: fireAt.toISOString() })],
      )
    ).rows[0]!;
    const workers = [env.startWorkers([scheduledExportJob, canvasScheduleJob, trackIngestJob, workspaceStatsJob])];
    const reconcilers: Reconciler[] = [];
    const schedulers = async () => {
      const keys: string[] = [];
      for (const q of [
        SCHEDULED_EXPORT_QUEUE,
        CANVAS_SCHEDULE_QUEUE,
        TRACK_INGEST_QUEUE,
        WORKSPACE_STATS_QUEUE,
      ] as const) {
        keys.push(...(await env.ctx.queues.get(q).getJobSchedulers(0, -1)).map((s) => String(s.key)));
      }
      return keys.sort();
    };
    const fireJob = () =>
      env.ctx.queues.get(CANVAS_SCHEDULE_QUEUE).getJobState(fireJobId(schedule.id, schedule.version, fireAt));
    try {
      const expected = [
        'canvas-schedule-sweep',
        `export-schedule-${scheduled}`,
        'scheduled-exports-sync',
        'track-ingest-sweep',
        'workspace-stats-sweep',
      ].sort();
      await waitFor(async () => JSON.stringify(await schedulers()) === JSON.stringify(expected), 20_000);
      await waitFor(async () => (await fireJob()) === 'delayed', 20_000);

      await redis.flush();
      expect(await schedulers()).toEqual([]);
      expect(await fireJob()).toBe('unknown');
      reconcilers.push(reconciler());
      await waitFor(async () => JSON.stringify(await schedulers()) === JSON.stringify(expected), 20_000);
      await waitFor(async () => (await fireJob()) === 'delayed', 20_000);
    } finally {
      await stopAll(workers, reconcilers);
    }
  });
});
