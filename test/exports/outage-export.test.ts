import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { startReconciler } from '../../src/runtime/reconcile/reconciler.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { startWorkers } from '../../src/runtime/workers.js';
import { waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import {
  createSegment,
  exportedExternalIds,
  exportStatus,
  insertProfiles,
  readPartFile,
  requestExport,
  startCallbackReceiver,
} from '../helpers/export-fixtures.js';
import { startOwnPostgres, startOwnRedis, type OwnPostgres, type OwnRedis } from '../helpers/own-servers.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

// Servers of the test's own, restarted under a running export: PostgreSQL (fast and immediate stops) and Redis
// (killed and started empty). What a user sees: the export ends ready, every member exactly once, with progress that
// never goes back, and a callback whose download link names the API's own address.
let pg: OwnPostgres;
let redis: OwnRedis;
let env: TestEnv;
let ws: SeededWorkspace;
let receiver: Awaited<ReturnType<typeof startCallbackReceiver>>;
let receiverUrl: string;
let callbacks: Array<Record<string, unknown>> = [];
const MEMBERS = 30_000;
const API_PORT = 4567;

beforeAll(async () => {
  [pg, redis] = await Promise.all([startOwnPostgres(), startOwnRedis()]);
  // The API of this test listens (for its links) on another port than a worker process would assume.
  env = await createTestEnv({
    DATABASE_URL: pg.url,
    REDIS_URL: redis.url,
    PORT: String(API_PORT),
    EXPORT_SHARD_BUCKETS: '250',
    EXPORT_SHARD_ATTEMPTS: '10',
    CALLBACK_ALLOW_PRIVATE: 'true',
    DATABASE_CONNECT_TIMEOUT_MS: '2000',
  });
  ws = await seedWorkspace(env.ctx.pool);
  for (const seg of ['fast', 'immediate', 'redis', 'delta']) await createSegment(env.ctx.pool, ws.workspaceId, seg);
  await insertProfiles(env.ctx.pool, ws.workspaceId, 1, MEMBERS);
  receiver = await startCallbackReceiver();
  receiverUrl = receiver.url;
  callbacks = receiver.received;
}, 120_000);
afterAll(async () => {
  receiver?.close();
  await env?.close();
  await Promise.all([pg?.close(), redis?.close()]);
});

async function shardsEnded(prefix: string): Promise<number> {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM export_shards_done d JOIN exports e ON e.id = d.export_id WHERE e.object_prefix = $1',
    [prefix],
  );
  return rows[0]!.n;
}

const exportedIds = (keyPrefix: string) =>
  exportedExternalIds(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws), keyPrefix));

/** Runs an export of `segment`, breaks a server once a few of its 40 shards have ended, and checks what users see. */
async function exportThrough(segment: string, fault: () => Promise<void>) {
  // Workers as a separate worker process would have them: their own idea of the API's port (the default, 3000).
  const workerCtx = { ...env.ctx, config: { ...env.config, PORT: 3000 } };
  const workers = startWorkers(workerCtx, [segmentExportJob, exportShardJob, exportCallbackJob]);
  const reconciler = startReconciler(workerCtx, { intervalMs: 1_000 });
  try {
    const started = await requestExport(env, ws.apiKey, {
      segment_id: segment,
      fields_to_export: ['external_id'],
      callback_endpoint: receiverUrl,
    });
    expect(started.status).toBe(201);
    const prefix = String(started.body.object_prefix);
    await waitFor(async () => (await shardsEnded(prefix)) >= 3, 60_000, 10);
    await fault();

    const seen: number[] = [];
    let status: Record<string, unknown> = {};
    await waitFor(
      async () => {
        const read = await exportStatus(env, ws.apiKey, prefix).catch(() => null);
        if (!read || read.status !== 200) return false; // a 503 while a server is away
        status = read.body;
        seen.push(Number(status.users_done));
        return status.status === 'ready' || status.status === 'failed';
      },
      120_000,
      100,
    );
    expect(status).toMatchObject({ status: 'ready', users_done: MEMBERS });
    expect(seen).toEqual([...seen].sort((a, b) => a - b));
    const ids = await exportedIds(String(status.key_prefix));
    expect(ids).toHaveLength(MEMBERS);
    expect(new Set(ids).size).toBe(MEMBERS);
    await waitFor(() => callbacks.some((c) => String(c.url ?? '').includes(prefix)), 30_000);
    const url = String(callbacks.find((c) => String(c.url ?? '').includes(prefix))!.url);
    expect(url.startsWith(`http://127.0.0.1:${API_PORT}/downloads/segment-export/${prefix}.zip?signature=`)).toBe(true);
  } finally {
    await reconciler.stop();
    await workers.close(5_000);
  }
}

