import { GetObjectCommand, PutObjectCommand, S3Client } from '@aws-sdk/client-s3';
import { Storage } from '@google-cloud/storage';
import { gzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bulkImportJob } from '../../jobs/bulk-import.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { waitFor } from '../helpers/cli.js';
import { startGcsEmulator, type RunningGcs } from '../helpers/gcs-emulator.js';
import { startS3rver, type RunningS3 } from '../helpers/s3rver.js';
import { bearer, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';
import { entries } from '../helpers/aggregates.js';

let env: TestEnv;
let s3: RunningS3;
let gcs: RunningGcs;
let s3Ws: SeededWorkspace;
let gcsWs: SeededWorkspace;

beforeAll(async () => {
  [env, s3, gcs] = await Promise.all([
    createTestEnv({ INGEST_IMPORT_BATCH: '2' }),
    startS3rver('imports'),
    startGcsEmulator('imports'),
  ]);
  s3Ws = await seedWorkspace(env.ctx.pool);
  gcsWs = await seedWorkspace(env.ctx.pool);
  await env.ctx.pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
    s3Ws.workspaceId,
    JSON.stringify(s3.destination),
  ]);
  await env.ctx.pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
    gcsWs.workspaceId,
    JSON.stringify(gcs.destination),
  ]);
  env.startWorkers([bulkImportJob]);
}, 120_000);
afterAll(async () => {
  await env?.close();
  await Promise.all([s3?.close(), gcs?.close()]);
});

const FILE = [
  JSON.stringify({ external_id: 'b1', name: 'seen', time: '2024-01-01T00:00:00Z' }),
  JSON.stringify({ external_id: 'b1', name: 'seen', time: '2024-01-03T00:00:00Z' }),
  'not json at all',
  JSON.stringify({
    external_id: 'b2',
    name: 'seen',
    time: '2024-01-02T00:00:00Z',
    properties: { big: 's'.repeat(256) },
  }),
  JSON.stringify({ external_id: 'b2', name: 'seen', time: '2024-01-02T00:00:00Z' }),
].join('\n');

async function importAndWait(ws: SeededWorkspace, key: string) {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/import',
    headers: { ...bearer(ws.apiKey), 'content-type': 'application/json' },
    payload: { source: 'bucket', key },
  });
  expect(res.statusCode, res.body).toBe(201);
  const id = res.json().import_id as string;
  let status: Record<string, unknown> = {};
  await waitFor(async () => {
    status = (await env.app.inject({ method: 'GET', url: `/users/import/${id}`, headers: bearer(ws.apiKey) })).json();
    return status.status === 'completed' || status.status === 'failed';
  }, 60_000);
  return status;
}

async function eventsOf(ws: SeededWorkspace, externalId: string) {
  const { rows } = await env.ctx.pool.query(
    'SELECT custom_events FROM profiles WHERE workspace_id = $1 AND external_id = $2',
    [ws.workspaceId, externalId],
  );
  return entries(rows[0]?.custom_events);
}

function checkRejects(text: string) {
  const lines = text
    .trim()
    .split('\n')
    .map((l) => JSON.parse(l));
  expect(lines).toEqual([
    { line: 3, reason: expect.stringMatching(/malformed JSON/), object: 'not json at all' },
    {
      line: 4,
      reason: expect.stringMatching(/at most 255 characters/),
      object: expect.objectContaining({ external_id: 'b2' }),
    },
  ]);
}

describe('bulk import from a bucket', () => {
  it('reads a gzipped file from S3 (s3rver) and writes the rejects beside it in the bucket', async () => {
    const client = new S3Client({
      endpoint: s3.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    await client.send(
      new PutObjectCommand({ Bucket: 'imports', Key: 'in/day.ndjson.gz', Body: gzipSync(Buffer.from(FILE)) }),
    );
    const status = await importAndWait(s3Ws, 'in/day.ndjson.gz');
    expect(status).toMatchObject({
      status: 'completed',
      store: 's3',
      records_handled: 5,
      events_applied: 3,
      rejected: 2,
      rejects_key: 'in/day.ndjson.rejects.ndjson',
    });
    expect(await eventsOf(s3Ws, 'b1')).toEqual([
      { name: 'seen', first: '2024-01-01T00:00:00.000Z', last: '2024-01-03T00:00:00.000Z', count: 2 },
    ]);
    const rejects = await client.send(new GetObjectCommand({ Bucket: 'imports', Key: 'in/day.ndjson.rejects.ndjson' }));
    checkRejects(await rejects.Body!.transformToString());
    client.destroy();
  });

  it('reads a file from GCS (the emulator) and writes the rejects beside it in the bucket', async () => {
    const storage = new Storage({ apiEndpoint: gcs.endpoint, projectId: gcs.projectId });
    await storage.bucket('imports').file('in/day.ndjson').save(Buffer.from(FILE), { resumable: false });
    const status = await importAndWait(gcsWs, 'in/day.ndjson');
    expect(status).toMatchObject({ status: 'completed', store: 'gcs', events_applied: 3, rejected: 2 });
    expect(await eventsOf(gcsWs, 'b2')).toEqual([
      { name: 'seen', first: '2024-01-02T00:00:00.000Z', last: '2024-01-02T00:00:00.000Z', count: 1 },
    ]);
    const [bytes] = await storage.bucket('imports').file('in/day.ndjson.rejects.ndjson').download();
    checkRejects(bytes.toString());
  });

  it('answers 404 for a key that is not in the bucket', async () => {
    const res = await env.app.inject({
      method: 'POST',
      url: '/users/import',
      headers: { ...bearer(s3Ws.apiKey), 'content-type': 'application/json' },
      payload: { source: 'bucket', key: 'in/missing.ndjson' },
    });
    expect(res.statusCode).toBe(404);
    expect(res.json().message).toMatch(/No object "in\/missing\.ndjson" in the s3 bucket imports/);
  });
});
