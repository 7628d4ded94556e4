import { GetObjectCommand, HeadObjectCommand, ListObjectsV2Command, S3Client } from '@aws-sdk/client-s3';
import { Storage } from '@google-cloud/storage';
import { createHash, randomBytes } from 'node:crypto';
import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { S3Store } from '../../src/platform/storage/s3-store.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import {
  CONTROL_FILES,
  createSegment,
  insertProfiles,
  readPartFile,
  requestExport,
  waitForExport,
  startCallbackReceiver,
} from '../helpers/export-fixtures.js';
import { startGcsEmulator, type RunningGcs } from '../helpers/gcs-emulator.js';
import { readParquet } from '../helpers/parquet-values.js';
import { startS3rver, type RunningS3 } from '../helpers/s3rver.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

const MEMBERS = 7_000;

let env: TestEnv;
let s3: RunningS3;
let gcs: RunningGcs;
let s3Ws: SeededWorkspace;
let gcsWs: SeededWorkspace;
let receiver: Awaited<ReturnType<typeof startCallbackReceiver>>;
let receiverUrl: string;
let callbacks: unknown[] = [];
let scratch: string;

beforeAll(async () => {
  [env, s3, gcs] = await Promise.all([
    createTestEnv({ EXPORT_SHARD_BUCKETS: '5000', CALLBACK_ALLOW_PRIVATE: 'true', EXPORT_SHARD_ATTEMPTS: '2' }),
    startS3rver(),
    startGcsEmulator(),
  ]);
  scratch = await mkdtemp(path.join(tmpdir(), 'ces-bucket-parts-'));
  s3Ws = await seedWorkspace(env.ctx.pool);
  gcsWs = await seedWorkspace(env.ctx.pool);
  await env.ctx.pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
    s3Ws.workspaceId,
    JSON.stringify({ ...s3.destination, prefix: 'exports/' }),
  ]);
  await env.ctx.pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
    gcsWs.workspaceId,
    JSON.stringify(gcs.destination),
  ]);
  for (const w of [s3Ws, gcsWs]) {
    await createSegment(env.ctx.pool, w.workspaceId, 'seg-us');
    await insertProfiles(env.ctx.pool, w.workspaceId, w === s3Ws ? 1 : 100_001, MEMBERS);
    await insertProfiles(env.ctx.pool, w.workspaceId, w === s3Ws ? 50_001 : 150_001, 300, false);
  }
  receiver = await startCallbackReceiver();
  receiverUrl = receiver.url;
  callbacks = receiver.received;
  env.startWorkers([segmentExportJob, exportShardJob, exportCallbackJob]);
}, 120_000);
afterAll(async () => {
  receiver?.close();
  await env?.close();
  await Promise.all([s3?.close(), gcs?.close()]);
  if (scratch) await rm(scratch, { recursive: true, force: true });
});

/** Checks what a loader would: the listed objects, their bytes against the manifest, their lines. */
async function verifyBucket(
  list: string[],
  fetch: (key: string) => Promise<Buffer>,
  keyPrefix: string,
  ext: '.gz' | '.zip',
  base: number,
) {
  const manifest = JSON.parse((await fetch(`${keyPrefix}/manifest.json`)).toString()) as ExportManifest;
  expect(manifest.users).toBe(MEMBERS);
  expect(manifest.parts.map((p) => p.users)).toEqual([5000, 2000]);
  // The parts, and beside them the schema, the manifest and the completion marker, in every destination.
  expect([...list].sort()).toEqual(
    [...manifest.parts.map((p) => p.key), ...CONTROL_FILES.map((f) => `${keyPrefix}/${f}`)].sort(),
  );
  expect(JSON.parse((await fetch(`${keyPrefix}/_SUCCESS`)).toString())).toMatchObject({
    object_prefix: manifest.object_prefix,
    users: MEMBERS,
    parts: 2,
    manifest: 'manifest.json',
  });
  const schema = (await fetch(`${keyPrefix}/schema.json`)).toString();
  expect(schema.trimEnd().split('\n')).toHaveLength(1);
  expect(manifest.schema).toEqual({ file: 'schema.json', key: `${keyPrefix}/schema.json` });
  expect(Object.keys(JSON.parse(schema).properties)).toEqual(manifest.fields_to_export);
  const ids = new Set<string>();
  for (const p of manifest.parts) {
    expect(p.key.startsWith(`${keyPrefix}/`)).toBe(true);
    expect(p.key.endsWith(ext)).toBe(true);
    const bytes = await fetch(p.key);
    expect(bytes.length).toBe(p.bytes);
    expect(createHash('sha256').update(bytes).digest('hex')).toBe(p.sha256);
    const file = path.join(scratch, path.basename(p.key));
    await writeFile(file, bytes);
    const lines = await readPartFile(file);
    expect(lines).toHaveLength(p.users);
    for (const l of lines) ids.add(JSON.parse(l).external_id);
  }
  expect(ids.size).toBe(MEMBERS);
  expect(ids.has(`ext-${base}`) && ids.has(`ext-${base + MEMBERS - 1}`)).toBe(true);
}

