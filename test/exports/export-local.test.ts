import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtemp, readFile, readdir, rm, stat, writeFile } from 'node:fs/promises';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { failExport, finishExport } from '../../src/pipelines/exports/finish/finish-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { type TestEnv, useTestEnv } from '../helpers/context.js';
import {
  CONTROL_FILES,
  createSegment,
  exportStatus,
  insertProfiles,
  OLD,
  readPartFile,
  RECENT,
  requestExport,
  waitForExport,
  zipEntries,
} from '../helpers/export-fixtures.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';

const run = promisify(execFile);

// Three shards (0-3334, 3334-6668, 6668-10000) of about 8,667 members each: every shard uploads one full part and
// leaves a tail; the finishing job cuts the three tails into two full parts and a short last one.
const MEMBERS = 26_000;
const TTL_SECONDS = 6;
const EXPORTED_FIELDS = [
  'external_id',
  'service_id',
  'first_name',
  'email',
  'dob',
  'created_at',
  'custom_attributes',
  'custom_events',
  'purchases',
  'devices',
  'campaigns_received',
  'phone',
];

const env = useTestEnv({
  config: {
    EXPORT_SHARD_BUCKETS: '3334',
    DOWNLOAD_URL_TTL_SECONDS: String(TTL_SECONDS),
    CALLBACK_ALLOW_PRIVATE: 'true',
  },
  workspaces: ['ws', 'other'],
});
let receiver: Server;
let receiverUrl: string;
const callbacks: Array<{ body: Record<string, unknown>; answered: number }> = [];
let failNextCallbacks = 1;
const scratch: string[] = [];

