import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { duckdb } from '../../src/platform/lib/duckdb.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { attributesOf, jobRow, putLocal, rejectsOf, syncOnce } from '../helpers/cdi.js';
import { cliEnvOf, repoRoot } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';

/**
 * The 1 MB cap of PAYLOAD holds for every kind of payload: JSON text, a json/jsonb column, a Parquet struct, an NDJSON
 * object; a refused row keeps at most the first 1 KB of its payload in the rejects. And a table of 1 MB payloads syncs
 * in bounded memory: batches are bounded by bytes, not only rows (peak RSS of the `ces cdi sync` process, as the
 * kernel counts it, read through /usr/bin/time).
 */

const env = useTestEnv({ workspaces: ['ws'] });
const SOURCE_SCHEMA = `cdi_size_${randomUUID().slice(0, 8)}`;
const URL_ENV = `CES_TEST_CDI_SIZE_${randomUUID().slice(0, 8).toUpperCase()}`;
const TEXT = randomUUID();
const JSONB = randomUUID();
const NDJSON = randomUUID();
const PARQUET = randomUUID();
const BIG_JSONB = randomUUID();
const MB = 1024 * 1024;
let warehouse: pg.Client;

/** A valid attributes object of about `bytes` bytes of JSON: many attributes of 250 characters. */
const manyAttributes = (bytes: number) =>
  Object.fromEntries(Array.from({ length: Math.ceil(bytes / 262) }, (_, k) => [`a${k}`, 'y'.repeat(250)]));