describe('segment export to the workspace bucket', () => {
  it('S3 (s3rver): gzip parts under the destination prefix, byte for byte as the manifest says, and a callback without url', async () => {
    const res = await requestExport(env, s3Ws.apiKey, {
      segment_id: 'seg-us',
      fields_to_export: ['external_id', 'email', 'custom_events'],
      output_format: 'gzip',
      callback_endpoint: receiverUrl,
    });
    expect(res.status).toBe(201);
    expect(res.body).not.toHaveProperty('url');
    const prefix = String(res.body.object_prefix);
    const done = await waitForExport(env, s3Ws.apiKey, prefix);
    expect(done).toMatchObject({ status: 'ready', destination: 's3', users_done: MEMBERS, parts_done: 2 });
    expect(done).not.toHaveProperty('url');
    const day = new Date().toISOString().slice(0, 10);
    const keyPrefix = `exports/segment-export/seg-us/${day}/${prefix}`;
    expect(done.key_prefix).toBe(keyPrefix);

    const client = new S3Client({
      endpoint: s3.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    const listed = await client.send(new ListObjectsV2Command({ Bucket: s3.bucket, Prefix: 'exports/' }));
    const fetch = async (key: string) =>
      Buffer.from(
        await (await client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }))).Body!.transformToByteArray(),
      );
    await verifyBucket(
      (listed.Contents ?? []).map((o) => o.Key!),
      fetch,
      keyPrefix,
      '.gz',
      1,
    );
    client.destroy();

    const deadline = Date.now() + 10_000;
    while (callbacks.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(callbacks).toEqual([{ success: true }]);
  });

  it('S3 store: a 12 MiB stream goes up as a multipart upload and comes back identical', async () => {
    const store = new S3Store({ ...s3.destination, prefix: '' });
    const data = randomBytes(12 * 1024 * 1024);
    await store.put('multipart/big.bin', Readable.from([data.subarray(0, 5_000_000), data.subarray(5_000_000)]));
    expect(await store.head('multipart/big.bin')).toBe(data.length);
    const chunks: Buffer[] = [];
    for await (const c of await store.get('multipart/big.bin')) chunks.push(c as Buffer);
    expect(Buffer.concat(chunks).equals(data)).toBe(true);
    await store.delete(['multipart/big.bin']);
    expect(await store.head('multipart/big.bin')).toBeNull();
    store.close();
  });

  it('GCS (emulator): zip parts, byte for byte as the manifest says', async () => {
    const res = await requestExport(env, gcsWs.apiKey, {
      segment_id: 'seg-us',
      fields_to_export: ['external_id', 'devices'],
    });
    expect(res.status).toBe(201);
    expect(res.body).not.toHaveProperty('url');
    const prefix = String(res.body.object_prefix);
    const done = await waitForExport(env, gcsWs.apiKey, prefix);
    expect(done).toMatchObject({ status: 'ready', destination: 'gcs', users_done: MEMBERS, parts_done: 2 });
    const keyPrefix = String(done.key_prefix);
    expect(keyPrefix).toMatch(new RegExp(`^segment-export/seg-us/\\d{4}-\\d{2}-\\d{2}/${prefix}$`));

    const storage = new Storage({ apiEndpoint: gcs.endpoint, projectId: gcs.projectId });
    const [files] = await storage.bucket(gcs.bucket).getFiles({ prefix: 'segment-export/' });
    const fetch = async (key: string) => (await storage.bucket(gcs.bucket).file(key).download())[0];
    await verifyBucket(
      files.map((f) => f.name),
      fetch,
      keyPrefix,
      '.zip',
      100_001,
    );
  });

  it('a bucket that refuses uploads fails the export: status failed with the reason, a failure callback, locks released', async () => {
    const broken = await seedWorkspace(env.ctx.pool);
    await env.ctx.pool.query(`UPDATE workspaces SET export_destination = $2 WHERE id = $1`, [
      broken.workspaceId,
      JSON.stringify({ ...s3.destination, bucket: 'no-such-bucket' }),
    ]);
    await createSegment(env.ctx.pool, broken.workspaceId, 'seg-us');
    await insertProfiles(env.ctx.pool, broken.workspaceId, 200_001, 50);
    callbacks.length = 0;
    const res = await requestExport(env, broken.apiKey, {
      segment_id: 'seg-us',
      fields_to_export: ['external_id'],
      callback_endpoint: receiverUrl,
    });
    expect(res.status).toBe(201);
    const done = await waitForExport(env, broken.apiKey, String(res.body.object_prefix));
    expect(done.status).toBe('failed');
    expect(String(done.error)).toMatch(
      /failed while (reading or uploading users|assembling its last part or manifest): .*bucket/i,
    );
    const deadline = Date.now() + 10_000;
    while (callbacks.length === 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
    expect(callbacks).toEqual([{ success: false, error: done.error }]);
    const again = await requestExport(env, broken.apiKey, { segment_id: 'seg-us', fields_to_export: ['external_id'] });
    expect(again.status).toBe(201);
  });
  it('Parquet parts in S3 and GCS: .parquet keys, the Parquet content type, readable with every member once', async () => {
    const s3Client = new S3Client({
      endpoint: s3.endpoint,
      region: 'us-east-1',
      forcePathStyle: true,
      credentials: { accessKeyId: 'S3RVER', secretAccessKey: 'S3RVER' },
    });
    const storage = new Storage({ apiEndpoint: gcs.endpoint, projectId: gcs.projectId });
    const targets = [
      {
        ws: s3Ws,
        base: 1,
        fetch: async (key: string) =>
          Buffer.from(
            await (
              await s3Client.send(new GetObjectCommand({ Bucket: s3.bucket, Key: key }))
            ).Body!.transformToByteArray(),
          ),
        contentType: async (key: string) =>
          (await s3Client.send(new HeadObjectCommand({ Bucket: s3.bucket, Key: key }))).ContentType,
      },
      {
        ws: gcsWs,
        base: 100_001,
        fetch: async (key: string) => (await storage.bucket(gcs.bucket).file(key).download())[0],
        contentType: async (key: string) => (await storage.bucket(gcs.bucket).file(key).getMetadata())[0].contentType,
      },
    ];
    for (const t of targets) {
      const res = await requestExport(env, t.ws.apiKey, {
        segment_id: 'seg-us',
        fields_to_export: ['external_id', 'email'],
        output_format: 'parquet',
      });
      expect(res.status).toBe(201);
      const done = await waitForExport(env, t.ws.apiKey, String(res.body.object_prefix));
      expect(done).toMatchObject({ status: 'ready', users_done: MEMBERS, parts_done: 2 });
      const manifest = JSON.parse(
        (await t.fetch(`${String(done.key_prefix)}/manifest.json`)).toString(),
      ) as ExportManifest;
      expect(manifest.output_format).toBe('parquet');
      const ids = new Set<string>();
      for (const p of manifest.parts) {
        expect(p.key).toMatch(/\/[0-9a-f]{32}\.parquet$/);
        expect(await t.contentType(p.key)).toBe('application/vnd.apache.parquet');
        const bytes = await t.fetch(p.key);
        expect(createHash('sha256').update(bytes).digest('hex')).toBe(p.sha256);
        const file = path.join(scratch, path.basename(p.key));
        await writeFile(file, bytes);
        const { rows } = await readParquet(file);
        expect(rows).toHaveLength(p.users);
        for (const r of rows) ids.add(String(r.external_id));
      }
      expect(ids.size).toBe(MEMBERS);
      expect(ids.has(`ext-${t.base}`) && ids.has(`ext-${t.base + MEMBERS - 1}`)).toBe(true);
    }
    s3Client.destroy();
  });
});
