import { execFile } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rename, rm, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { bulkImportJob } from '../../jobs/bulk-import.js';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { LocalStore, localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, insertProfiles, requestExport, waitForExport, zipEntries } from '../helpers/export-fixtures.js';
import { bearer, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

const run = promisify(execFile);

// Company A attacks with its own valid key; company B (and A's second workspace) own files in the built-in store.
const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '10000' }, workspaces: ['a', 'b'] });
let a2: SeededWorkspace;
let bExport: { keyPrefix: string; objectPrefix: string; url: string };

const EVENT = (id: string) => JSON.stringify({ external_id: id, name: 'stolen', time: '2026-01-01T00:00:00Z' });

async function importAs(ws: SeededWorkspace, body: unknown) {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/import',
    headers: { ...bearer(ws.apiKey), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> };
}

/** Every file under a directory, relative to it, with its bytes. */
async function snapshot(dir: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const walk = async (d: string) => {
    for (const e of await readdir(d, { withFileTypes: true }).catch(() => [])) {
      const full = path.join(d, e.name);
      if (e.isDirectory()) await walk(full);
      else out[path.relative(dir, full)] = (await readFile(full)).toString('base64');
    }
  };
  await walk(dir);
  return out;
}

const bDir = () => localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.b);
const aDir = () => localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.a);

beforeAll(async () => {
  a2 = await seedWorkspace(env.ctx.pool, undefined, env.a.companyId);
  env.startWorkers([segmentExportJob, exportShardJob, exportCallbackJob, bulkImportJob]);

  // B's own import file, and B's finished export (parts and manifest.json) in B's part of the store.
  await LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, env.b).put(
    'imports/b.ndjson',
    Buffer.from(`${EVENT('b-user')}\n`),
  );
  await createSegment(env.ctx.pool, env.b.workspaceId, 'b-seg');
  await insertProfiles(env.ctx.pool, env.b.workspaceId, 1, 30);
  const started = await requestExport(env, env.b.apiKey, { segment_id: 'b-seg', fields_to_export: ['external_id'] });
  expect(started.status).toBe(201);
  const done = await waitForExport(env, env.b.apiKey, String(started.body.object_prefix));
  expect(done.status).toBe('ready');
  bExport = { keyPrefix: String(done.key_prefix), objectPrefix: String(done.object_prefix), url: String(done.url) };
}, 120_000);

describe('the built-in local store is one namespace per company and workspace', () => {
  it("answers another tenant's import file 404, exactly like a missing one, and applies nothing", async () => {
    const before = await snapshot(bDir());
    const stolen = await importAs(env.a, { source: 'local', key: 'imports/b.ndjson' });
    const missing = await importAs(env.a, { source: 'local', key: 'imports/none.ndjson' });
    expect(stolen.status).toBe(404);
    expect(missing.status).toBe(404);
    expect(stolen.body.message).toBe(String(missing.body.message).replace('imports/none.ndjson', 'imports/b.ndjson'));
    // Another workspace of the same company is another namespace too.
    expect((await importAs(a2, { source: 'local', key: 'imports/b.ndjson' })).status).toBe(404);
    const imports = await env.ctx.pool.query('SELECT id FROM imports WHERE workspace_id = ANY($1)', [
      [env.a.workspaceId, a2.workspaceId],
    ]);
    expect(imports.rowCount).toBe(0);
    expect(await snapshot(bDir())).toEqual(before);
  });

  it("refuses an import of another tenant's export manifest and writes nothing into its export folder", async () => {
    const before = await snapshot(bDir());
    const manifestKey = `${bExport.keyPrefix}/manifest.json`;
    const res = await importAs(env.a, { source: 'local', key: manifestKey });
    expect(res.status).toBe(404);
    expect(res.body.message).toBe(`No object ${JSON.stringify(manifestKey)} in the local store`);
    await new Promise((r) => setTimeout(r, 300));
    expect(await snapshot(bDir())).toEqual(before);
    expect(Object.keys(before)).toContain(manifestKey);
  });

  it('imports the same key from the caller’s own directory: the key is relative to it', async () => {
    await LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, env.a).put(
      'imports/b.ndjson',
      Buffer.from(`${EVENT('a-user')}\n`),
    );
    const res = await importAs(env.a, { source: 'local', key: 'imports/b.ndjson' });
    expect(res.status).toBe(201);
    const id = String(res.body.import_id);
    for (let i = 0; i < 100; i++) {
      const { rows } = await env.ctx.pool.query<{ status: string }>('SELECT status FROM imports WHERE id = $1', [id]);
      if (rows[0]?.status === 'completed') break;
      await new Promise((r) => setTimeout(r, 100));
    }
    const profiles = await env.ctx.pool.query<{ external_id: string }>(
      'SELECT external_id FROM profiles WHERE workspace_id = $1',
      [env.a.workspaceId],
    );
    expect(profiles.rows.map((r) => r.external_id)).toEqual(['a-user']);
    const bProfiles = await env.ctx.pool.query('SELECT 1 FROM profiles WHERE workspace_id = $1 AND external_id = $2', [
      env.b.workspaceId,
      'a-user',
    ]);
    expect(bProfiles.rowCount).toBe(0);
  });

  it.each([
    ['..', '../../../other-company/other-workspace/imports/b.ndjson'],
    ['absolute', '/etc/passwd'],
    ['NUL', 'imports/b.ndjson\u0000.txt'],
    ['dot segment', 'imports/./b.ndjson'],
    ['empty segment', 'imports//b.ndjson'],
    ['backslash', '..\\..\\b.ndjson'],
    ['trailing dot-dot', 'imports/..'],
  ])('refuses a %s key with 400 and records nothing', async (_name, key) => {
    const count = async () =>
      (await env.ctx.pool.query('SELECT 1 FROM imports WHERE workspace_id = $1', [env.a.workspaceId])).rowCount;
    const before = await count();
    const res = await importAs(env.a, { source: 'local', key });
    expect(res.status).toBe(400);
    expect(String(res.body.message)).toMatch(/key/);
    expect(await count()).toBe(before);
  });

  it("does not follow a symbolic link out of the caller's directory, for reads or writes", async () => {
    await mkdir(aDir(), { recursive: true });
    await symlink(bDir(), path.join(aDir(), 'to-b'));
    await symlink(path.join(bDir(), 'imports', 'b.ndjson'), path.join(aDir(), 'b-file.ndjson'));
    const before = await snapshot(bDir());

    expect((await importAs(env.a, { source: 'local', key: 'to-b/imports/b.ndjson' })).status).toBe(404);
    expect((await importAs(env.a, { source: 'local', key: 'b-file.ndjson' })).status).toBe(404);

    const store = LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, env.a);
    expect(await store.head('to-b/imports/b.ndjson')).toBeNull();
    await expect(store.get('b-file.ndjson')).rejects.toThrow(/not found/);
    await expect(store.put('to-b/planted.txt', Buffer.from('x'))).rejects.toThrow(/leaves the store/);
    await expect(store.put('to-b/new-dir/planted.txt', Buffer.from('x'))).rejects.toThrow(/leaves the store/);
    await store.delete(['to-b/imports/b.ndjson']);
    expect((await store.list('to-b/')).length).toBe(0);
    expect(await snapshot(bDir())).toEqual(before);
  });
});

