import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import {
  createSegment,
  exportedIdCounts,
  insertProfiles,
  readPartFile,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';

/* The rows_per_part extension: fewer, larger (or other-sized) parts, every member still exactly once. */

// Three shards (0-3334, 3334-6668, 6668-10000) of about 2,500 members each.
const MEMBERS = 7_500;
const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '3334' }, workspaces: ['ws'] });

beforeAll(async () => {
  env.startWorkers([segmentExportJob, exportShardJob]);
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'us');
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, MEMBERS);
});

async function exportWith(
  body: Record<string, unknown>,
): Promise<{ dir: string; manifest: ExportManifest; lines: number[] }> {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: 'us',
    fields_to_export: ['external_id'],
    output_format: 'gzip',
    ...body,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const done = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix));
  expect(done.status).toBe('ready');
  const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(done.key_prefix));
  const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
  const lines: number[] = [];
  for (const p of manifest.parts) lines.push((await readPartFile(path.join(dir, p.file))).length);
  return { dir, manifest, lines };
}

describe('rows_per_part', () => {
  it('cuts parts of at most rows_per_part lines, only the last of each shard short, every member once', async () => {
    const { dir, manifest, lines } = await exportWith({ rows_per_part: 1_000 });
    expect(manifest.rows_per_part).toBe(1_000);
    expect(lines.every((n) => n <= 1_000)).toBe(true);
    // At most one short part per shard, and the manifest counts what the files hold.
    expect(lines.filter((n) => n < 1_000).length).toBeLessThanOrEqual(3);
    expect(manifest.parts.map((p) => p.users)).toEqual(lines);
    expect(lines.reduce((a, b) => a + b, 0)).toBe(MEMBERS);
    const counts = await exportedIdCounts(dir, manifest.parts);
    expect(counts.size).toBe(MEMBERS);
    expect([...counts.values()].every((n) => n === 1)).toBe(true);
  });

  it('a part larger than a shard holds the whole shard', async () => {
    const { manifest, lines } = await exportWith({ rows_per_part: 1_000_000 });
    expect(lines).toHaveLength(3);
    expect(lines.reduce((a, b) => a + b, 0)).toBe(MEMBERS);
    expect(manifest.users).toBe(MEMBERS);
  });

  it('without it, the spec holds: parts of exactly 5,000 lines but the last', async () => {
    const { manifest, lines } = await exportWith({});
    expect(manifest).not.toHaveProperty('rows_per_part');
    expect(lines).toEqual([5_000, 2_500]);
  });

  it('refuses values out of bounds or of the wrong type, recording nothing', async () => {
    const before = (await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports')).rows[0].n;
    for (const value of [999, 1_000_001, 1500.5, '5000', -1, true, [1000]]) {
      const res = await requestExport(env, env.ws.apiKey, {
        segment_id: 'us',
        fields_to_export: ['external_id'],
        rows_per_part: value,
      });
      expect(res.status, JSON.stringify(value)).toBe(400);
      expect(String(res.body.message)).toContain('rows_per_part');
    }
    expect((await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports')).rows[0].n).toBe(before);
  });
});
