import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { REMOVED_PARQUET_COLUMNS, usersParquetColumns } from '../../src/pipelines/exports/shard/parquet-schema.js';
import { EXPORT_FIELDS } from '../../src/pipelines/exports/request/request-body.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { generateUsers } from '../../src/features/synthetic-users/generate.js';
import { useTestEnv } from '../helpers/context.js';
import {
  CONTROL_FILES,
  createSegment,
  readPartFile,
  requestExport,
  waitForExport,
  zipEntries,
} from '../helpers/export-fixtures.js';
import { compareParquet, readParquet } from '../helpers/parquet-values.js';
import { Ajv2020 } from 'ajv/dist/2020.js';
import addFormats from 'ajv-formats';

// ajv-formats is CommonJS: its default import is the function itself at run time.
const withFormats = addFormats as unknown as (ajv: Ajv2020) => Ajv2020;

/*
 * output_format "parquet" end to end: the synthetic population fills every export field, the same segment is
 * exported as NDJSON (gzip) and as Parquet, and the Parquet files, read back by hyparquet (which shares no code with
 * the DuckDB writer), must hold the NDJSON values with the column types.
 */

const run = promisify(execFile);
const USERS = 12_000;
const DAY = 86_400_000;
const env = useTestEnv({ workspaces: ['ws'] });
let scratch: string;

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'ces-parquet-export-'));
  env.startWorkers([segmentExportJob, exportShardJob]);
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'everyone', { random_bucket: { gte: 0, lt: 10_000 } });
  // Generated times are relative to `now` and reach at most 730 days back; 800 days ahead puts every entry after the
  // start of any export's 90-day window. With a fixed past `now`, an entry of custom_events whose `last` fell in the
  // seconds between the NDJSON and the Parquet request was in one export and not the other (CI, 2026-11-26).
  await generateUsers(env.ctx.pool, {
    workspaceId: env.ws.workspaceId,
    count: USERS,
    seed: 21,
    now: new Date(Date.now() + 800 * DAY),
  });
  // Generated users are in no subscription group: every tenth is put in one, so that the column holds values too.
  await env.ctx.pool.query(
    `INSERT INTO subscription_groups (id, workspace_id, name, channel) VALUES ('0b7e6c1a-2f3d-4c5b-8a9e-1f2a3b4c5d6e', $1, 'News', 'email')`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO subscription_group_states (profile_id, group_id, workspace_id, state, set_at)
     SELECT id, '0b7e6c1a-2f3d-4c5b-8a9e-1f2a3b4c5d6e', workspace_id, CASE WHEN id % 20 = 0 THEN 'unsubscribed' ELSE 'subscribed' END, now()
       FROM profiles WHERE workspace_id = $1 AND id % 10 = 0`,
    [env.ws.workspaceId],
  );
}, 120_000);
afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

interface Done {
  dir: string;
  manifest: ExportManifest;
  status: Record<string, unknown>;
}

async function exportSegment(body: Record<string, unknown>): Promise<Done> {
  const res = await requestExport(env, env.ws.apiKey, { segment_id: 'everyone', ...body });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const status = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix), 120_000);
  expect(status.status, String(status.error)).toBe('ready');
  const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(status.key_prefix));
  const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
  return { dir, manifest, status };
}

async function ndjsonLines(done: Done): Promise<Record<string, unknown>[]> {
  const lines: Record<string, unknown>[] = [];
  for (const p of done.manifest.parts)
    for (const l of await readPartFile(path.join(done.dir, p.file))) lines.push(JSON.parse(l));
  return lines;
}

/** A Parquet row as its JSON form: instants as RFC 3339 strings (dates as YYYY-MM-DD), int64 as numbers. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
function asJson(value: unknown, key = ''): any {
  if (typeof value === 'bigint') return Number(value);
  if (value instanceof Date) return key === 'dob' ? value.toISOString().slice(0, 10) : value.toISOString();
  if (Array.isArray(value)) return value.map((v) => asJson(v));
  if (value && typeof value === 'object')
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, asJson(v, k)]));
  return value;
}

async function parquetRows(
  done: Done,
  kind: 'users' | 'removed' = 'users',
): Promise<{ rows: Record<string, unknown>[]; perPart: number[] }> {
  const rows: Record<string, unknown>[] = [];
  const perPart: number[] = [];
  for (const p of done.manifest.parts.filter((x) => x.kind === kind)) {
    const file = path.join(done.dir, p.file);
    const bytes = await readFile(file);
    expect(bytes.length).toBe(p.bytes);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(p.sha256);
    // The Parquet magic at both ends: a whole file, not a truncated upload.
    expect(bytes.subarray(0, 4).toString()).toBe('PAR1');
    expect(bytes.subarray(-4).toString()).toBe('PAR1');
    const { metadata, rows: got } = await readParquet(file);
    expect(Number(metadata.num_rows)).toBe(p.users);
    perPart.push(got.length);
    rows.push(...got);
  }
  return { rows, perPart };
}

const byServiceId = (a: Record<string, unknown>, b: Record<string, unknown>) =>
  String(a.service_id).localeCompare(String(b.service_id));

describe('Parquet exports (output_format "parquet")', () => {
  it('write one typed .parquet file per part under the spec key layout, holding the values of the NDJSON export', async () => {
    const request = { fields_to_export: [...EXPORT_FIELDS], custom_attributes_to_export: null };
    const [ndjson, parquet] = [
      await exportSegment({ ...request, output_format: 'gzip' }),
      await exportSegment({ ...request, output_format: 'parquet' }),
    ];

    expect(parquet.manifest.output_format).toBe('parquet');
    expect(parquet.manifest.users).toBe(USERS);
    // The spec's 5,000-line parts, the last one short, as for NDJSON.
    expect(parquet.manifest.parts.map((p) => p.users)).toEqual([5_000, 5_000, 2_000]);
    for (const p of parquet.manifest.parts) {
      expect(p.key).toMatch(
        new RegExp(
          `^segment-export/everyone/\\d{4}-\\d{2}-\\d{2}/${parquet.manifest.object_prefix}/[0-9a-f]{32}\\.parquet$`,
        ),
      );
      expect(p.kind).toBe('users');
    }
    // Nothing else under the prefix: no spooled NDJSON, no half-written file.
    expect((await readdir(parquet.dir)).sort()).toEqual(
      [...parquet.manifest.parts.map((p) => p.file), ...CONTROL_FILES].sort(),
    );

    const { rows, perPart } = await parquetRows(parquet);
    expect(perPart).toEqual([5_000, 5_000, 2_000]);
    const lines = await ndjsonLines(ndjson);
    expect(lines).toHaveLength(USERS);
    const columns = usersParquetColumns({ fields: [...EXPORT_FIELDS], customAttributes: null });
    const { want, got } = compareParquet(columns, lines.sort(byServiceId), rows.sort(byServiceId));
    expect(got).toHaveLength(want.length);
    // Element by element, so that a failure names the user rather than dumping 12,000 rows.
    for (let i = 0; i < want.length; i++) expect(got[i], String(want[i]!.service_id)).toEqual(want[i]);
    // The synthetic population fills every column somewhere: the comparison covered real values, not nulls.
    for (const c of columns)
      expect(
        got.some((r) => r[c.name] !== null && !(Array.isArray(r[c.name]) && (r[c.name] as unknown[]).length === 0)),
        c.name,
      ).toBe(true);

    // schema.json: every NDJSON line and every Parquet row (as JSON: instants as RFC 3339, int64 as numbers)
    // validates against the schema file of its export, checked by a JSON Schema validator of its own (Ajv).
    for (const [done, values] of [
      [ndjson, lines],
      [parquet, rows.map((r) => asJson(r))],
    ] as const) {
      const text = await readFile(path.join(done.dir, 'schema.json'), 'utf8');
      expect(text.endsWith('\n') && !text.slice(0, -1).includes('\n')).toBe(true);
      const ajv = new Ajv2020({ strict: true, allErrors: false });
      withFormats(ajv);
      const validate = ajv.compile(JSON.parse(text));
      for (const v of values) expect(validate(v) ? [] : validate.errors, String(v.service_id)).toEqual([]);
      // One wrong type is caught: the check is real.
      expect(validate({ ...values[0], random_bucket: 'seven' })).toBe(false);
    }
    expect(
      JSON.parse(await readFile(path.join(parquet.dir, 'schema.json'), 'utf8')).properties.custom_attributes,
    ).toMatchObject({ type: ['string', 'null'], contentMediaType: 'application/json' });
  }, 180_000);

  it('schema.json depends on the request alone: two exports of the same fields have byte-identical schema files', async () => {
    const request = {
      fields_to_export: ['external_id', 'created_at', 'custom_events', 'devices'],
      custom_attributes_to_export: ['plan', 'score'],
      output_format: 'parquet',
    };
    const [first, second] = [await exportSegment(request), await exportSegment(request)];
    const [a, b] = [
      await readFile(path.join(first.dir, 'schema.json')),
      await readFile(path.join(second.dir, 'schema.json')),
    ];
    expect(a.equals(b)).toBe(true);
    expect(first.manifest.schema).toEqual({
      file: 'schema.json',
      key: `${String(first.status.key_prefix)}/schema.json`,
    });
    expect(Object.keys(JSON.parse(a.toString()).properties)).toEqual([
      'external_id',
      'created_at',
      'custom_events',
      'devices',
      'custom_attributes',
    ]);
  });

  it('cut parts at rows_per_part, at most one short part per shard, every user once', async () => {
    const done = await exportSegment({
      fields_to_export: ['external_id', 'service_id', 'random_bucket'],
      output_format: 'parquet',
      rows_per_part: 1_000,
    });
    expect(done.manifest.rows_per_part).toBe(1_000);
    const { rows, perPart } = await parquetRows(done);
    expect(perPart.every((n) => n >= 1 && n <= 1_000)).toBe(true);
    // Four shards (the default 2,500 buckets): at most four parts below 1,000 rows.
    expect(perPart.filter((n) => n < 1_000).length).toBeLessThanOrEqual(4);
    expect(perPart.reduce((a, b) => a + b, 0)).toBe(USERS);
    expect(new Set(rows.map((r) => r.service_id)).size).toBe(USERS);
    expect(typeof rows[0]!.random_bucket).toBe('bigint');
  }, 120_000);

  it('download link: one ZIP with each Parquet part stored as it is in the bucket, and the manifest', async () => {
    const done = await exportSegment({
      fields_to_export: ['external_id', 'email', 'custom_events'],
      output_format: 'parquet',
    });
    const url = String(done.status.url);
    const res = await env.app.inject({ method: 'GET', url: url.slice(url.indexOf('/downloads/')) });
    expect(res.statusCode).toBe(200);
    const zip = path.join(scratch, 'download.zip');
    await writeFile(zip, res.rawPayload);
    const prefix = done.manifest.object_prefix;
    expect((await zipEntries(zip)).sort()).toEqual(
      [...done.manifest.parts.map((p) => `${prefix}/${p.file}`), `${prefix}/manifest.json`].sort(),
    );
    for (const p of done.manifest.parts) {
      const { stdout } = await run('unzip', ['-p', zip, `${prefix}/${p.file}`], {
        encoding: 'buffer',
        maxBuffer: 64 * 1024 * 1024,
      });
      expect(createHash('sha256').update(stdout).digest('hex')).toBe(p.sha256);
    }
  }, 120_000);

  it('incremental: the changed users and the removed ones, each as Parquet', async () => {
    const fields = ['external_id', 'service_id', 'first_name'];
    const base = await exportSegment({ fields_to_export: fields, output_format: 'parquet' });
    const pick = await env.ctx.pool.query<{ service_id: string; external_id: string | null }>(
      `SELECT service_id, external_id FROM profiles WHERE workspace_id = $1 ORDER BY service_id LIMIT 5`,
      [env.ws.workspaceId],
    );
    const [changed, gone] = [pick.rows.slice(0, 3), pick.rows.slice(3)];
    await env.ctx.pool.query(
      `UPDATE profiles SET first_name = 'Renamed ' || service_id WHERE workspace_id = $1 AND service_id = ANY($2)`,
      [env.ws.workspaceId, changed.map((r) => r.service_id)],
    );
    await env.ctx.pool.query(`DELETE FROM profiles WHERE workspace_id = $1 AND service_id = ANY($2)`, [
      env.ws.workspaceId,
      gone.map((r) => r.service_id),
    ]);

    const delta = await exportSegment({
      fields_to_export: fields,
      output_format: 'parquet',
      changes_since: base.manifest.object_prefix,
    });
    expect(delta.manifest).toMatchObject({ changes_since: base.manifest.object_prefix, users: 3, removed: 2 });
    const users = (await parquetRows(delta, 'users')).rows.sort(byServiceId);
    expect(users.map((r) => [r.service_id, r.first_name])).toEqual(
      changed.map((r) => [r.service_id, `Renamed ${r.service_id}`]),
    );
    const removedParts = delta.manifest.parts.filter((p) => p.kind === 'removed');
    expect(removedParts.length).toBe(1);
    expect(removedParts[0]!.file).toMatch(/^removed-[0-9a-f]{32}\.parquet$/);
    const removed = (await parquetRows(delta, 'removed')).rows.sort(byServiceId);
    const { want, got } = compareParquet(
      REMOVED_PARQUET_COLUMNS,
      gone.map((r) => ({ external_id: r.external_id, service_id: r.service_id })),
      removed,
    );
    expect(got).toEqual(want);
  }, 180_000);
});