describe('exports recorded before the store had namespaces', () => {
  it('keep their download link working from the shared root', async () => {
    // An export as an earlier version left it: files at the shared root, the row marked by migration 0110.
    const legacyDir = path.join(env.config.LOCAL_STORE_DIR, 'local', bExport.keyPrefix);
    await mkdir(path.dirname(legacyDir), { recursive: true });
    await rename(path.join(bDir(), bExport.keyPrefix), legacyDir);
    await env.ctx.pool.query('UPDATE exports SET local_shared_root = true WHERE object_prefix = $1', [
      bExport.objectPrefix,
    ]);

    const res = await env.app.inject({
      method: 'GET',
      url: new URL(bExport.url).pathname + new URL(bExport.url).search,
    });
    expect(res.statusCode).toBe(200);
    const dir = await mkdtemp(path.join(tmpdir(), 'ces-legacy-dl-'));
    try {
      await writeFile(path.join(dir, 'all.zip'), res.rawPayload);
      expect(await zipEntries(path.join(dir, 'all.zip'))).toContain(`${bExport.objectPrefix}/manifest.json`);
      const { stdout } = await run('unzip', [
        '-p',
        path.join(dir, 'all.zip'),
        '*.json',
        '-x',
        '*/manifest.json',
        '*/schema.json',
      ]);
      expect(stdout.split('\n').filter(Boolean)).toHaveLength(30);
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('an unfinished import of the shared root is not resumed by the upgrade', async () => {
    const sql = await readFile(
      path.join(import.meta.dirname, '../../src/platform/db/migrations/0110_local_store_namespaces.sql'),
      'utf8',
    );
    const { rows } = await env.ctx.pool.query<{ id: string }>(
      `INSERT INTO imports (workspace_id, store, object_key, format, bytes_total, rejects_key, requested_by)
       VALUES ($1, 'local', $2, 'ndjson', 10, 'x.rejects.ndjson', 'test') RETURNING id`,
      [env.a.workspaceId, `${bExport.keyPrefix}/manifest.json`],
    );
    // The migration's statements run again against this row (the column additions are already there).
    await env.ctx.pool.query(sql.slice(sql.indexOf('UPDATE imports')));
    const after = await env.ctx.pool.query<{ status: string; error: string }>(
      'SELECT status, error FROM imports WHERE id = $1',
      [rows[0]!.id],
    );
    expect(after.rows[0]).toMatchObject({
      status: 'failed',
      error: expect.stringMatching(/move the file into the workspace's directory/),
    });
  });
});
