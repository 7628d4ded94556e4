import { cp, mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { generateUsers } from '../../src/features/synthetic-users/generate.js';
import { repoRoot } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, readPartFile, requestExport, waitForExport } from '../helpers/export-fixtures.js';
import {
  docExamples,
  EXPORT_PLACEHOLDER,
  forExport,
  openWarehouse,
  runShell,
  type DocExample,
  type Warehouse,
} from '../helpers/warehouse-duckdb.js';

/*
 * docs/export.md "Loading into a warehouse": its DuckDB examples (the blocks marked `<!-- duckdb-example: NAME -->`,
 * shell lines included) run as written, `<export>` replaced by a real export's directory, against real exports of
 * synthetic users; the tables they build must hold every member once with the NDJSON's values, the same whatever the
 * format, and a full load plus an applied delta must equal a fresh full export.
 */

const DOC = path.join(repoRoot, 'docs/export.md');
const SECTION = '## Loading into a warehouse';
/** The fields the doc's examples are written for, in the order of its column list. */
const FIELDS = [
  'external_id',
  'service_id',
  'email',
  'first_name',
  'created_at',
  'dob',
  'total_revenue',
  'custom_events',
  'custom_attributes',
];
const EXAMPLES = [
  'check-sha256',
  'macros',
  'load-gzip',
  'load-gzip-detected',
  'unzip',
  'load-zip',
  'load-parquet',
  'load-hive-parquet',
  'apply-gzip',
  'apply-parquet',
] as const;
type ExampleName = (typeof EXAMPLES)[number];
const USERS = 3_000;
const DAY = 86_400_000;

const env = useTestEnv({ workspaces: ['ws'] });
let scratch: string;
let examples: Map<string, DocExample>;
/** Members that start outside the segment (country 'ZZ') and join it before the incremental export. */
let joiners: string[];

beforeAll(async () => {
  scratch = await mkdtemp(path.join(tmpdir(), 'ces-warehouse-'));
  examples = new Map(docExamples(await readFile(DOC, 'utf8'), SECTION).map((e) => [e.name, e]));
  env.startWorkers([segmentExportJob, exportShardJob]);
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'members', { attribute: 'country', op: 'neq', value: 'ZZ' });
  // Generated times are relative to `now`; put them all after the start of any export's 90-day window, so that no
  // entry of custom_events ages out of the window between two exports of this file (which would make a fresh full
  // export differ from an earlier one plus a delta, as docs/export.md says it does).
  await generateUsers(env.ctx.pool, {
    workspaceId: env.ws.workspaceId,
    count: USERS,
    seed: 5,
    now: new Date(Date.now() + 800 * DAY),
  });
  const last = await env.ctx.pool.query<{ service_id: string }>(
    `UPDATE profiles SET country = 'ZZ' WHERE id IN (SELECT id FROM profiles WHERE workspace_id = $1 ORDER BY service_id DESC LIMIT 6) RETURNING service_id`,
    [env.ws.workspaceId],
  );
  joiners = last.rows.map((r) => r.service_id);
}, 120_000);
afterAll(async () => {
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

function example(name: ExampleName): DocExample {
  const found = examples.get(name);
  if (!found) throw new Error(`docs/export.md has no block marked duckdb-example: ${name}`);
  return found;
}

/** Runs a doc example for the export in dir: SQL in the warehouse (the last statement's rows), shell with bash. */
async function runExample(wh: Warehouse, name: ExampleName, dir?: string): Promise<Record<string, unknown>[]> {
  const ex = example(name);
  const code = forExport(ex, dir);
  if (ex.lang === 'sh') {
    await runShell(code, scratch);
    return [];
  }
  return wh.query(code);
}

interface Done {
  dir: string;
  manifest: ExportManifest;
}

async function exportSegment(format: 'gzip' | 'zip' | 'parquet', changesSince?: string): Promise<Done> {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: 'members',
    fields_to_export: FIELDS,
    output_format: format,
    ...(changesSince ? { changes_since: changesSince } : {}),
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const status = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix), 120_000);
  expect(status.status, String(status.error)).toBe('ready');
  const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(status.key_prefix));
  const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
  expect(manifest.output_format).toBe(format);
  return { dir, manifest };
}

