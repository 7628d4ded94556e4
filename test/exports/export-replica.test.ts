import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import {
  createSegment,
  exportedExternalIds,
  insertProfiles,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';
import { startOwnPostgres, startOwnReplica, type OwnPostgres } from '../helpers/own-servers.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/*
 * Exports from a hot standby (EXPORT_DATABASE_URL): a primary and a streaming replica of the test's own (pg_basebackup
 * -R), never the shared server. The replica logs every statement, which is how the test sees where members were read.
 */

const MEMBERS = 3_000;
const MAX_LAG_SECONDS = 3;

let primary: OwnPostgres;
let replica: OwnPostgres;
let env: TestEnv;
let ws: SeededWorkspace;
let replicaSql: pg.Client;
let next = MEMBERS + 1;

beforeAll(async () => {
  primary = await startOwnPostgres();
  replica = await startOwnReplica(primary, { log_statement: 'all' });
  env = await createTestEnv({
    DATABASE_URL: primary.url,
    EXPORT_DATABASE_URL: replica.url,
    EXPORT_MAX_REPLICA_LAG_SECONDS: String(MAX_LAG_SECONDS),
    // Two shards, so that a shard's choice is made per shard.
    EXPORT_SHARD_BUCKETS: '5000',
  });
  env.startWorkers([segmentExportJob, exportShardJob]);
  ws = await seedWorkspace(env.ctx.pool);
  await createSegment(env.ctx.pool, ws.workspaceId, 'us-users');
  await insertProfiles(env.ctx.pool, ws.workspaceId, 1, MEMBERS);
  replicaSql = new pg.Client({ connectionString: replica.url });
  await replicaSql.connect();
}, 120_000);
afterAll(async () => {
  await replicaSql?.end().catch(() => {});
  await env?.close();
  await replica?.close();
  await primary?.close();
});

async function addMembers(count: number): Promise<void> {
  await insertProfiles(env.ctx.pool, ws.workspaceId, next, count);
  next += count;
}

async function exportNow(changesSince?: string): Promise<{ ids: string[]; manifest: ExportManifest }> {
  const res = await requestExport(env, ws.apiKey, {
    segment_id: 'us-users',
    fields_to_export: ['external_id', 'first_name'],
    output_format: 'gzip',
    ...(changesSince ? { changes_since: changesSince } : {}),
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const status = await waitForExport(env, ws.apiKey, String(res.body.object_prefix), 90_000);
  expect(status.status).toBe('ready');
  const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws), String(status.key_prefix));
  const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
  return { ids: await exportedExternalIds(dir), manifest };
}

const expectedIds = () => Array.from({ length: next - 1 }, (_, i) => `ext-${i + 1}`).sort();
// Each shard read from the replica runs two COPYs there: its lines, and its member list (piped to the primary).
const copiesOnReplica = async () =>
  (await readFile(replica.logFile, 'utf8')).split('\n').filter((l) => l.includes('statement: COPY (')).length;

async function replicaCaughtUp(): Promise<void> {
  const { rows } = await env.ctx.pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
  for (let i = 0; i < 200; i++) {
    const r = await replicaSql.query<{ ok: boolean }>('SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', [
      rows[0]!.lsn,
    ]);
    if (r.rows[0]!.ok) return;
    await new Promise((res) => setTimeout(res, 50));
  }
  throw new Error('the replica did not catch up');
}

