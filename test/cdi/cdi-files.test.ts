import { PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Storage } from '@google-cloud/storage';
import { randomUUID } from 'node:crypto';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { duckdb } from '../../src/platform/lib/duckdb.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { insertProfiles } from '../helpers/export-fixtures.js';
import { startGcsEmulator, type RunningGcs } from '../helpers/gcs-emulator.js';
import { startS3rver, type RunningS3 } from '../helpers/s3rver.js';
import { bearer, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/**
 * Cloud Data Ingestion from files under a prefix of the workspace's store, in the three formats, from the built-in
 * local store, S3 (s3rver) and GCS (the emulator): each file taken once per key and etag, in key order, its bad lines
 * refused beside it, a file replaced in place taken again.
 */

let env: TestEnv;
let s3: RunningS3;
let gcs: RunningGcs;
const ws: Record<'local' | 's3' | 'gcs', SeededWorkspace> = {} as never;
const integration: Record<'local' | 's3' | 'gcs', string> = {
  local: randomUUID(),
  s3: randomUUID(),
  gcs: randomUUID(),
};
const scratch = `/tmp/ces-cdi-files-${randomUUID().slice(0, 8)}`;

beforeAll(async () => {
  [env, s3, gcs] = await Promise.all([
    createTestEnv({ CDI_BATCH_ROWS: '2' }),
    startS3rver('lake'),
    startGcsEmulator('lake'),
  ]);
  for (const kind of ['local', 's3', 'gcs'] as const) {
    ws[kind] = await seedWorkspace(env.ctx.pool);
    await insertProfiles(env.ctx.pool, ws[kind].workspaceId, 1, 10);
  }
  await env.ctx.pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
    ws.s3.workspaceId,
    JSON.stringify(s3.destination),
  ]);
  await env.ctx.pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
    ws.gcs.workspaceId,
    JSON.stringify(gcs.destination),
  ]);
  for (const kind of ['local', 's3', 'gcs'] as const) {
    await env.ctx.pool.query(
      `INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'lake drops', $3)`,
      [
        integration[kind],
        ws[kind].workspaceId,
        JSON.stringify({
          type: 'bucket',
          prefix: 'cdi/users/',
          format: kind === 'local' ? 'parquet' : kind === 's3' ? 'ndjson' : 'csv',
        }),
      ],
    );
  }
  await mkdir(scratch, { recursive: true });
  env.startWorkers([cdiSyncJob]);
}, 120_000);

afterAll(async () => {
  await env?.close();
  await Promise.all([s3?.close(), gcs?.close()]);
  await rm(scratch, { recursive: true, force: true });
});

async function sync(kind: 'local' | 's3' | 'gcs'): Promise<Record<string, unknown>> {
  const res = await env.app.inject({
    method: 'POST',
    url: `/cdi/integrations/${integration[kind]}/sync`,
    headers: bearer(ws[kind].apiKey),
  });
  expect(res.statusCode, res.body).toBe(202);
  let latest: Record<string, unknown> = {};
  await waitFor(
    async () => {
      const status = await env.app.inject({
        method: 'GET',
        url: `/cdi/integrations/${integration[kind]}/job_sync_status`,
        headers: bearer(ws[kind].apiKey),
      });
      latest = status.json().results[0];
      return latest.job_status !== 'running';
    },
    60_000,
    100,
  );
  return latest;
}

const attributesOf = async (kind: 'local' | 's3' | 'gcs', externalId: string) =>
  ((
    await env.ctx.pool.query(`SELECT custom_attributes FROM profiles WHERE workspace_id = $1 AND external_id = $2`, [
      ws[kind].workspaceId,
      externalId,
    ])
  ).rows[0]?.custom_attributes ?? null) as Record<string, unknown> | null;

/** Writes a Parquet file of rows with DuckDB (PAYLOAD as JSON text, as a warehouse writes it). */
async function parquet(
  file: string,
  rows: Array<{ external_id: string | null; payload: string; deleted?: boolean }>,
): Promise<void> {
  const conn = await (await duckdb()).connect();
  try {
    const values = rows
      .map(
        (r) =>
          `(${r.external_id === null ? 'NULL' : `'${r.external_id}'`}, '${r.payload.replaceAll("'", "''")}', ${r.deleted ? 'true' : 'false'})`,
      )
      .join(', ');
    await conn.run(
      `COPY (SELECT * FROM (VALUES ${values}) AS t("EXTERNAL_ID", "PAYLOAD", "DELETED")) TO '${file}' (FORMAT parquet)`,
    );
  } finally {
    conn.closeSync();
  }
}