beforeAll(async () => {
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'us-users');
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'nobody', { attribute: 'country', op: 'eq', value: 'ZZ' });
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, MEMBERS);
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1_000_001, 1_500, false);
  // Members of another workspace with the same segment filter must never appear.
  await insertProfiles(env.ctx.pool, env.other.workspaceId, 2_000_001, 700);

  receiver = createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      const answered = failNextCallbacks-- > 0 ? 503 : 200;
      callbacks.push({ body: JSON.parse(data), answered });
      res.writeHead(answered).end();
    });
  });
  await new Promise<void>((r) => receiver.listen(0, '127.0.0.1', r));
  receiverUrl = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/export-ready`;
}, 120_000);
afterAll(async () => {
  receiver?.close();
  await Promise.all(scratch.map((d) => rm(d, { recursive: true, force: true })));
});

function localFile(key: string): string {
  return path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), key);
}

async function partsOf(keyPrefix: string): Promise<string[]> {
  const names = await readdir(localFile(keyPrefix));
  return names.filter((n) => !CONTROL_FILES.includes(n)).map((n) => `${keyPrefix}/${n}`);
}

describe('segment export to the built-in store', () => {
  let prefix: string;
  let url: string;
  let status: Record<string, unknown>;
  let readyDownload: Awaited<ReturnType<TestEnv['app']['inject']>>;

  it('answers 201 before any worker runs; the link is 404 until ready', async () => {
    const res = await requestExport(env, env.ws.apiKey, {
      segment_id: 'us-users',
      fields_to_export: EXPORTED_FIELDS,
      callback_endpoint: receiverUrl,
    });
    expect(res.status).toBe(201);
    prefix = String(res.body.object_prefix);
    url = String(res.body.url);
    const early = await env.app.inject({ method: 'GET', url: url.replace('http://127.0.0.1:3000', '') });
    expect(early.statusCode).toBe(404);
    expect(early.json().message).toMatch(/not ready/);
  });

  it('runs to ready with every member once, in parts of exactly 5,000 lines but the last', async () => {
    env.startWorkers([segmentExportJob, exportShardJob, exportCallbackJob]);
    status = await waitForExport(env, env.ws.apiKey, prefix);
    // Fetched at once, checked below: the link lives only TTL_SECONDS in this file.
    readyDownload = await env.app.inject({ method: 'GET', url: url.replace('http://127.0.0.1:3000', '') });
    expect(status).toMatchObject({ status: 'ready', users_done: MEMBERS, parts_done: 6, destination: 'local' });

    const day = new Date().toISOString().slice(0, 10);
    const keyPrefix = String(status.key_prefix);
    expect(keyPrefix).toBe(`segment-export/us-users/${day}/${prefix}`);
    const parts = await partsOf(keyPrefix);
    expect(parts).toHaveLength(6);
    for (const key of parts)
      expect(key).toMatch(new RegExp(`^segment-export/us-users/\\d{4}-\\d{2}-\\d{2}/${prefix}/[0-9a-f]{32}\\.zip$`));

    const manifest: ExportManifest = JSON.parse(await readFile(localFile(`${keyPrefix}/manifest.json`), 'utf8'));
    expect(manifest).toMatchObject({
      object_prefix: prefix,
      segment_id: 'us-users',
      output_format: 'zip',
      users: MEMBERS,
    });
    expect(manifest.parts.map((p) => p.users)).toEqual([5000, 5000, 5000, 5000, 5000, 1000]);
    expect(manifest.parts.map((p) => p.key).sort()).toEqual([...parts].sort());

    const seen = new Map<string, number>();
    for (const p of manifest.parts) {
      const bytes = await readFile(localFile(p.key));
      expect(bytes.length).toBe(p.bytes);
      expect(createHash('sha256').update(bytes).digest('hex')).toBe(p.sha256);
      expect(await zipEntries(localFile(p.key))).toEqual([
        p.key.slice(p.key.lastIndexOf('/') + 1).replace('.zip', '.json'),
      ]);
      const lines = await readPartFile(localFile(p.key));
      expect(lines).toHaveLength(p.users);
      for (const line of lines) {
        const user = JSON.parse(line);
        seen.set(user.external_id, (seen.get(user.external_id) ?? 0) + 1);
      }
    }
    expect(seen.size).toBe(MEMBERS);
    expect([...seen.values()].every((n) => n === 1)).toBe(true);
    const missing = Array.from({ length: MEMBERS }, (_, i) => `ext-${i + 1}`).filter((id) => !seen.has(id));
    expect(missing).toEqual([]);

    // _SUCCESS: what a loader checks, written after everything else of the export.
    const success = JSON.parse(await readFile(localFile(`${keyPrefix}/_SUCCESS`), 'utf8'));
    expect(success).toEqual({
      export_id: prefix.slice(0, 36),
      object_prefix: prefix,
      users: MEMBERS,
      removed: 0,
      parts: 6,
      manifest: 'manifest.json',
    });
    const mtimes = await Promise.all(
      (await readdir(localFile(keyPrefix))).map(async (n) => ({
        n,
        t: (await stat(localFile(`${keyPrefix}/${n}`))).mtimeMs,
      })),
    );
    const successAt = mtimes.find((m) => m.n === '_SUCCESS')!.t;
    expect(mtimes.filter((m) => m.t > successAt)).toEqual([]);
  });

  it('writes exactly the requested fields, absent ones omitted, with the 90-day window', async () => {
    const manifest = JSON.parse(await readFile(localFile(`${String(status.key_prefix)}/manifest.json`), 'utf8'));
    const users: Array<Record<string, unknown> & { external_id: string }> = [];
    for (const p of manifest.parts) for (const l of await readPartFile(localFile(p.key))) users.push(JSON.parse(l));
    expect(users).toHaveLength(MEMBERS);
    const allowed = new Set([
      'external_id',
      'service_id',
      'first_name',
      'email',
      'dob',
      'created_at',
      'custom_attributes',
      'custom_events',
      'devices',
      'campaigns_received',
    ]);
    // Collected, then asserted once: an expect per key of 26,000 users would dominate the run time.
    const unexpected = new Set<string>();
    let nulls = 0;
    for (const u of users) {
      for (const [k, v] of Object.entries(u)) {
        if (!allowed.has(k)) unexpected.add(k);
        if (v === null) nulls++;
      }
    }
    // phone is requested but no profile has one; purchases are all older than 90 days.
    expect([...unexpected]).toEqual([]);
    expect(nulls).toBe(0);
    const u = users.find((x) => x.external_id === 'ext-7')!;
    expect(u).toBeDefined();
    expect(u).toEqual({
      external_id: 'ext-7',
      service_id: 'svc-7',
      first_name: 'Name\\7 "q"',
      email: 'user7@example.com',
      dob: '1990-01-08',
      created_at: '2025-01-01T00:00:00.000Z',
      custom_attributes: { tier: 1, score: 7, nested: { k: null } },
      custom_events: [{ name: 'recent_event', first: OLD, last: RECENT, count: 3 }],
      devices: [{ model: 'Pixel', carrier: null, device_id: 'd7' }],
      campaigns_received: [{ name: 'c-new', api_campaign_id: 'c1', last_received: RECENT }],
    });
    const even = users.find((x) => x.external_id === 'ext-20')!;
    expect(even).not.toHaveProperty('first_name');
    expect(even).not.toHaveProperty('devices');
  });

  it('serves one ZIP of all files at the link once ready, calls back after a failed first try, and 410 after expiry', async () => {
    const res = readyDownload;
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toBe('application/zip');
    const dir = await mkdtemp(path.join(tmpdir(), 'ces-dl-'));
    scratch.push(dir);
    const zip = path.join(dir, 'all.zip');
    await writeFile(zip, res.rawPayload);
    const entries = await zipEntries(zip);
    // The spec's "ZIP of all user files": the parts, then the manifest, and nothing a client would misread as users
    // (schema.json and _SUCCESS belong to the bucket layout only).
    expect(entries).toHaveLength(7);
    expect(entries.at(-1)).toBe(`${prefix}/manifest.json`);
    await run('unzip', ['-q', zip, '-d', dir]);
    const manifest: ExportManifest = JSON.parse(await readFile(path.join(dir, prefix, 'manifest.json'), 'utf8'));
    expect(entries.slice(0, -1)).toEqual(manifest.parts.map((p) => `${prefix}/${p.file.replace(/\.zip$/, '.json')}`));
    // Read as a client reads it: every entry but the manifest, line by line, is a user with only requested fields.
    const requested = new Set(EXPORTED_FIELDS);
    const ids = new Set<string>();
    let lines = 0;
    for (const entry of entries.filter((e) => !e.endsWith('/manifest.json'))) {
      const text = await readFile(path.join(dir, entry), 'utf8');
      for (const line of text.split('\n').filter(Boolean)) {
        const user = JSON.parse(line) as Record<string, unknown>;
        for (const key of Object.keys(user)) expect(requested).toContain(key);
        expect(user.external_id).toMatch(/^ext-\d+$/);
        ids.add(String(user.external_id));
        lines++;
      }
    }
    // Each member once.
    expect(lines).toBe(MEMBERS);
    expect(ids.size).toBe(MEMBERS);

    // The callback answered 503 once, then 200: two deliveries of the same body.
    const deadline = Date.now() + 20_000;
    while (callbacks.filter((c) => c.answered === 200).length === 0 && Date.now() < deadline)
      await new Promise((r) => setTimeout(r, 100));
    expect(callbacks.map((c) => c.answered)).toEqual([503, 200]);
    expect(callbacks[1]!.body).toEqual({ success: true, url });

    const expires = new Date(String(status.url_expires_at)).getTime();
    expect(expires - new Date(String(status.finished_at)).getTime()).toBeGreaterThan((TTL_SECONDS - 1) * 1000);
    await new Promise((r) => setTimeout(r, Math.max(0, expires - Date.now() + 200)));
    const late = await env.app.inject({ method: 'GET', url: url.replace('http://127.0.0.1:3000', '') });
    expect(late.statusCode).toBe(410);
    expect(late.json().message).toMatch(/expired/);
  });

  it('releases the segment lock when ready: a new export of the segment is accepted', async () => {
    const again = await requestExport(env, env.ws.apiKey, {
      segment_id: 'us-users',
      fields_to_export: ['external_id', 'custom_attributes', 'purchases'],
      custom_attributes_to_export: ['score', 'missing'],
      output_format: 'gzip',
    });
    expect(again.status).toBe(201);
    const done = await waitForExport(env, env.ws.apiKey, String(again.body.object_prefix));
    expect(done).toMatchObject({ status: 'ready', users_done: MEMBERS, parts_done: 6 });
    // The download of gzip parts holds their NDJSON too.
    const dl = await env.app.inject({
      method: 'GET',
      url: String(again.body.url).replace('http://127.0.0.1:3000', ''),
    });
    expect(dl.statusCode).toBe(200);
    const dir = await mkdtemp(path.join(tmpdir(), 'ces-dl-'));
    scratch.push(dir);
    await writeFile(path.join(dir, 'all.zip'), dl.rawPayload);
    const { stdout } = await run(
      'unzip',
      // As the README reads a download: every JSON entry but the manifest.
      ['-p', path.join(dir, 'all.zip'), '*.json', '-x', '*/manifest.json'],
      { maxBuffer: 256 * 1024 * 1024 },
    );
    expect(stdout.split('\n').filter(Boolean)).toHaveLength(MEMBERS);
    const parts = await partsOf(String(done.key_prefix));
    for (const p of parts) expect(p).toMatch(/\.gz$/);
    const lines = await readPartFile(localFile(parts[0]!));
    const user = JSON.parse(lines[0]!);
    // Narrowed custom attributes; purchases all older than 90 days, so omitted.
    expect(Object.keys(user).sort()).toEqual(['custom_attributes', 'external_id']);
    expect(Object.keys(user.custom_attributes)).toEqual(['score']);
  });

  it('an empty segment is ready with no part and an empty manifest', async () => {
    const res = await requestExport(env, env.ws.apiKey, { segment_id: 'nobody', fields_to_export: ['email'] });
    expect(res.status).toBe(201);
    const done = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix));
    expect(done).toMatchObject({ status: 'ready', users_done: 0, parts_done: 0 });
    expect(await partsOf(String(done.key_prefix))).toEqual([]);
    const manifest = JSON.parse(await readFile(localFile(`${String(done.key_prefix)}/manifest.json`), 'utf8'));
    expect(manifest).toMatchObject({ users: 0, parts: [] });
    const status = await exportStatus(env, env.ws.apiKey, String(res.body.object_prefix));
    expect(status.body.url).toBe(res.body.url);
  });

  it('a finisher run again after _SUCCESS (killed before marking the export ready) writes nothing and marks it ready', async () => {
    const keyPrefix = String(status.key_prefix);
    const before = await Promise.all(
      (await readdir(localFile(keyPrefix)))
        .sort()
        .map(async (n) => `${n} ${(await stat(localFile(`${keyPrefix}/${n}`))).mtimeMs}`),
    );
    const { rows } = await env.ctx.pool.query<{ id: string }>(
      `UPDATE exports SET status = 'running' WHERE object_prefix = $1 RETURNING id::text`,
      [prefix],
    );
    await finishExport(env.ctx, rows[0]!.id, []);
    expect((await exportStatus(env, env.ws.apiKey, prefix)).body).toMatchObject({
      status: 'ready',
      users_done: MEMBERS,
      parts_done: 6,
    });
    const after = await Promise.all(
      (await readdir(localFile(keyPrefix)))
        .sort()
        .map(async (n) => `${n} ${(await stat(localFile(`${keyPrefix}/${n}`))).mtimeMs}`),
    );
    expect(after).toEqual(before);
    // Nor does an attempt to fail it take back what a loader may be reading.
    await env.ctx.pool.query(`UPDATE exports SET status = 'running' WHERE object_prefix = $1`, [prefix]);
    await failExport(env.ctx, rows[0]!.id, 'a last attempt that could not mark it ready');
    expect((await readdir(localFile(keyPrefix))).sort()).toEqual(before.map((l) => l.split(' ')[0]));
    await finishExport(env.ctx, rows[0]!.id, []);
    expect((await exportStatus(env, env.ws.apiKey, prefix)).body.status).toBe('ready');
  });
});
