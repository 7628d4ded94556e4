import { readFile, stat } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { ScheduledExportSchema } from '../../src/features/workspace/schema.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, exportedIdCounts, requestExport, waitForExport } from '../helpers/export-fixtures.js';

/*
 * part_target_mb: parts cut by compressed size. Each member carries 1 KiB of random hex (about 512 bytes compressed,
 * whatever the level), so 90,000 members make about 46 MiB: with two shards and a 16 MiB target, each shard cuts
 * full parts and one short last part.
 */
const MEMBERS = 90_000;
const TARGET_MB = 16;
const MIB = 1024 * 1024;
const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '5000' }, workspaces: ['ws'] });

beforeAll(async () => {
  env.startWorkers([segmentExportJob, exportShardJob]);
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'everyone', { all: [] });
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, custom_attributes)
     SELECT $1, 'svc-' || g, 'ext-' || g, ((g::bigint * 7919) % 10000)::int,
            jsonb_build_object('blob', (SELECT string_agg(md5(random()::text || g || i), '') FROM generate_series(1, 32) i))
       FROM generate_series(1, $2::int) g`,
    [env.ws.workspaceId, MEMBERS],
  );
}, 120_000);

async function exportBySize(format: 'gzip' | 'zip') {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: 'everyone',
    fields_to_export: ['external_id', 'custom_attributes'],
    output_format: format,
    part_target_mb: TARGET_MB,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const done = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix), 120_000);
  expect(done.status, JSON.stringify(done)).toBe('ready');
  const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(done.key_prefix));
  const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
  const { rows } = await env.ctx.pool.query<{ shard: number; part_index: number; bytes: string; object_key: string }>(
    `SELECT p.shard, p.part_index, p.bytes, p.object_key FROM export_parts p JOIN exports e ON e.id = p.export_id
      WHERE e.object_prefix = $1 ORDER BY p.shard, p.part_index`,
    [String(res.body.object_prefix)],
  );
  return { dir, manifest, parts: rows };
}

describe('part_target_mb', () => {
  for (const format of ['gzip', 'zip'] as const) {
    it(`${format}: every part within 10% of the target but each shard's last, every member once`, async () => {
      const { dir, manifest, parts } = await exportBySize(format);
      expect(manifest.part_target_mb).toBe(TARGET_MB);
      expect(manifest).not.toHaveProperty('rows_per_part');
      const shards = [...new Set(parts.map((p) => p.shard))];
      expect(shards).toEqual([0, 1]);
      let full = 0;
      for (const shard of shards) {
        const own = parts.filter((p) => p.shard === shard);
        expect(own.length).toBeGreaterThanOrEqual(2);
        for (const [i, p] of own.entries()) {
          const bytes = Number(p.bytes);
          // What the manifest and the export_parts row say is what the file holds.
          expect((await stat(path.join(dir, path.basename(p.object_key)))).size).toBe(bytes);
          if (i < own.length - 1) {
            expect(bytes / MIB, `shard ${shard} part ${i}`).toBeGreaterThanOrEqual(TARGET_MB * 0.9);
            expect(bytes / MIB, `shard ${shard} part ${i}`).toBeLessThanOrEqual(TARGET_MB * 1.1);
            full++;
          } else {
            expect(bytes / MIB, `shard ${shard}'s last part`).toBeLessThanOrEqual(TARGET_MB * 1.1);
          }
        }
      }
      expect(full).toBeGreaterThanOrEqual(2);
      expect(manifest.parts.reduce((n, p) => n + p.bytes, 0)).toBe(parts.reduce((n, p) => n + Number(p.bytes), 0));
      const counts = await exportedIdCounts(dir, manifest.parts);
      expect(counts.size).toBe(MEMBERS);
      expect([...counts.values()].every((n) => n === 1)).toBe(true);
      expect(manifest.parts.reduce((n, p) => n + p.users, 0)).toBe(MEMBERS);
    }, 180_000);
  }

  it('refuses a target out of bounds, beside rows_per_part, or for Parquet, naming it and recording nothing', async () => {
    const before = (await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports')).rows[0].n;
    const cases: Array<[Record<string, unknown>, RegExp]> = [
      [{ part_target_mb: 15 }, /part_target_mb must be at least 16/],
      [{ part_target_mb: 1_025 }, /part_target_mb must be at most 1024/],
      [{ part_target_mb: 16.5 }, /part_target_mb must be a whole number/],
      [{ part_target_mb: '64' }, /part_target_mb must be a whole number/],
      [{ part_target_mb: 64, rows_per_part: 10_000 }, /rows_per_part and part_target_mb are alternatives/],
      [{ part_target_mb: 64, output_format: 'parquet' }, /part_target_mb applies to gzip and zip/],
    ];
    for (const [extra, message] of cases) {
      const res = await requestExport(env, env.ws.apiKey, {
        segment_id: 'everyone',
        fields_to_export: ['external_id'],
        output_format: 'gzip',
        ...extra,
      });
      expect(res.status, JSON.stringify(extra)).toBe(400);
      expect(String(res.body.message)).toMatch(message);
    }
    expect((await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports')).rows[0].n).toBe(before);
  });

  it('a scheduled export declares it as the request does, and the workspace file refuses what the API would', () => {
    const base = {
      name: 'nightly',
      segment: 'everyone',
      cron: '0 3 * * *',
      fields_to_export: ['external_id'],
      output_format: 'gzip',
    };
    expect(ScheduledExportSchema.safeParse({ ...base, part_target_mb: 128 }).success).toBe(true);
    for (const [extra, message] of [
      [{ part_target_mb: 128, rows_per_part: 10_000 }, /alternatives/],
      [{ part_target_mb: 128, output_format: 'parquet' }, /gzip and zip/],
      [{ part_target_mb: 8 }, /at least 16/],
    ] as const) {
      const parsed = ScheduledExportSchema.safeParse({ ...base, ...extra });
      expect(parsed.success).toBe(false);
      expect(parsed.error!.issues.map((i) => i.message).join('; ')).toMatch(message);
    }
  });
});
