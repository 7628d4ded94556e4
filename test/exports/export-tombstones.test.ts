import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { Reconciler } from '../../src/runtime/reconcile/reconciler.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
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
 * Tombstones (docs/privacy.md) name deleted users for incremental exports, and live at most TOMBSTONE_RETENTION_DAYS
 * (30 by default) whatever export is kept: the reconciler's pass removes older ones. A delta whose base is older than
 * that can no longer name everyone deleted since, so it falls back to a full export (no changes_since in its
 * manifest: a loader replaces the table), which is right whatever was deleted.
 */

const env = useTestEnv({ workspaces: ['ws'] });
const FIELDS = ['external_id', 'service_id', 'first_name'];

beforeAll(async () => {
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'all', { all: [] });
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 60);
  env.startWorkers([segmentExportJob, exportShardJob]);
});

interface Exported {
  manifest: ExportManifest;
  users: Array<Record<string, unknown>>;
  removed: Array<Record<string, unknown>>;
}

async function runExport(body: Record<string, unknown> = {}): Promise<Exported> {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: 'all',
    fields_to_export: FIELDS,
    output_format: 'gzip',
    ...body,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const status = await waitForExport(env, env.ws.apiKey, res.body.object_prefix as string);
  expect(status.status, JSON.stringify(status)).toBe('ready');
  const file = (key: string) => path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), key);
  const manifest = JSON.parse(await readFile(file(status.manifest_key as string), 'utf8')) as ExportManifest;
  const out: Exported = { manifest, users: [], removed: [] };
  for (const part of manifest.parts)
    for (const line of await readPartFile(file(part.key))) out[part.kind].push(JSON.parse(line));
  return out;
}

/** A warehouse table by service_id, loaded as docs/export.md says: a full export replaces it, a delta applies. */
function load(table: Map<string, unknown> | null, e: Exported): Map<string, unknown> {
  const next = e.manifest.changes_since ? new Map(table!) : new Map<string, unknown>();
  for (const r of e.removed) next.delete(r.service_id as string);
  for (const u of e.users) next.set(u.service_id as string, u.external_id);
  return next;
}

async function members(): Promise<string[]> {
  const { rows } = await env.ctx.pool.query<{ service_id: string }>(
    `SELECT service_id FROM profiles WHERE workspace_id = $1 ORDER BY service_id`,
    [env.ws.workspaceId],
  );
  return rows.map((r) => r.service_id);
}

async function deleteUser(externalId: string) {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/delete',
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
    payload: JSON.stringify({ external_ids: [externalId] }),
  });
  expect(res.statusCode).toBe(202);
  await drainThrough(env.ctx.pool, undefined, {
    maxRows: 100,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });
}

/** Moves an export and the tombstones of the given users `days` into the past. */
async function age(e: Exported, days: number, deleted: string[]) {
  const ago = `${days} days`;
  await env.ctx.pool.query(
    `UPDATE exports SET created_at = created_at - $2::interval, finished_at = finished_at - $2::interval WHERE object_prefix = $1`,
    [e.manifest.object_prefix, ago],
  );
  await env.ctx.pool.query(
    `UPDATE profile_tombstones SET deleted_at = deleted_at - $2::interval WHERE workspace_id = $1 AND external_id = ANY($3)`,
    [env.ws.workspaceId, ago, deleted],
  );
}

const tombstones = async (externalIds: string[]) =>
  (
    await env.ctx.pool.query<{ external_id: string }>(
      `SELECT external_id FROM profile_tombstones WHERE workspace_id = $1 AND external_id = ANY($2) ORDER BY external_id`,
      [env.ws.workspaceId, externalIds],
    )
  ).rows.map((r) => r.external_id);

async function reconcilerPass() {
  const reconciler = new Reconciler(env.ctx, { intervalMs: 3_600_000 });
  const result = await reconciler.passNow();
  expect(result.failed ?? []).toEqual([]);
}

describe('tombstones, bounded by TOMBSTONE_RETENTION_DAYS', () => {
  it('are removed past the bound though the export they serve is kept; a delta relative to it falls back to a full export', async () => {
    const base = await runExport();
    let table = load(null, base);
    await deleteUser('ext-5');
    await deleteUser('ext-6');
    await age(base, 31, ['ext-5', 'ext-6']);
    expect(await tombstones(['ext-5', 'ext-6'])).toEqual(['ext-5', 'ext-6']);

    await reconcilerPass();
    // The base is the segment's latest ready export, so its member list stays; its tombstones do not.
    expect(await tombstones(['ext-5', 'ext-6'])).toEqual([]);

    const next = await runExport({ changes_since: base.manifest.object_prefix });
    expect(next.manifest.changes_since).toBeUndefined();
    expect(next.removed).toEqual([]);
    table = load(table, next);
    expect([...table.keys()].sort()).toEqual(await members());
    expect(table.has('svc-5')).toBe(false);
  });

  it('are kept within the bound, and a delta relative to a base within it names the users deleted since', async () => {
    const base = await runExport();
    let table = load(null, base);
    await deleteUser('ext-7');
    // Younger than the bound, and than the member lists' retention (14 days) that would otherwise drop this base.
    await age(base, 10, ['ext-7']);
    await reconcilerPass();
    expect(await tombstones(['ext-7'])).toEqual(['ext-7']);

    const next = await runExport({ changes_since: base.manifest.object_prefix });
    expect(next.manifest.changes_since).toBe(base.manifest.object_prefix);
    expect(next.removed).toEqual([{ external_id: 'ext-7', service_id: 'svc-7' }]);
    table = load(table, next);
    expect([...table.keys()].sort()).toEqual(await members());
  });
});