beforeAll(async () => {
  process.env[URL_ENV] = env.config.DATABASE_URL;
  warehouse = new pg.Client({ connectionString: env.config.DATABASE_URL });
  await warehouse.connect();
  await warehouse.query(`CREATE SCHEMA ${SOURCE_SCHEMA}`);
  await warehouse.query(
    `CREATE TABLE ${SOURCE_SCHEMA}.text_rows (updated_at timestamptz NOT NULL, external_id text, payload text)`,
  );
  for (const table of ['jsonb_rows', 'big_rows'])
    await warehouse.query(
      `CREATE TABLE ${SOURCE_SCHEMA}.${table} (updated_at timestamptz NOT NULL, external_id text, payload jsonb)`,
    );
  const integrations: Array<[string, Record<string, unknown>]> = [
    [TEXT, { type: 'postgres', url_env: URL_ENV, table: `${SOURCE_SCHEMA}.text_rows` }],
    [JSONB, { type: 'postgres', url_env: URL_ENV, table: `${SOURCE_SCHEMA}.jsonb_rows` }],
    [BIG_JSONB, { type: 'postgres', url_env: URL_ENV, table: `${SOURCE_SCHEMA}.big_rows` }],
    [NDJSON, { type: 'bucket', prefix: 'cdi/ndjson/', format: 'ndjson' }],
    [PARQUET, { type: 'bucket', prefix: 'cdi/parquet/', format: 'parquet' }],
  ];
  for (const [id, source] of integrations)
    await env.ctx.pool.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, $3, $4)`, [
      id,
      env.ws.workspaceId,
      `size ${id.slice(0, 8)}`,
      JSON.stringify(source),
    ]);
  env.startWorkers([cdiSyncJob]);
});

afterAll(async () => {
  await warehouse?.query(`DROP SCHEMA IF EXISTS ${SOURCE_SCHEMA} CASCADE`);
  await warehouse?.end();
  delete process.env[URL_ENV];
});

/** Each reject of the newest run: its reason, and its payload's size as kept (at most 1 KB). */
async function rejected(integration: string) {
  return (await rejectsOf(env, env.ws, integration)).map((r) => {
    const payload = (r.row as Record<string, unknown> | undefined)?.payload;
    const kept = typeof payload === 'string' ? payload : JSON.stringify(payload ?? null);
    const bytes = Buffer.byteLength(kept);
    return { reason: r.reason, keptAtMost1Kb: bytes >= 100 && bytes <= 1024 };
  });
}

/** A refusal for size: its reason, and a payload kept to its first 1 KB (at least something of it, at most 1 KB). */
const refusedForSize = { reason: 'PAYLOAD is larger than 1 MB', keptAtMost1Kb: true };

describe('CDI payload size', () => {
  it('refuses a PAYLOAD over 1 MB as text, jsonb, an NDJSON object or a Parquet struct, keeping 1 KB of it', async () => {
    const over = manyAttributes(1.2 * MB);
    const under = manyAttributes(0.5 * MB);
    for (const table of ['text_rows', 'jsonb_rows'])
      await warehouse.query(
        `INSERT INTO ${SOURCE_SCHEMA}.${table} VALUES ('2026-01-01', 'over-${table}', $1), ('2026-01-02', 'under-${table}', $2)`,
        [JSON.stringify(over), JSON.stringify(under)],
      );
    for (const [integration, table] of [
      [TEXT, 'text_rows'],
      [JSONB, 'jsonb_rows'],
    ] as const) {
      expect(await syncOnce(env, env.ws, integration), table).toMatchObject({
        job_status: 'partial',
        rows_synced: 1,
        rows_failed_with_errors: 1,
      });
      expect(await rejected(integration), table).toEqual([refusedForSize]);
      expect(Object.keys((await attributesOf(env, env.ws, `under-${table}`)) ?? {}), table).toHaveLength(
        Object.keys(under).length,
      );
      expect(await attributesOf(env, env.ws, `over-${table}`), table).toBeNull();
    }

    await putLocal(
      env,
      env.ws,
      'cdi/ndjson/a.ndjson',
      [
        JSON.stringify({ external_id: 'over-ndjson', payload: over }),
        JSON.stringify({ external_id: 'over-ndjson-text', payload: JSON.stringify(over) }),
        // A line longer than 4 MB is refused unread (no payload of 1 MB needs that much), the next ones taken.
        JSON.stringify({ external_id: 'huge-line', payload: { big: 'z'.repeat(5 * MB) } }),
        JSON.stringify({ external_id: 'under-ndjson', payload: under }),
      ].join('\r\n'),
    );
    expect(await syncOnce(env, env.ws, NDJSON)).toMatchObject({ rows_synced: 1, rows_failed_with_errors: 3 });
    expect(await rejected(NDJSON)).toEqual([
      refusedForSize,
      refusedForSize,
      { reason: 'line 3 is longer than 4 MB', keptAtMost1Kb: false },
    ]);
    expect(Object.keys((await attributesOf(env, env.ws, 'under-ndjson')) ?? {})).toHaveLength(
      Object.keys(under).length,
    );
    expect(await attributesOf(env, env.ws, 'over-ndjson')).toBeNull();

    // A Parquet file whose PAYLOAD is a struct (DuckDB's from a JSON object), one over 1 MB, one under.
    const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), 'cdi/parquet');
    await putLocal(env, env.ws, 'cdi/parquet/.keep', '');
    const struct = (o: Record<string, string>) =>
      `{${Object.entries(o)
        .map(([k, v]) => `'${k}': '${v}'`)
        .join(', ')}}`;
    const conn = await (await duckdb()).connect();
    try {
      for (const [name, value] of [
        ['over', over],
        ['under', under],
      ] as const)
        await conn.run(
          `COPY (SELECT '${name}-parquet' AS "EXTERNAL_ID", ${struct(value as Record<string, string>)} AS "PAYLOAD") TO '${dir}/${name}.parquet' (FORMAT parquet)`,
        );
    } finally {
      conn.closeSync();
    }
    expect(await syncOnce(env, env.ws, PARQUET)).toMatchObject({ rows_synced: 1, rows_failed_with_errors: 1 });
    expect(await rejected(PARQUET)).toEqual([refusedForSize]);
    expect(await attributesOf(env, env.ws, 'over-parquet')).toBeNull();
    expect(Object.keys((await attributesOf(env, env.ws, 'under-parquet')) ?? {})).toHaveLength(
      Object.keys(under).length,
    );
  });

  it('syncs a table of 1 MB jsonb payloads with a peak RSS under 512 MB', async () => {
    // 400 rows of a 1 MB string attribute (refused: an attribute string is at most 255 characters), 30 valid rows of
    // 1 MB of attributes, 5 over the cap: about 430 MB read, a few MB at a time.
    await warehouse.query(
      `INSERT INTO ${SOURCE_SCHEMA}.big_rows
       SELECT timestamptz '2026-02-01' + g * interval '1 second', 'long-' || g, jsonb_build_object('big', repeat('x', 1000000))
         FROM generate_series(1, 400) g`,
    );
    await warehouse.query(
      `INSERT INTO ${SOURCE_SCHEMA}.big_rows SELECT timestamptz '2026-02-01' + g * interval '1.5 second', 'wide-' || g, $1::jsonb
         FROM generate_series(1, 30) g`,
      [JSON.stringify(manyAttributes(0.95 * MB))],
    );
    await warehouse.query(
      `INSERT INTO ${SOURCE_SCHEMA}.big_rows SELECT timestamptz '2026-02-01' + g * interval '3 second', 'over-' || g, jsonb_build_object('big', repeat('x', 1200000))
         FROM generate_series(1, 5) g`,
    );
    const run = await new Promise<{ code: number | null; stdout: string; stderr: string }>((resolve, reject) => {
      const child = spawn(
        '/usr/bin/time',
        [
          '-f',
          'maxrss_kb=%M',
          process.execPath,
          '--import',
          'tsx',
          path.join(repoRoot, 'src/cli.ts'),
          'cdi',
          'sync',
          BIG_JSONB,
          '--wait',
        ],
        { cwd: repoRoot, env: { ...process.env, ...cliEnvOf(env.config, { [URL_ENV]: env.config.DATABASE_URL }) } },
      );
      let stdout = '';
      let stderr = '';
      child.stdout.on('data', (d) => (stdout += d));
      child.stderr.on('data', (d) => (stderr += d));
      child.on('error', reject);
      child.on('exit', (code) => resolve({ code, stdout, stderr }));
    });
    expect(run.code, `${run.stdout}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toMatch(/partial: 30 row\(s\) synced, 405 refused/);
    const peakMb = Number(/maxrss_kb=(\d+)/.exec(run.stderr)![1]) / 1024;
    expect(peakMb, `peak RSS ${peakMb.toFixed(0)} MB`).toBeLessThan(512);
    expect(Object.keys((await attributesOf(env, env.ws, 'wide-30')) ?? {}).length).toBeGreaterThan(3000);
    const reasons = (await rejected(BIG_JSONB)).map((r) => r.reason);
    expect(reasons.filter((r) => r === 'PAYLOAD is larger than 1 MB')).toHaveLength(5);
    expect(await jobRow(env, BIG_JSONB)).toMatchObject({ status: 'partial' });
  }, 240_000);
});