describe('CDI from files', () => {
  it('Parquet in the built-in store: files in key order, each once, bad rows refused beside them, a replaced file taken again', async () => {
    const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws.local), 'cdi/users');
    await mkdir(dir, { recursive: true });
    await parquet(path.join(dir, '2026-01-02.parquet'), [{ external_id: 'ext-1', payload: '{"tier": "second"}' }]);
    await parquet(path.join(dir, '2026-01-01.parquet'), [
      { external_id: 'ext-1', payload: '{"tier": "first"}' },
      { external_id: 'ext-2', payload: '{"tier": "gold", "nested": {"a": [1, 2]}}' },
      { external_id: null, payload: '{"tier": "nobody"}' },
      { external_id: 'ext-3', payload: '{}', deleted: true },
    ]);
    await writeFile(path.join(dir, 'notes.txt'), 'not a source');
    const run = await sync('local');
    expect(run).toMatchObject({
      job_status: 'partial',
      rows_synced: 4,
      rows_failed_with_errors: 1,
      last_timestamp_synced: null,
    });
    // Key order: 2026-01-02 last, so its value wins.
    expect(await attributesOf('local', 'ext-1')).toMatchObject({ tier: 'second' });
    expect(await attributesOf('local', 'ext-2')).toMatchObject({ tier: 'gold', nested: { a: [1, 2] } });
    expect(await attributesOf('local', 'ext-3')).toBeNull();
    const files = (
      await env.ctx.pool.query(`SELECT key, rows FROM cdi_files_synced WHERE integration_id = $1 ORDER BY key`, [
        integration.local,
      ])
    ).rows;
    expect(files).toEqual([
      { key: 'cdi/users/2026-01-01.parquet', rows: 4 },
      { key: 'cdi/users/2026-01-02.parquet', rows: 1 },
    ]);
    const job = (
      await env.ctx.pool.query(`SELECT id, rejects_key FROM cdi_sync_jobs WHERE integration_id = $1`, [
        integration.local,
      ])
    ).rows[0];
    expect(job.rejects_key).toBe(`cdi/users/${job.id}.rejects.ndjson`);
    const rejects = (
      await readFile(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws.local), job.rejects_key), 'utf8')
    )
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rejects).toEqual([
      {
        reason: expect.stringContaining('names no user'),
        file: 'cdi/users/2026-01-01.parquet',
        line: 3,
        row: { external_id: null, payload: '{"tier": "nobody"}', deleted: false },
      },
    ]);

    // Nothing new: nothing taken (the rejects file beside the sources is not one).
    expect(await sync('local')).toMatchObject({ job_status: 'success', rows_synced: 0 });
    // A file replaced in place is a new etag: taken again.
    await new Promise((r) => setTimeout(r, 20));
    await parquet(path.join(dir, '2026-01-02.parquet'), [
      { external_id: 'ext-1', payload: '{"tier": "second, revised"}' },
    ]);
    expect(await sync('local')).toMatchObject({ job_status: 'success', rows_synced: 1 });
    expect(await attributesOf('local', 'ext-1')).toMatchObject({ tier: 'second, revised' });
  });

  it('NDJSON from S3, gzipped or not, payload as JSON text or an object; a bad line refused, the file still taken', async () => {
    const client = new S3Client({
      endpoint: s3.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    const lines = [
      JSON.stringify({ external_id: 'ext-4', payload: JSON.stringify({ tier: 'text' }) }),
      '{not json',
      JSON.stringify({ EXTERNAL_ID: 'ext-5', PAYLOAD: { tier: 'object' } }),
    ];
    await client.send(
      new PutObjectCommand({
        Bucket: 'lake',
        Key: 'cdi/users/a.ndjson.gz',
        Body: gzipSync(Buffer.from(lines.join('\n'))),
      }),
    );
    await client.send(
      new PutObjectCommand({
        Bucket: 'lake',
        Key: 'cdi/users/b.ndjson',
        Body: JSON.stringify({ external_id: 'ext-6', payload: '{"tier": "plain"}' }),
      }),
    );
    await client.send(
      new PutObjectCommand({
        Bucket: 'lake',
        Key: 'elsewhere/c.ndjson',
        Body: JSON.stringify({ external_id: 'ext-7', payload: '{"tier": "outside"}' }),
      }),
    );
    const run = await sync('s3');
    expect(run).toMatchObject({ job_status: 'partial', rows_synced: 3, rows_failed_with_errors: 1 });
    expect(await attributesOf('s3', 'ext-4')).toMatchObject({ tier: 'text' });
    expect(await attributesOf('s3', 'ext-5')).toMatchObject({ tier: 'object' });
    expect(await attributesOf('s3', 'ext-6')).toMatchObject({ tier: 'plain' });
    expect(await attributesOf('s3', 'ext-7')).not.toMatchObject({ tier: 'outside' });
    client.destroy();
  });

  it('CSV from GCS with a header in any case', async () => {
    const storage = new Storage({ apiEndpoint: gcs.endpoint, projectId: 'demo-test' });
    const csv = 'External_Id,Payload\next-8,"{""tier"": ""csv""}"\next-9,"{""score"": 3}"\n';
    await storage.bucket('lake').file('cdi/users/one.csv').save(csv);
    const run = await sync('gcs');
    expect(run).toMatchObject({ job_status: 'success', rows_synced: 2, rows_failed_with_errors: 0 });
    expect(await attributesOf('gcs', 'ext-8')).toMatchObject({ tier: 'csv' });
    expect(await attributesOf('gcs', 'ext-9')).toMatchObject({ score: 3 });
  });
});
