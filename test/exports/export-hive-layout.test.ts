import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { duckdb } from '../../src/platform/lib/duckdb.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import {
  CONTROL_FILES,
  createSegment,
  insertProfiles,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';

/*
 * `"layout": "hive"`: keys
 * `segment-export/segment_id=<id>/export_date=<YYYY-MM-DD>/export_id=<object_prefix>/part-<NNNNN>.<ext>`, read back as
 * one partitioned table by DuckDB's hive_partitioning, with the three partition columns.
 */

const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '2500' }, workspaces: ['ws'] });
const SEGMENT = 'us:all';
const MEMBERS = 12_000;

beforeAll(async () => {
  env.startWorkers([segmentExportJob, exportShardJob]);
  await createSegment(env.ctx.pool, env.ws.workspaceId, SEGMENT);
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, MEMBERS);
}, 120_000);

const root = () => localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws);

async function exportHive(body: Record<string, unknown>) {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: SEGMENT,
    fields_to_export: ['external_id', 'service_id', 'email'],
    layout: 'hive',
    ...body,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const done = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix), 120_000);
  expect(done.status, String(done.error)).toBe('ready');
  return { prefix: String(res.body.object_prefix), keyPrefix: String(done.key_prefix), done };
}

async function query<T>(sql: string): Promise<T[]> {
  const conn = await (await duckdb()).connect();
  try {
    return (await (await conn.runAndReadAll(sql)).getRowObjectsJson()) as T[];
  } finally {
    conn.closeSync();
  }
}

describe('the hive layout', () => {
  it('writes segment_id=/export_date=/export_id= partitions with numbered parts, which DuckDB reads as one table', async () => {
    const day = new Date().toISOString().slice(0, 10);
    const first = await exportHive({ output_format: 'parquet' });
    const second = await exportHive({ output_format: 'parquet', rows_per_part: 2_000 });
    // The segment id's ':' is escaped as Hive and Spark escape it.
    expect(first.keyPrefix).toBe(`segment-export/segment_id=us%3Aall/export_date=${day}/export_id=${first.prefix}`);
    const names = await readdir(path.join(root(), first.keyPrefix));
    expect(names.filter((n) => !CONTROL_FILES.includes(n)).every((n) => /^part-\d{5,}\.parquet$/.test(n))).toBe(true);
    expect(names).toEqual(expect.arrayContaining(CONTROL_FILES));
    const manifest = (await import(path.join(root(), first.keyPrefix, 'manifest.json'), { with: { type: 'json' } }))
      .default as ExportManifest;
    expect(manifest.layout).toBe('hive');

    const table = `read_parquet('${root()}/segment-export/segment_id=*/export_date=*/export_id=*/part-*.parquet', hive_partitioning = true)`;
    const byExport = await query<{
      segment_id: string;
      export_date: string;
      export_id: string;
      users: string;
      ids: string;
    }>(
      `SELECT segment_id, export_date::VARCHAR AS export_date, export_id, count(*) AS users, count(DISTINCT service_id) AS ids FROM ${table} GROUP BY ALL ORDER BY export_id`,
    );
    // DuckDB decodes the escape, as Hive and Spark do: the column holds the segment's id as the API knows it.
    expect(byExport).toEqual(
      [first.prefix, second.prefix].sort().map((id) => ({
        segment_id: 'us:all',
        export_date: day,
        export_id: id,
        users: String(MEMBERS),
        ids: String(MEMBERS),
      })),
    );
  }, 180_000);

  it('NDJSON parts too, and an incremental export keeps its removed parts out of the part-* glob', async () => {
    const full = await exportHive({ output_format: 'gzip' });
    await env.ctx.pool.query(
      `UPDATE profiles SET country = 'ZZ', updated_at = now() WHERE workspace_id = $1 AND external_id IN ('ext-1', 'ext-2')`,
      [env.ws.workspaceId],
    );
    await env.ctx.pool.query(
      `UPDATE profiles SET email = 'changed@example.com', updated_at = now() WHERE workspace_id = $1 AND external_id = 'ext-3'`,
      [env.ws.workspaceId],
    );
    const delta = await exportHive({ output_format: 'gzip', changes_since: full.prefix });
    const names = await readdir(path.join(root(), delta.keyPrefix));
    expect(names.filter((n) => n.startsWith('removed-part-'))).toHaveLength(1);
    const glob = (id: string, files: string) =>
      `${root()}/segment-export/segment_id=*/export_date=*/export_id=${id}/${files}`;
    const [users] = await query<{ n: string }>(
      `SELECT count(*) AS n FROM read_json('${glob(delta.prefix, 'part-*.gz')}', hive_partitioning = true)`,
    );
    expect(users!.n).toBe('1');
    const removed = await query<{ external_id: string; export_id: string }>(
      `SELECT external_id, export_id FROM read_json('${glob(delta.prefix, 'removed-part-*.gz')}', hive_partitioning = true) ORDER BY external_id`,
    );
    expect(removed).toEqual([
      { external_id: 'ext-1', export_id: delta.prefix },
      { external_id: 'ext-2', export_id: delta.prefix },
    ]);
  }, 180_000);

  it("refuses a layout it does not know, and keeps the spec's layout by default", async () => {
    const bad = await requestExport(env, env.ws.apiKey, {
      segment_id: SEGMENT,
      fields_to_export: ['email'],
      layout: 'flat',
    });
    expect(bad.status).toBe(400);
    expect(JSON.stringify(bad.body)).toContain("layout must be 'spec' or 'hive'");
    const res = await requestExport(env, env.ws.apiKey, { segment_id: SEGMENT, fields_to_export: ['email'] });
    const done = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix), 120_000);
    expect(String(done.key_prefix)).toMatch(
      new RegExp(`^segment-export/us:all/\\d{4}-\\d{2}-\\d{2}/${String(res.body.object_prefix)}$`),
    );
  }, 180_000);
});
