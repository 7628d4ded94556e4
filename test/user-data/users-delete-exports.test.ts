import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import {
  createSegment,
  insertProfiles,
  readPartFile,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';
import { bearer } from '../helpers/seed.js';

/**
 * A deleted user, as a warehouse sees it: gone from /users/export/ids and from the next full export, listed once in
 * the next incremental export's removed- parts; and an export running while deletes are applied holds each user whole
 * or not at all, never twice.
 */

// Small shards: an export is many transactions, each its own snapshot, so deletes land between them.
const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '500' }, workspaces: ['ws'] });
const FIELDS = ['external_id', 'service_id', 'first_name', 'email', 'custom_events', 'devices'];
const USERS = 4_000;

beforeAll(async () => {
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'us');
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, USERS);
  env.startWorkers([segmentExportJob, exportShardJob, trackIngestJob]);
}, 120_000);

async function post(url: string, body: unknown) {
  const res = await env.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBeLessThan(300);
  return res.json() as Record<string, unknown>;
}

async function startExport(body: Record<string, unknown> = {}): Promise<string> {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: 'us',
    fields_to_export: FIELDS,
    output_format: 'gzip',
    ...body,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  return res.body.object_prefix as string;
}

async function linesOf(prefix: string): Promise<{
  users: Array<Record<string, unknown>>;
  removed: Array<Record<string, unknown>>;
  manifest: ExportManifest;
}> {
  const status = await waitForExport(env, env.ws.apiKey, prefix, 120_000);
  expect(status.status, JSON.stringify(status)).toBe('ready');
  const file = (key: string) => path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), key);
  const manifest = JSON.parse(await readFile(file(status.manifest_key as string), 'utf8')) as ExportManifest;
  const out = { users: [] as Array<Record<string, unknown>>, removed: [] as Array<Record<string, unknown>>, manifest };
  for (const part of manifest.parts)
    for (const line of await readPartFile(file(part.key))) out[part.kind].push(JSON.parse(line));
  return out;
}

const staged = async () =>
  (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_staging')).rows[0]!.n;
const ext = (n: number) => `ext-${n}`;
const counts = (lines: Array<Record<string, unknown>>) => {
  const m = new Map<string, number>();
  for (const l of lines) m.set(l.external_id as string, (m.get(l.external_id as string) ?? 0) + 1);
  return m;
};

describe('deleted users and exports', () => {
  it('gone from export by id and the next full export, listed once in the next incremental one', async () => {
    const base = await startExport();
    const full = await linesOf(base);
    expect(full.users).toHaveLength(USERS);

    const deleted = Array.from({ length: 100 }, (_, i) => ext(1 + i * 7));
    for (let i = 0; i < deleted.length; i += 50)
      await post('/users/delete', { external_ids: deleted.slice(i, i + 50) });
    await waitFor(async () => (await staged()) === 0, 30_000);

    const byId = await post('/users/export/ids', {
      external_ids: deleted.slice(0, 50),
      fields_to_export: ['external_id'],
    });
    expect(byId).toEqual({ users: [], invalid_user_ids: deleted.slice(0, 50), message: 'success' });

    const next = await linesOf(await startExport());
    const present = counts(next.users);
    expect(next.users).toHaveLength(USERS - deleted.length);
    for (const id of deleted) expect(present.has(id), id).toBe(false);

    const delta = await linesOf(await startExport({ changes_since: base }));
    expect(delta.users).toEqual([]);
    expect(delta.removed.map((r) => r.external_id).sort()).toEqual([...deleted].sort());
    for (const r of delta.removed)
      expect(r).toEqual({ external_id: r.external_id, service_id: `svc-${(r.external_id as string).slice(4)}` });
  }, 240_000);

  it('an export running while users are deleted holds each of them whole or not at all, and every other user once', async () => {
    const doomed = Array.from({ length: 600 }, (_, i) => ext(2 + i * 6));
    const prefix = await startExport();
    // Deletes applied while the export's shards run.
    for (let i = 0; i < doomed.length; i += 50) {
      await post('/users/delete', { external_ids: doomed.slice(i, i + 50) });
      await new Promise((r) => setTimeout(r, 20));
    }
    const during = await linesOf(prefix);
    await waitFor(async () => (await staged()) === 0, 30_000);
    const seen = counts(during.users);
    const doomedSet = new Set(doomed);
    const alive = (
      await env.ctx.pool.query<{ external_id: string }>(`SELECT external_id FROM profiles WHERE workspace_id = $1`, [
        env.ws.workspaceId,
      ])
    ).rows.map((r) => r.external_id);
    for (const id of alive) expect(seen.get(id), id).toBe(1);
    let inExport = 0;
    for (const id of doomed) {
      const n = seen.get(id) ?? 0;
      expect(n, id).toBeLessThanOrEqual(1);
      inExport += n;
    }
    // Whole: a deleted user's line, when there, carries every field its profile had.
    for (const line of during.users) {
      if (!doomedSet.has(line.external_id as string)) continue;
      expect(Object.keys(line).sort()).toEqual(
        expect.arrayContaining(['custom_events', 'email', 'external_id', 'service_id']),
      );
    }
    expect(during.users).toHaveLength(alive.length + inExport);
  }, 240_000);
});
