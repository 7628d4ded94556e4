import { readFile, rm, mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import pl from 'nodejs-polars';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { generateUsers } from '../../src/features/synthetic-users/generate.js';
import { repoRoot } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, requestExport, waitForExport } from '../helpers/export-fixtures.js';
import { docExamples, forExport, openWarehouse, type Warehouse } from '../helpers/warehouse-duckdb.js';

/*
 * Loaders of two families, each from both key layouts and in gzip and Parquet: a full export loaded, a delta applied
 * onto it, and the result equal to a fresh full export. DuckDB runs docs/export.md's statements (their spec-layout run
 * is test/exports/export-warehouse-loading.test.ts; here the hive layout's, and the hive_partitioning read of a
 * segment's prefix the doc shows); Polars (nodejs-polars: a DataFrame library in Rust, not a SQL engine) loads as
 * docs/export.md "Polars" says: by the manifest's parts, or a segment's hive prefix for Parquet.
 */

type Format = 'gzip' | 'parquet';
type Layout = 'spec' | 'hive';
/** Polars infers NDJSON's types per read; custom_attributes (an object of any keys) is left to the DuckDB half. */
const POLARS_FIELDS = [
  'external_id',
  'service_id',
  'email',
  'first_name',
  'created_at',
  'dob',
  'total_revenue',
  'custom_events',
];
/** The fields docs/export.md's examples are written for. */
const DOC_FIELDS = [...POLARS_FIELDS, 'custom_attributes'];
const USERS = 2_000;
const DAY = 86_400_000;
const COMBOS: Array<[Layout, Format]> = [
  ['spec', 'gzip'],
  ['spec', 'parquet'],
  ['hive', 'gzip'],
  ['hive', 'parquet'],
];

const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '5000' }, workspaces: ['ws'] });
let scratch: string;
let joiners: string[];

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'ces-loaders-'));
  env.startWorkers([segmentExportJob, exportShardJob]);
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'members', { attribute: 'country', op: 'neq', value: 'ZZ' });
  // Times after any export's 90-day window start, so that a fresh export and an older one plus a delta agree.
  await generateUsers(env.ctx.pool, {
    workspaceId: env.ws.workspaceId,
    count: USERS,
    seed: 11,
    now: new Date(Date.now() + 800 * DAY),
  });
  const last = await env.ctx.pool.query<{ service_id: string }>(
    `UPDATE profiles SET country = 'ZZ' WHERE id IN (SELECT id FROM profiles WHERE workspace_id = $1 ORDER BY service_id DESC LIMIT 5) RETURNING service_id`,
    [env.ws.workspaceId],
  );
  joiners = last.rows.map((r) => r.service_id);
}, 120_000);
afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

interface Done {
  dir: string;
  manifest: ExportManifest;
  prefix: string;
}

async function exportSegment(
  format: Format,
  layout: Layout,
  changesSince?: string,
  fields = POLARS_FIELDS,
): Promise<Done> {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: 'members',
    fields_to_export: fields,
    output_format: format,
    layout,
    ...(changesSince ? { changes_since: changesSince } : {}),
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const status = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix), 120_000);
  expect(status.status, String(status.error)).toBe('ready');
  const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(status.key_prefix));
  const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
  return { dir, manifest, prefix: String(res.body.object_prefix) };
}

/** The changes a delta must carry: edits, a cleared field, deletes, leavers, joiners and new profiles. */
async function changeProfiles(round: number): Promise<{ renamed: string[]; cleared: string[]; gone: string[] }> {
  const db = env.ctx.pool;
  const ws = env.ws.workspaceId;
  const ids = (
    await db.query<{ service_id: string }>(
      `SELECT service_id FROM profiles WHERE workspace_id = $1 AND country <> 'ZZ' ORDER BY service_id`,
      [ws],
    )
  ).rows.map((r) => r.service_id);
  const [renamed, cleared, deleted, leaving] = [
    ids.slice(0, 12),
    ids.slice(12, 16),
    ids.slice(16, 21),
    ids.slice(21, 29),
  ];
  await db.query(
    `UPDATE profiles SET first_name = 'Renamed ' || service_id WHERE workspace_id = $1 AND service_id = ANY($2)`,
    [ws, renamed],
  );
  await db.query(`UPDATE profiles SET email = NULL WHERE workspace_id = $1 AND service_id = ANY($2)`, [ws, cleared]);
  await db.query(`DELETE FROM profiles WHERE workspace_id = $1 AND service_id = ANY($2)`, [ws, deleted]);
  await db.query(`UPDATE profiles SET country = 'ZZ' WHERE workspace_id = $1 AND service_id = ANY($2)`, [ws, leaving]);
  await db.query(`UPDATE profiles SET country = 'US' WHERE workspace_id = $1 AND service_id = ANY($2)`, [ws, joiners]);
  await generateUsers(db, {
    workspaceId: ws,
    count: 10,
    seed: 11 + round,
    startId: USERS + round * 100,
    now: new Date(Date.now() + 800 * DAY),
  });
  return { renamed, cleared, gone: [...deleted, ...leaving] };
}