async function memberCount(): Promise<number> {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1 AND country <> 'ZZ'`,
    [env.ws.workspaceId],
  );
  return rows[0]!.n;
}

/** Rows in one table and not the other, both ways (0: the same rows). */
async function difference(wh: Warehouse, a: string, b: string): Promise<number> {
  const [row] = await wh.query(
    `SELECT (SELECT count(*) FROM (FROM ${a} EXCEPT ALL FROM ${b})) + (SELECT count(*) FROM (FROM ${b} EXCEPT ALL FROM ${a})) AS n`,
  );
  return Number(row!.n);
}

/** (service_id, first_name, email) of every row, sorted. */
async function keyedNames(wh: Warehouse, table: string): Promise<string[]> {
  const rows = await wh.query(`SELECT service_id, first_name, email FROM ${table}`);
  return rows.map((r) => JSON.stringify([r.service_id, r.first_name, r.email])).sort();
}

const TYPES = {
  external_id: 'VARCHAR',
  service_id: 'VARCHAR',
  email: 'VARCHAR',
  first_name: 'VARCHAR',
  created_at: 'TIMESTAMP WITH TIME ZONE',
  dob: 'DATE',
  total_revenue: 'DOUBLE',
  custom_events:
    'STRUCT("name" VARCHAR, "first" TIMESTAMP WITH TIME ZONE, "last" TIMESTAMP WITH TIME ZONE, count BIGINT)[]',
  custom_attributes: 'JSON',
};

describe('loading exports into a warehouse: the DuckDB examples of docs/export.md', () => {
  let wh: Warehouse;

  beforeAll(async () => {
    wh = await openWarehouse(scratch);
  });
  afterAll(() => wh?.close());

  it('marks each runnable example, each naming the export by the placeholder', () => {
    expect([...examples.keys()]).toEqual([...EXAMPLES]);
    // load-hive-parquet reads a segment's prefix (test/exports/export-loaders.test.ts runs it).
    for (const name of EXAMPLES.filter((n) => !['macros', 'load-zip', 'load-hive-parquet'].includes(n)))
      expect(example(name).code, name).toContain(EXPORT_PLACEHOLDER);
    expect(example('unzip').lang).toBe('sh');
    expect(example('check-sha256').lang).toBe('sh');
  });

  it('gzip: the files check out, and the load holds every member once, typed, with the values of the NDJSON lines', async () => {
    const gzip = await exportSegment('gzip');
    const members = await memberCount();
    expect(gzip.manifest.users).toBe(members);

    await runExample(wh, 'check-sha256', gzip.dir);
    // ...and the check catches a part that differs from the manifest.
    const copy = path.join(scratch, 'corrupt');
    await cp(gzip.dir, copy, { recursive: true });
    const part = path.join(copy, gzip.manifest.parts[0]!.file);
    const bytes = await readFile(part);
    bytes.writeUInt8(bytes.readUInt8(bytes.length - 10) ^ 0xff, bytes.length - 10);
    await writeFile(part, bytes);
    await expect(runExample(wh, 'check-sha256', copy)).rejects.toMatchObject({
      stdout: expect.stringContaining(`${gzip.manifest.parts[0]!.file}: FAILED`),
    });

    await runExample(wh, 'macros');
    const [counts] = await runExample(wh, 'load-gzip', gzip.dir);
    expect(counts).toEqual({ users: BigInt(members), service_ids: BigInt(members) });
    expect(await wh.columns('users')).toEqual(TYPES);

    // Every value as the line says: times as instants, events as lists of structs.
    const lines = new Map<string, Record<string, unknown>>();
    for (const p of gzip.manifest.parts) {
      for (const l of await readPartFile(path.join(gzip.dir, p.file))) {
        const line = JSON.parse(l) as Record<string, unknown>;
        lines.set(String(line.service_id), line);
      }
    }
    expect(lines.size).toBe(members);
    const rows = await wh.query(`
      SELECT service_id, external_id, email, first_name, epoch_ms(created_at) AS created_at, strftime(dob, '%Y-%m-%d') AS dob,
             total_revenue, custom_attributes::VARCHAR AS custom_attributes,
             list_transform(custom_events, e -> {'name': e.name, 'first': epoch_ms(e.first), 'last': epoch_ms(e.last), 'count': e.count}) AS custom_events
      FROM users`);
    expect(rows).toHaveLength(members);
    let events = 0;
    for (const row of rows) {
      const line = lines.get(String(row.service_id));
      expect(line, String(row.service_id)).toBeDefined();
      const want = {
        service_id: line!.service_id,
        external_id: line!.external_id ?? null,
        email: line!.email ?? null,
        first_name: line!.first_name ?? null,
        created_at: Date.parse(String(line!.created_at)),
        dob: line!.dob ?? null,
        total_revenue: line!.total_revenue ?? null,
        custom_attributes: line!.custom_attributes ?? null,
        custom_events: line!.custom_events
          ? (line!.custom_events as Array<Record<string, unknown>>).map((e) => ({
              name: e.name,
              first: Date.parse(String(e.first)),
              last: Date.parse(String(e.last)),
              count: e.count,
            }))
          : null,
      };
      const got = {
        ...row,
        created_at: Number(row.created_at),
        custom_attributes: row.custom_attributes === null ? null : JSON.parse(String(row.custom_attributes)),
        custom_events: row.custom_events
          ? (row.custom_events as Array<Record<string, unknown>>).map((e) => ({
              ...e,
              first: Number(e.first),
              last: Number(e.last),
              count: Number(e.count),
            }))
          : null,
      };
      expect(got, String(row.service_id)).toEqual(want);
      events += (want.custom_events ?? []).length;
    }
    // The comparison covered real values, not nulls.
    expect(events).toBeGreaterThan(members);
    for (const f of ['external_id', 'email', 'dob', 'total_revenue', 'custom_attributes'] as const)
      expect(rows.filter((r) => r[f] !== null).length, f).toBeGreaterThan(members / 2);

    // Without columns: timestamps detected as TIMESTAMP, the UTC time of the same instants.
    await runExample(wh, 'load-gzip-detected', gzip.dir);
    const detected = await wh.columns('users_detected');
    expect(detected.created_at).toBe('TIMESTAMP');
    expect(detected.dob).toBe('DATE');
    // A list of structs, members in an order of DuckDB's choosing.
    expect(detected.custom_events).toMatch(/^STRUCT\(.*\)\[\]$/);
    for (const member of ['"name" VARCHAR', '"first" TIMESTAMP', '"last" TIMESTAMP', 'count BIGINT'])
      expect(detected.custom_events).toContain(`${member}`);
    const [same] = await wh.query(`
      SELECT count(*) AS n FROM users u JOIN users_detected d USING (service_id)
      WHERE d.created_at = timezone('UTC', u.created_at)
        AND list_transform(d.custom_events, e -> {'name': e.name, 'first': e.first, 'last': e.last, 'count': e.count}) IS NOT DISTINCT FROM
            list_transform(u.custom_events, e -> {'name': e.name, 'first': timezone('UTC', e.first), 'last': timezone('UTC', e.last), 'count': e.count})`);
    expect(Number(same!.n)).toBe(members);
    await wh.query('ALTER TABLE users RENAME TO users_gzip');
  }, 120_000);

  it('zip: unzipped first, the same table as the gzip export', async () => {
    const zip = await exportSegment('zip');
    expect(zip.manifest.parts.every((p) => p.file.endsWith('.zip'))).toBe(true);
    await runExample(wh, 'unzip', zip.dir);
    await runExample(wh, 'load-zip');
    expect(await wh.columns('users')).toEqual(TYPES);
    const [row] = await wh.query('SELECT count(*) AS n FROM users');
    expect(Number(row!.n)).toBe(zip.manifest.users);
    expect(await difference(wh, 'users', 'users_gzip')).toBe(0);
  }, 120_000);

  it('parquet: read_parquet loads the same table, with the same types, as the gzip export', async () => {
    const parquet = await exportSegment('parquet');
    expect(parquet.manifest.parts.every((p) => p.file.endsWith('.parquet'))).toBe(true);
    await runExample(wh, 'load-parquet', parquet.dir);
    expect(await wh.columns('users')).toEqual(TYPES);
    const [row] = await wh.query('SELECT count(*) AS n, count(DISTINCT service_id) AS ids FROM users');
    expect([Number(row!.n), Number(row!.ids)]).toEqual([parquet.manifest.users, parquet.manifest.users]);
    expect(await difference(wh, 'users', 'users_gzip')).toBe(0);
  }, 120_000);
});

describe('applying an incremental export with the DuckDB statements of docs/export.md', () => {
  it('a full load plus the applied delta equals a fresh full export, for gzip and for parquet', async () => {
    const formats = ['gzip', 'parquet'] as const;
    const warehouses = new Map<string, Warehouse>();
    try {
      const bases = new Map<string, Done>();
      for (const f of formats) {
        const wh = await openWarehouse(scratch);
        warehouses.set(f, wh);
        bases.set(f, await exportSegment(f));
        await runExample(wh, 'macros');
        await runExample(wh, `load-${f}`, bases.get(f)!.dir);
      }

      // Changes of every kind: edited and cleared fields, a new event, deleted profiles, members that leave the
      // segment and profiles that join it, new profiles.
      const db = env.ctx.pool;
      const ws = env.ws.workspaceId;
      const ids = (
        await db.query<{ service_id: string }>(
          `SELECT service_id FROM profiles WHERE workspace_id = $1 AND country <> 'ZZ' ORDER BY service_id`,
          [ws],
        )
      ).rows.map((r) => r.service_id);
      const [renamed, cleared, evented, deleted, leaving] = [
        ids.slice(0, 20),
        ids.slice(20, 25),
        ids.slice(25, 30),
        ids.slice(30, 37),
        ids.slice(37, 47),
      ];
      await db.query(
        `UPDATE profiles SET first_name = 'Renamed ' || service_id WHERE workspace_id = $1 AND service_id = ANY($2)`,
        [ws, renamed],
      );
      await db.query(`UPDATE profiles SET email = NULL WHERE workspace_id = $1 AND service_id = ANY($2)`, [
        ws,
        cleared,
      ]);
      const at = new Date().toISOString();
      await db.query(
        `UPDATE profiles SET custom_events = coalesce(custom_events, '{}'::jsonb)
           || jsonb_build_object('loaded', jsonb_build_object('name', 'loaded', 'first', $3::text, 'last', $3::text, 'count', 2))
         WHERE workspace_id = $1 AND service_id = ANY($2)`,
        [ws, evented, at],
      );
      await db.query(`DELETE FROM profiles WHERE workspace_id = $1 AND service_id = ANY($2)`, [ws, deleted]);
      await db.query(`UPDATE profiles SET country = 'ZZ' WHERE workspace_id = $1 AND service_id = ANY($2)`, [
        ws,
        leaving,
      ]);
      await db.query(`UPDATE profiles SET country = 'US' WHERE workspace_id = $1 AND service_id = ANY($2)`, [
        ws,
        joiners,
      ]);
      await generateUsers(db, {
        workspaceId: ws,
        count: 15,
        seed: 5,
        startId: USERS,
        now: new Date(Date.now() + 800 * DAY),
      });

      for (const f of formats) {
        const wh = warehouses.get(f)!;
        const base = bases.get(f)!;
        const delta = await exportSegment(f, base.manifest.object_prefix);
        expect(delta.manifest).toMatchObject({
          changes_since: base.manifest.object_prefix,
          users: 20 + 5 + 5 + joiners.length + 15,
          removed: 7 + 10,
        });
        // Both kinds of part, which the doc's statements both read.
        expect(new Set(delta.manifest.parts.map((p) => p.kind))).toEqual(new Set(['users', 'removed']));

        await runExample(wh, `apply-${f}`, delta.dir);
        await wh.query('ALTER TABLE users RENAME TO users_applied');
        const fresh = await exportSegment(f);
        expect(fresh.manifest.changes_since).toBeUndefined();
        await runExample(wh, `load-${f}`, fresh.dir);

        const members = await memberCount();
        const [counts] = await wh.query('SELECT count(*) AS n, count(DISTINCT service_id) AS ids FROM users_applied');
        expect([Number(counts!.n), Number(counts!.ids)], f).toEqual([members, members]);
        expect(await keyedNames(wh, 'users_applied'), f).toEqual(await keyedNames(wh, 'users'));
        expect(await difference(wh, 'users_applied', 'users'), f).toBe(0);

        // The delta did each thing, not merely nothing to a table that happened to match.
        const has = async (where: string, list: string[]) => {
          const [row] = await wh.query(
            `SELECT count(*) AS n FROM users_applied WHERE service_id IN (${list.map((id) => `'${id}'`).join(', ')}) AND ${where}`,
          );
          return Number(row!.n);
        };
        expect(await has(`first_name = 'Renamed ' || service_id`, renamed), f).toBe(renamed.length);
        expect(await has('email IS NULL', cleared), f).toBe(cleared.length);
        expect(await has(`list_contains(list_transform(custom_events, e -> e.name), 'loaded')`, evented), f).toBe(
          evented.length,
        );
        expect(await has('true', [...deleted, ...leaving]), f).toBe(0);
        expect(await has('true', joiners), f).toBe(joiners.length);
      }
    } finally {
      for (const wh of warehouses.values()) wh.close();
    }
  }, 180_000);

  it('applies, as written, a delta without removed parts and one without users parts', async () => {
    const db = env.ctx.pool;
    const ws = env.ws.workspaceId;
    for (const f of ['gzip', 'parquet'] as const) {
      const wh = await openWarehouse(scratch);
      try {
        const base = await exportSegment(f);
        await runExample(wh, 'macros');
        await runExample(wh, `load-${f}`, base.dir);
        const ids = (
          await db.query<{ service_id: string }>(
            `SELECT service_id FROM profiles WHERE workspace_id = $1 AND country <> 'ZZ' ORDER BY service_id LIMIT 6`,
            [ws],
          )
        ).rows.map((r) => r.service_id);
        const [renamed, deleted] = [ids.slice(0, 3), ids.slice(3, 6)];

        await db.query(
          `UPDATE profiles SET first_name = 'Only ' || service_id WHERE workspace_id = $1 AND service_id = ANY($2)`,
          [ws, renamed],
        );
        const changedOnly = await exportSegment(f, base.manifest.object_prefix);
        expect(changedOnly.manifest).toMatchObject({ users: 3, removed: 0 });
        expect(changedOnly.manifest.parts.map((p) => p.kind)).not.toContain('removed');
        await runExample(wh, `apply-${f}`, changedOnly.dir);
        const [named] = await wh.query(
          `SELECT count(*) AS n FROM users WHERE first_name = 'Only ' || service_id AND service_id IN (${renamed.map((id) => `'${id}'`).join(', ')})`,
        );
        expect(Number(named!.n), f).toBe(3);

        await db.query(`DELETE FROM profiles WHERE workspace_id = $1 AND service_id = ANY($2)`, [ws, deleted]);
        const removedOnly = await exportSegment(f, changedOnly.manifest.object_prefix);
        expect(removedOnly.manifest).toMatchObject({ users: 0, removed: 3 });
        expect(removedOnly.manifest.parts.map((p) => p.kind)).not.toContain('users');
        await runExample(wh, `apply-${f}`, removedOnly.dir);
        const [left] = await wh.query(
          `SELECT count(*) AS n FROM users WHERE service_id IN (${deleted.map((id) => `'${id}'`).join(', ')})`,
        );
        expect(Number(left!.n), f).toBe(0);
        const [counts] = await wh.query('SELECT count(*) AS n FROM users');
        expect(Number(counts!.n), f).toBe(await memberCount());
      } finally {
        wh.close();
      }
    }
  }, 180_000);
});
