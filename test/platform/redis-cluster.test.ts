import { Cluster } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { catalogBatchJob } from '../../jobs/catalog-batch.js';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { scanTargets } from '../../src/platform/redis.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { createSegment, insertProfiles, requestExport, waitForExport } from '../helpers/export-fixtures.js';
import { callApi } from '../helpers/http.js';
import { startOwnRedisCluster, type OwnRedisCluster } from '../helpers/own-servers.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/*
 * REDIS_CLUSTER_NODES on a real 3-master Redis Cluster of this file's own: the service runs on it, and every key it
 * writes (queues, flows, locks, rate-limit windows, the reconciler's) lies under the hash-tagged prefix, in one
 * slot, so that no script or BullMQ command ever spans slots (CROSSSLOT). `npm run test:cluster` runs the behaviour
 * of every queue and script on a cluster; this file checks the layout that makes them work.
 */

let cluster: OwnRedisCluster;
let env: TestEnv;
let ws: SeededWorkspace;

beforeAll(async () => {
  cluster = await startOwnRedisCluster();
  env = await createTestEnv({
    REDIS_URL: 'redis://127.0.0.1:1',
    REDIS_CLUSTER_NODES: cluster.nodes,
    EXPORT_SHARD_BUCKETS: '2500',
  });
  env.startWorkers([segmentExportJob, exportShardJob, exportCallbackJob, trackIngestJob, catalogBatchJob]);
  ws = await seedWorkspace(env.ctx.pool);
  await createSegment(env.ctx.pool, ws.workspaceId, 'us');
  await insertProfiles(env.ctx.pool, ws.workspaceId, 1, 2_000);
}, 120_000);
afterAll(async () => {
  await env?.close();
  await cluster?.close();
});

describe('the service on a Redis Cluster', () => {
  it('connects as a cluster client to three masters', async () => {
    expect(env.ctx.redis).toBeInstanceOf(Cluster);
    expect(scanTargets(env.ctx.redis)).toHaveLength(3);
  });

  it('runs an export with fan-out, a locked second request, tracking and rate limits, every key in one slot', async () => {
    const first = await requestExport(env, ws.apiKey, { segment_id: 'us', fields_to_export: ['external_id'] });
    expect(first.status).toBe(201);
    // The lock script takes the segment and company keys at once: on a cluster it only runs if they share a slot.
    const second = await requestExport(env, ws.apiKey, { segment_id: 'us', fields_to_export: ['external_id'] });
    expect(second.status).toBe(429);
    const status = await waitForExport(env, ws.apiKey, String(first.body.object_prefix));
    expect(status.status).toBe('ready');
    const { rows: done } = await env.ctx.pool.query<{ shards: number; users: number }>(
      `SELECT count(*)::int AS shards, sum(users)::int AS users FROM export_shards_done d JOIN exports e ON e.id = d.export_id WHERE e.object_prefix = $1`,
      [first.body.object_prefix],
    );
    // Four shards (2,500 buckets each) ran as children of one flow, every member once.
    expect(done[0]).toEqual({ shards: 4, users: 2_000 });

    const tracked = await callApi(env.app, 'POST', '/users/track', {
      key: ws.apiKey,
      body: { attributes: [{ external_id: 'ext-1', first_name: 'Clustered' }] },
    });
    expect(tracked.status, JSON.stringify(tracked.body)).toBe(201);
    expect(tracked.headers['x-ratelimit-remaining']).toBeDefined();
    for (let i = 0; i < 100; i++) {
      const { rows } = await env.ctx.pool.query(
        `SELECT first_name FROM profiles WHERE workspace_id = $1 AND external_id = 'ext-1'`,
        [ws.workspaceId],
      );
      if (rows[0]?.first_name === 'Clustered') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const { rows } = await env.ctx.pool.query(
      `SELECT first_name FROM profiles WHERE workspace_id = $1 AND external_id = 'ext-1'`,
      [ws.workspaceId],
    );
    expect(rows[0]?.first_name).toBe('Clustered');

    const keys: string[] = [];
    for (const node of scanTargets(env.ctx.redis)) {
      let cursor = '0';
      do {
        const [next, found] = await node.scan(cursor, 'COUNT', 1000);
        cursor = next;
        keys.push(...found);
      } while (cursor !== '0');
    }
    expect(keys.length).toBeGreaterThan(10);
    const prefix = `{${env.config.REDIS_PREFIX}}:`;
    expect(keys.filter((k) => !k.startsWith(prefix))).toEqual([]);
    // Queues (bull), rate-limit windows (rls) and export locks or their traces are all there, in one slot.
    expect(keys.some((k) => k.startsWith(`${prefix}bull:`))).toBe(true);
    expect(keys.some((k) => k.startsWith(`${prefix}rls:`))).toBe(true);
    const slots = new Set<number>();
    for (const key of keys) slots.add(Number(await env.ctx.redis.cluster('KEYSLOT', key)));
    expect(slots.size).toBe(1);
  });
});