describe('segment export with EXPORT_DATABASE_URL on a streaming replica', () => {
  it('reads every shard from the replica, exactly, and the manifest says how fresh it is', async () => {
    await replicaCaughtUp();
    const copiesBefore = await copiesOnReplica();
    const { ids, manifest } = await exportNow();
    expect(ids.sort()).toEqual(expectedIds());
    expect(await copiesOnReplica()).toBe(copiesBefore + 4);
    expect(manifest.read_from).toMatchObject({
      source: 'replica',
      primary_lsn_at_request: expect.stringMatching(/^[0-9A-F]+\/[0-9A-F]+$/),
    });
    const { rows } = await replicaSql.query<{ ok: boolean }>('SELECT $1::pg_lsn >= $2::pg_lsn AS ok', [
      manifest.read_from!.replica_replay_lsn,
      manifest.read_from!.primary_lsn_at_request,
    ]);
    expect(rows[0]!.ok).toBe(true);
    expect(Date.parse(manifest.read_from!.replica_replay_time!)).toBeGreaterThan(Date.now() - 120_000);
  });

  it('waits for a lagging replica to replay what was committed before the request, then reads from it', async () => {
    await replicaSql.query('SELECT pg_wal_replay_pause()');
    await addMembers(25);
    const copiesBefore = await copiesOnReplica();
    // Replay comes back within the allowed lag: the shards wait for it rather than export without the 25.
    const resume = setTimeout(() => void replicaSql.query('SELECT pg_wal_replay_resume()'), 1_000);
    try {
      const { ids, manifest } = await exportNow();
      expect(ids.sort()).toEqual(expectedIds());
      expect(manifest.read_from?.source).toBe('replica');
      expect(await copiesOnReplica()).toBe(copiesBefore + 4);
    } finally {
      clearTimeout(resume);
      await replicaSql.query('SELECT pg_wal_replay_resume()');
    }
  });

  it('reads from the primary when the replica stays behind longer than EXPORT_MAX_REPLICA_LAG_SECONDS', async () => {
    await replicaCaughtUp();
    await replicaSql.query('SELECT pg_wal_replay_pause()');
    try {
      await addMembers(40);
      const copiesBefore = await copiesOnReplica();
      const { ids, manifest } = await exportNow();
      // Exact all the same: the 40 new members are in, read from the primary.
      expect(ids.sort()).toEqual(expectedIds());
      expect(manifest.read_from).toMatchObject({ source: 'primary' });
      expect(await copiesOnReplica()).toBe(copiesBefore);
    } finally {
      await replicaSql.query('SELECT pg_wal_replay_resume()');
    }
  });

  it('reads from the primary when the replica is down, and from the replica again once it is back', async () => {
    await replicaSql.end();
    await replica.stop('immediate');
    try {
      await addMembers(10);
      const { ids, manifest } = await exportNow();
      expect(ids.sort()).toEqual(expectedIds());
      expect(manifest.read_from?.source).toBe('primary');
    } finally {
      await replica.start();
      replicaSql = new pg.Client({ connectionString: replica.url });
      await replicaSql.connect();
    }
    await replicaCaughtUp();
    const { ids, manifest } = await exportNow();
    expect(ids.sort()).toEqual(expectedIds());
    expect(manifest.read_from?.source).toBe('replica');
  });

  it('reads an incremental export from the replica: the changes from the log, its member changes written to the primary', async () => {
    await replicaCaughtUp();
    const base = await exportNow();
    const db = env.ctx.pool;
    await db.query(`UPDATE profiles SET first_name = 'on-replica' WHERE workspace_id = $1 AND external_id = ANY($2)`, [
      ws.workspaceId,
      ['ext-1', 'ext-2', 'ext-3'],
    ]);
    await db.query(`UPDATE profiles SET country = 'CA' WHERE workspace_id = $1 AND external_id = ANY($2)`, [
      ws.workspaceId,
      ['ext-4', 'ext-5'],
    ]);
    const joined = next;
    await addMembers(2);
    await replicaCaughtUp();
    const copiesBefore = await copiesOnReplica();
    const delta = await exportNow(base.manifest.object_prefix);
    expect(delta.manifest.read_from?.source).toBe('replica');
    // The ids of every line: the changed and joined users, and the two removed ones.
    expect(delta.ids.sort()).toEqual(
      ['ext-1', 'ext-2', 'ext-3', 'ext-4', 'ext-5', `ext-${joined}`, `ext-${joined + 1}`].sort(),
    );
    expect(delta.manifest.users).toBe(5);
    expect(delta.manifest.removed).toBe(2);
    // One shard (a small delta is cut into fewer shards), three COPYs there: lines, removed lines, member changes.
    expect(await copiesOnReplica()).toBe(copiesBefore + 3);
    const { rows } = await db.query<{ profile_id: string; is_member: boolean }>(
      `SELECT p.external_id, c.is_member FROM export_member_changes c JOIN exports e ON e.id = c.export_id JOIN profiles p ON p.id = c.profile_id
        WHERE e.object_prefix = $1 ORDER BY p.external_id`,
      [delta.manifest.object_prefix],
    );
    expect(rows).toEqual(
      [
        { external_id: 'ext-4', is_member: false },
        { external_id: 'ext-5', is_member: false },
        { external_id: `ext-${joined}`, is_member: true },
        { external_id: `ext-${joined + 1}`, is_member: true },
      ].sort((a, b) => (a.external_id < b.external_id ? -1 : 1)),
    );
    // Relative to it, read through its layers on the replica: nothing changed.
    await replicaCaughtUp();
    const none = await exportNow(delta.manifest.object_prefix);
    expect(none.ids).toEqual([]);
    expect(none.manifest.removed).toBe(0);
  });
});