async function memberCount(): Promise<number> {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1 AND country <> 'ZZ'`,
    [env.ws.workspaceId],
  );
  return rows[0]!.n;
}

// ---- Polars, as docs/export.md "Polars" loads ----

/** The files of one kind the manifest lists. */
const partsOf = (done: Done, kind: 'users' | 'removed') =>
  done.manifest.parts.filter((p) => p.kind === kind).map((p) => path.join(done.dir, p.file));

/** One kind of an export's parts as one DataFrame, or null when it has none. */
async function polarsParts(done: Done, kind: 'users' | 'removed'): Promise<pl.DataFrame | null> {
  const files = partsOf(done, kind);
  if (files.length === 0) return null;
  if (done.manifest.output_format === 'parquet') return pl.concat(files.map((f) => pl.readParquet(f)));
  // NDJSON: every part's lines as one body, so that one schema is inferred from all of them.
  const body = Buffer.concat(await Promise.all(files.map(async (f) => gunzipSync(await readFile(f)))));
  return pl.readJSON(body, { format: 'lines', inferSchemaLength: null });
}

/** A full export as a table: a hive-layout Parquet export read from its segment's prefix with hive_partitioning. */
async function polarsLoad(done: Done, layout: Layout): Promise<pl.DataFrame> {
  if (layout === 'hive' && done.manifest.output_format === 'parquet') {
    const segmentDir = path.resolve(done.dir, '..', '..');
    return pl
      .scanParquet(path.join(segmentDir, '*', '*', 'part-*.parquet'), { hivePartitioning: true })
      .filter(pl.col('export_id').eq(pl.lit(done.prefix)))
      .drop('segment_id', 'export_date', 'export_id')
      .collectSync();
  }
  const users = await polarsParts(done, 'users');
  if (!users) throw new Error('a full export without users parts');
  return users;
}

/** Deletes the removed lines' rows, then replaces or adds the users lines' rows, by service_id. */
async function polarsApply(table: pl.DataFrame, delta: Done): Promise<pl.DataFrame> {
  let out = table;
  const removed = await polarsParts(delta, 'removed');
  if (removed) out = out.filter(pl.col('service_id').isIn(removed.getColumn('service_id')).not());
  const users = await polarsParts(delta, 'users');
  if (users) {
    // A delta's NDJSON is typed by its own lines: cast to the table's columns (a missing one is null).
    const typed = users.select(
      ...out.columns.map((c) =>
        (users.columns.includes(c) ? pl.col(c) : pl.lit(null)).cast(out.getColumn(c).dtype).alias(c),
      ),
    );
    out = pl.concat([out.filter(pl.col('service_id').isIn(typed.getColumn('service_id')).not()), typed]);
  }
  return out;
}

/** A table's rows as sorted JSON, nulls and absent struct fields alike, so two loads of the same data compare equal. */
function rowsOf(df: pl.DataFrame): string[] {
  const plain = (v: unknown): unknown => {
    if (v === null || v === undefined) return undefined;
    if (typeof v === 'bigint') return Number(v);
    if (v instanceof Date) return v.toISOString();
    if (Array.isArray(v)) return v.map(plain);
    if (typeof v === 'object') {
      return Object.fromEntries(
        Object.entries(v as Record<string, unknown>)
          .map(([k, x]) => [k, plain(x)] as const)
          .filter(([, x]) => x !== undefined)
          .sort(([a], [b]) => (a < b ? -1 : 1)),
      );
    }
    return v;
  };
  return df
    .toRecords()
    .map((r) => JSON.stringify(plain(r)))
    .sort();
}

describe('loaders of two families, from both layouts, gzip and Parquet', () => {
  it('Polars: a full load plus the applied delta equals a fresh full export', async () => {
    const bases = new Map<string, { done: Done; table: pl.DataFrame }>();
    for (const [layout, format] of COMBOS) {
      const done = await exportSegment(format, layout);
      const table = await polarsLoad(done, layout);
      expect(table.height, `${layout} ${format}`).toBe(done.manifest.users);
      expect(new Set(table.getColumn('service_id').toArray()).size).toBe(done.manifest.users);
      bases.set(`${layout}/${format}`, { done, table });
    }
    const { renamed, cleared, gone } = await changeProfiles(1);
    for (const [layout, format] of COMBOS) {
      const what = `${layout} ${format}`;
      const base = bases.get(`${layout}/${format}`)!;
      const delta = await exportSegment(format, layout, base.done.prefix);
      expect(delta.manifest.changes_since, what).toBe(base.done.prefix);
      expect(new Set(delta.manifest.parts.map((p) => p.kind)), what).toEqual(new Set(['users', 'removed']));
      const applied = await polarsApply(base.table, delta);
      const fresh = await polarsLoad(await exportSegment(format, layout), layout);
      expect(applied.height, what).toBe(await memberCount());
      expect(rowsOf(applied), what).toEqual(rowsOf(fresh));
      // The delta did each thing.
      const byId = new Map(applied.toRecords().map((r) => [String(r.service_id), r]));
      for (const id of renamed) expect(byId.get(id)?.first_name, what).toBe(`Renamed ${id}`);
      for (const id of cleared) expect(byId.get(id)?.email ?? null, what).toBeNull();
      for (const id of gone) expect(byId.has(id), what).toBe(false);
      for (const id of joiners) expect(byId.has(id), what).toBe(true);
    }
  }, 240_000);

  it("DuckDB: docs/export.md's statements load and apply the hive layout too, and its hive_partitioning read finds each export", async () => {
    const examples = new Map(
      docExamples(await readFile(path.join(repoRoot, 'docs/export.md'), 'utf8'), '## Loading into a warehouse').map(
        (e) => [e.name, e],
      ),
    );
    const run = (wh: Warehouse, name: string, dir?: string) => wh.query(forExport(examples.get(name)!, dir));
    const warehouses: Warehouse[] = [];
    try {
      const bases = new Map<Format, { done: Done; wh: Warehouse }>();
      for (const format of ['gzip', 'parquet'] as const) {
        const wh = await openWarehouse(scratch);
        warehouses.push(wh);
        const done = await exportSegment(format, 'hive', undefined, DOC_FIELDS);
        await run(wh, 'macros');
        await run(wh, `load-${format}`, done.dir);
        bases.set(format, { done, wh });
      }
      // The segment's prefix as one table of its Parquet exports, one of them picked by its partition column.
      const parquet = bases.get('parquet')!;
      const segmentDir = path.resolve(parquet.done.dir, '..', '..');
      const hive = examples.get('load-hive-parquet')!;
      await parquet.wh.query(
        hive.code.replaceAll('<segment>', segmentDir).replaceAll('<object_prefix>', parquet.done.prefix),
      );
      const [same] = await parquet.wh.query(
        `SELECT (SELECT count(*) FROM (FROM users EXCEPT ALL FROM users_hive)) + (SELECT count(*) FROM (FROM users_hive EXCEPT ALL FROM users)) AS n`,
      );
      expect(Number(same!.n)).toBe(0);

      await changeProfiles(2);
      for (const format of ['gzip', 'parquet'] as const) {
        const { done, wh } = bases.get(format)!;
        const delta = await exportSegment(format, 'hive', done.prefix, DOC_FIELDS);
        await run(wh, `apply-${format}`, delta.dir);
        await wh.query('ALTER TABLE users RENAME TO users_applied');
        await run(wh, `load-${format}`, (await exportSegment(format, 'hive', undefined, DOC_FIELDS)).dir);
        const [diff] = await wh.query(
          `SELECT (SELECT count(*) FROM (FROM users_applied EXCEPT ALL FROM users)) + (SELECT count(*) FROM (FROM users EXCEPT ALL FROM users_applied)) AS n`,
        );
        expect(Number(diff!.n), format).toBe(0);
        const [rows] = await wh.query('SELECT count(*) AS n FROM users_applied');
        expect(Number(rows!.n), format).toBe(await memberCount());
      }
    } finally {
      for (const wh of warehouses) wh.close();
    }
  }, 240_000);
});