describe('an export while its servers restart', () => {
  it('PostgreSQL stopped fast and started again mid-export', async () => {
    await exportThrough('fast', async () => {
      await pg.stop('fast');
      await new Promise((r) => setTimeout(r, 1_000));
      await pg.start();
    });
  });

  it('PostgreSQL stopped immediately (as a crash) and started again mid-export', async () => {
    await exportThrough('immediate', async () => {
      await pg.stop('immediate');
      await new Promise((r) => setTimeout(r, 1_000));
      await pg.start();
    });
  });

  it('Redis killed and started again, empty, mid-export', async () => {
    await exportThrough('redis', async () => {
      await redis.kill();
      await new Promise((r) => setTimeout(r, 1_000));
      await redis.start();
    });
  });

  // Last: it edits and deletes profiles, which the exports above count.
  it('PostgreSQL crashed and started again mid incremental export: each changed and removed member once', async () => {
    const workers = startWorkers(env.ctx, [segmentExportJob, exportShardJob]);
    const reconciler = startReconciler(env.ctx, { intervalMs: 1_000 });
    const waitReady = async (prefix: string) => {
      let status: Record<string, unknown> = {};
      await waitFor(
        async () => {
          const read = await exportStatus(env, ws.apiKey, prefix).catch(() => null);
          if (!read || read.status !== 200) return false;
          status = read.body;
          return status.status === 'ready' || status.status === 'failed';
        },
        120_000,
        100,
      );
      return status;
    };
    try {
      const fields = ['external_id', 'custom_attributes'];
      const base = await requestExport(env, ws.apiKey, {
        segment_id: 'delta',
        fields_to_export: fields,
        output_format: 'gzip',
      });
      expect((await waitReady(String(base.body.object_prefix))).status).toBe('ready');
      await env.ctx.pool.query(
        `UPDATE profiles SET custom_attributes = custom_attributes || '{"tier": "edited"}' WHERE external_id = ANY($1)`,
        [Array.from({ length: 12_000 }, (_, i) => `ext-${i + 1}`)],
      );
      await env.ctx.pool.query(`DELETE FROM profiles WHERE external_id = ANY($1)`, [
        Array.from({ length: 500 }, (_, i) => `ext-${20_001 + i}`),
      ]);

      const delta = await requestExport(env, ws.apiKey, {
        segment_id: 'delta',
        fields_to_export: fields,
        output_format: 'gzip',
        changes_since: String(base.body.object_prefix),
      });
      expect(delta.status).toBe(201);
      const prefix = String(delta.body.object_prefix);
      await waitFor(async () => (await shardsEnded(prefix)) >= 1, 60_000, 5);
      // The crash lands while shards are still to run (40 in all), not after the export.
      expect(await shardsEnded(prefix)).toBeLessThan(40);
      await pg.stop('immediate');
      await new Promise((r) => setTimeout(r, 1_000));
      await pg.start();

      const status = await waitReady(prefix);
      expect(status).toMatchObject({ status: 'ready', users_done: 12_000, removed_done: 500 });
      const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws), String(status.key_prefix));
      const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
      const idsOf = async (kind: 'users' | 'removed') => {
        const ids: string[] = [];
        for (const p of manifest.parts.filter((x) => x.kind === kind))
          for (const l of await readPartFile(path.join(dir, p.file))) ids.push(JSON.parse(l).external_id);
        return ids.sort();
      };
      const users = await idsOf('users');
      expect(users).toEqual(Array.from({ length: 12_000 }, (_, i) => `ext-${i + 1}`).sort());
      expect(await idsOf('removed')).toEqual(Array.from({ length: 500 }, (_, i) => `ext-${20_001 + i}`).sort());
    } finally {
      await reconciler.stop();
      await workers.close(5_000);
    }
  });
});
