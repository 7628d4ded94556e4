import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import type { RunningWorkers } from '../../src/runtime/workers.js';
import { QUICK_STALLED_CHECK } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import {
  CONTROL_FILES,
  createSegment,
  exportedIdCounts,
  exportStatus,
  insertProfiles,
  readPartFile,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';

const ROOT = path.resolve(import.meta.dirname, '../..');
// Four shards of about 15,000 members, run one at a time by the child worker: plenty of time to kill it mid-export.
const MEMBERS = 60_000;

const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '2500', ...QUICK_STALLED_CHECK }, workspaces: ['ws'] });
let child: ChildProcess | undefined;
let childTmp: string;
// Workers of this process, stopped after each test: a later test's export must be run by the child worker alone.
const inProcess: RunningWorkers[] = [];
const startInProcessWorkers = () =>
  inProcess.push(env.startWorkers([segmentExportJob, exportShardJob, exportCallbackJob]));

beforeAll(async () => {
  childTmp = await mkdtemp(path.join(tmpdir(), 'ces-crash-worker-'));
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'big');
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, MEMBERS);
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 500_001, 2_000, false);
}, 120_000);
afterEach(async () => {
  for (const w of inProcess.splice(0)) await w.close(5_000);
});
afterAll(async () => {
  if (child && child.exitCode === null) child.kill('SIGKILL');
  if (childTmp) await rm(childTmp, { recursive: true, force: true });
});

/** `ces worker` as a real process over this test's schema, Redis prefix and local store. */
function startChildWorker(queues = 'export-shard,segment-export'): ChildProcess {
  const c = env.config;
  return spawn(process.execPath, ['--import', 'tsx', 'src/cli.ts', 'worker', '--queues', queues], {
    cwd: ROOT,
    env: {
      ...process.env,
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      DATABASE_URL: c.DATABASE_URL,
      DATABASE_SCHEMA: c.DATABASE_SCHEMA,
      REDIS_URL: c.REDIS_URL,
      ...(c.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: c.REDIS_CLUSTER_NODES } : {}),
      REDIS_PREFIX: c.REDIS_PREFIX,
      LOCAL_STORE_DIR: c.LOCAL_STORE_DIR,
      MIGRATE_ON_START: 'false',
      WORKER_CONCURRENCY: '1',
      WORKER_METRICS_PORT: '0',
      ...QUICK_STALLED_CHECK,
      // The killed worker's part spool stays behind in its temporary directory: keep it where afterAll removes it.
      TMPDIR: childTmp,
    },
    stdio: 'ignore',
  });
}

/**
 * Watches an export's directory in the local store as a loader polling for _SUCCESS would, from the request to the
 * end: every listing, and for each listing that holds _SUCCESS whether the manifest and every part it names are there.
 */
function watchExportDir(prefix: string) {
  const listings: string[][] = [];
  const incomplete: string[] = [];
  let dir: string | undefined;
  let stopped = false;
  const loop = (async () => {
    while (!stopped) {
      if (!dir) {
        const keyPrefix = (await exportStatus(env, env.ws.apiKey, prefix)).body.key_prefix;
        if (keyPrefix) dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(keyPrefix));
      }
      if (dir) {
        const names = await readdir(dir).catch(() => [] as string[]);
        listings.push(names);
        if (names.includes('_SUCCESS')) {
          const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
          const missing = manifest.parts.filter((p) => !names.includes(p.file));
          if (missing.length > 0) incomplete.push(`${missing.length} parts missing beside _SUCCESS`);
        }
      }
      await new Promise((r) => setTimeout(r, 5));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { listings, incomplete };
    },
  };
}

/** _SUCCESS was seen, never went away once there, and no file appeared after it: it was written once, and last. */
function expectSuccessLast(listings: string[][], incomplete: string[]): void {
  const first = listings.findIndex((names) => names.includes('_SUCCESS'));
  // Seen appearing: listings without it came first.
  expect(first, 'a listing with _SUCCESS after listings without').toBeGreaterThan(0);
  const seenBefore = new Set(listings.slice(0, first + 1).flat());
  for (const names of listings.slice(first)) {
    expect(names).toContain('_SUCCESS');
    expect(
      names.filter((n) => !seenBefore.has(n)),
      'files that appeared after _SUCCESS',
    ).toEqual([]);
  }
  expect(incomplete).toEqual([]);
}

describe('a worker SIGKILLed in the middle of an export', () => {
  it('loses nothing: another worker finishes the export with every member exactly once', async () => {
    const res = await requestExport(env, env.ws.apiKey, {
      segment_id: 'big',
      fields_to_export: ['external_id', 'email', 'custom_attributes', 'custom_events'],
      output_format: 'gzip',
    });
    expect(res.status).toBe(201);
    const prefix = String(res.body.object_prefix);
    const watcher = watchExportDir(prefix);

    child = startChildWorker();
    // Wait until the child has uploaded some parts but not all, then kill it without warning.
    const deadline = Date.now() + 60_000;
    let atKill: Record<string, unknown> = {};
    for (;;) {
      atKill = (await exportStatus(env, env.ws.apiKey, prefix)).body;
      // ...and while it is cutting a part, not between two shards: its spool directory exists only meanwhile.
      const cutting = (await readdir(childTmp)).some((n) => n.startsWith('ces-export-'));
      if (Number(atKill.parts_done) >= 2 && cutting) break;
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`child worker made no progress: ${JSON.stringify(atKill)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    // Its spool (the NDJSON of the part it was cutting) stays behind, named after the dead process. The kill may land
    // in the instant a shard ended and removed its spool: then leave one as a worker killed a moment earlier would
    // have, so that the clean-up checked below is exercised on every run.
    const deadSpool = () =>
      readdir(childTmp).then((names) => names.filter((n) => n.startsWith(`ces-export-${child!.pid}-`)));
    if ((await deadSpool()).length === 0) await mkdir(path.join(childTmp, `ces-export-${child.pid}-killed`));
    const spool = await deadSpool();
    expect(spool).toHaveLength(1);
    expect(atKill.status).toBe('running');
    const afterKill = (await exportStatus(env, env.ws.apiKey, prefix)).body;
    expect(afterKill.status).toBe('running');
    expect(Number(afterKill.users_done)).toBeLessThan(MEMBERS);

    // A fresh worker: BullMQ's stalled-job check hands it the dead worker's shard once that job's lock lapses.
    startInProcessWorkers();
    const done = await waitForExport(env, env.ws.apiKey, prefix, 90_000);
    expect(done).toMatchObject({ status: 'ready', users_done: MEMBERS, parts_done: 12 });
    // A loader polling for _SUCCESS through the kill and the retried shard: it appeared once, last, with every part.
    const { listings, incomplete } = await watcher.stop();
    expectSuccessLast(listings, incomplete);

    const keyPrefix = String(done.key_prefix);
    const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), keyPrefix);
    const manifest: ExportManifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8'));
    expect(manifest.parts.map((p) => p.users)).toEqual([...Array(12).fill(5000)]);
    // Nothing the killed attempt wrote is left beside the parts: only the manifest's files and the manifest.
    const files = (await readdir(dir)).sort();
    expect(files).toEqual([...manifest.parts.map((p) => p.file), ...CONTROL_FILES].sort());

    const count = await exportedIdCounts(dir, manifest.parts);
    expect(count.size).toBe(MEMBERS);
    expect([...count.values()].filter((n) => n !== 1)).toEqual([]);
    expect([...count.keys()].filter((id) => Number(id.slice(4)) > MEMBERS)).toEqual([]);

    // The next worker started on that machine removes the dead one's spool (a queue with no work here is enough).
    child = startChildWorker('export-callback');
    const cleaned = Date.now() + 30_000;
    while ((await readdir(childTmp)).some((n) => spool.includes(n))) {
      if (Date.now() > cleaned || child.exitCode !== null) throw new Error("the dead worker's spool was not removed");
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill('SIGKILL');
  }, 150_000);

  it('loses nothing of an incremental export: the changed, joined, left and deleted members each once', async () => {
    const db = env.ctx.pool;
    const ws = env.ws.workspaceId;
    // The base: a full export of the segment, run by this process.
    startInProcessWorkers();
    const baseRes = await requestExport(env, env.ws.apiKey, {
      segment_id: 'big',
      fields_to_export: ['external_id'],
      output_format: 'gzip',
    });
    expect(baseRes.status, JSON.stringify(baseRes.body)).toBe(201);
    const base = await waitForExport(env, env.ws.apiKey, String(baseRes.body.object_prefix), 60_000);
    expect(base).toMatchObject({ status: 'ready', users_done: MEMBERS });
    for (const w of inProcess.splice(0)) await w.close(5_000);

    // Profiles are numbered: ext-N, svc-N. Members 1..60,000 ('US'), non-members 500,001..502,000 ('CA').
    const n = `split_part(external_id, '-', 2)::int`;
    const range = (from: number, to: number) => Array.from({ length: to - from + 1 }, (_, i) => `ext-${from + i}`);
    // Written and still members: 1..39,000 (about 10,000 a shard, two full parts each).
    await db.query(
      `UPDATE profiles SET custom_attributes = custom_attributes || '{"tier":"edited"}' WHERE workspace_id = $1 AND ${n} BETWEEN 1 AND 40000`,
      [ws],
    );
    // Leave the segment: 39,501..41,000 (the first 500 written above too).
    await db.query(`UPDATE profiles SET country = 'CA' WHERE workspace_id = $1 AND ${n} BETWEEN 39501 AND 41000`, [ws]);
    // Deleted (tombstones): 39,001..39,500 (written above) and 41,001..41,500.
    await db.query(
      `DELETE FROM profiles WHERE workspace_id = $1 AND (${n} BETWEEN 39001 AND 39500 OR ${n} BETWEEN 41001 AND 41500)`,
      [ws],
    );
    // Join: non-members 500,001..501,000 become members; 501,001..501,500 are written but stay out.
    await db.query(`UPDATE profiles SET country = 'US' WHERE workspace_id = $1 AND ${n} BETWEEN 500001 AND 501000`, [
      ws,
    ]);
    await db.query(
      `UPDATE profiles SET first_name = 'Edited' WHERE workspace_id = $1 AND ${n} BETWEEN 501001 AND 501500`,
      [ws],
    );
    // New: members 600,001..601,000, and non-members that show nowhere.
    await insertProfiles(db, ws, 600_001, 1_000);
    await insertProfiles(db, ws, 700_001, 200, false);
    // No ANALYZE here: the tables have no statistics (the test server runs without autovacuum), the case in which
    // the users query once planned a nested loop quadratic in the shard (src/pipelines/exports/shard/run-shard.ts).
    const expectedUsers = [...range(1, 39_000), ...range(500_001, 501_000), ...range(600_001, 601_000)];
    const expectedRemoved = range(39_001, 41_500);

    const res = await requestExport(env, env.ws.apiKey, {
      segment_id: 'big',
      fields_to_export: ['external_id', 'email', 'custom_attributes', 'custom_events'],
      output_format: 'gzip',
      changes_since: base.object_prefix,
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    const prefix = String(res.body.object_prefix);
    const exportId = (await db.query<{ id: string }>('SELECT id FROM exports WHERE object_prefix = $1', [prefix]))
      .rows[0]!.id;

    child = startChildWorker();
    const pid = child.pid!;
    // Kill it in the middle of a shard that recorded parts, after at least one shard ended (it runs them one at a
    // time), while it is cutting (its spool exists): in practice while the shard writes its removed lines.
    const progress = async () =>
      (
        await db.query<{ status: string; ended: number; unfinished: number }>(
          `SELECT e.status,
                  (SELECT count(*)::int FROM export_shards_done d WHERE d.export_id = e.id) AS ended,
                  (SELECT count(*)::int FROM export_parts p WHERE p.export_id = e.id
                      AND NOT EXISTS (SELECT 1 FROM export_shards_done d WHERE d.export_id = e.id AND d.shard = p.shard)) AS unfinished
             FROM exports e WHERE e.id = $1`,
          [exportId],
        )
      ).rows[0]!;
    const deadline = Date.now() + 60_000;
    let atKill: Awaited<ReturnType<typeof progress>>;
    for (;;) {
      atKill = await progress();
      const cutting = (await readdir(childTmp)).some((name) => name.startsWith(`ces-export-${pid}-`));
      if (atKill.ended >= 1 && atKill.unfinished >= 1 && cutting) break;
      if (atKill.status === 'ready' || atKill.status === 'failed')
        throw new Error(`the child worker ended the export before it could be killed: ${JSON.stringify(atKill)}`);
      if (Date.now() > deadline || child.exitCode !== null)
        throw new Error(`child worker made no progress: ${JSON.stringify(atKill)}`);
      await new Promise((r) => setTimeout(r, 20));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    expect(atKill.status).toBe('running');
    // What the dead worker left: some shards ended, not all, and parts recorded by a shard it did not end (which its
    // retry must remove). Once its spool is gone a shard still stores its member list and ends in a transaction of its
    // own (tens of milliseconds): it cannot end in the instant between the poll above and the kill.
    const afterKill = await progress();
    expect(afterKill.status).toBe('running');
    expect(afterKill.ended).toBeGreaterThanOrEqual(1);
    expect(afterKill.ended).toBeLessThan(4);
    expect(afterKill.unfinished).toBeGreaterThanOrEqual(1);
    expect((await exportStatus(env, env.ws.apiKey, prefix)).body.status).toBe('running');

    startInProcessWorkers();
    const done = await waitForExport(env, env.ws.apiKey, prefix, 90_000);
    expect(done).toMatchObject({
      status: 'ready',
      changes_since: base.object_prefix,
      users_done: expectedUsers.length,
      removed_done: expectedRemoved.length,
    });

    const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(done.key_prefix));
    const manifest: ExportManifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8'));
    expect(manifest.changes_since).toBe(base.object_prefix);
    expect(done.parts_done).toBe(manifest.parts.length);
    for (const p of manifest.parts) expect(p.file.startsWith('removed-'), p.file).toBe(p.kind === 'removed');
    const usersParts = manifest.parts.filter((p) => p.kind === 'users');
    const removedParts = manifest.parts.filter((p) => p.kind === 'removed');
    expect(manifest.users).toBe(expectedUsers.length);
    expect(manifest.removed).toBe(expectedRemoved.length);
    expect(usersParts.reduce((sum, p) => sum + p.users, 0)).toBe(expectedUsers.length);
    expect(removedParts.reduce((sum, p) => sum + p.users, 0)).toBe(expectedRemoved.length);
    // Full parts of 5,000 but at most one short last part of each kind.
    for (const parts of [usersParts, removedParts])
      expect(parts.filter((p) => p.users !== 5_000).length).toBeLessThanOrEqual(1);
    // Nothing the killed attempt wrote is left beside the parts.
    expect((await readdir(dir)).sort()).toEqual([...manifest.parts.map((p) => p.file), ...CONTROL_FILES].sort());

    // Each expected member once, and its line carries the write (the changed members' tier).
    const users = new Map<string, number>();
    const notEdited: string[] = [];
    for (const p of usersParts) {
      for (const line of await readPartFile(path.join(dir, p.file))) {
        const u = JSON.parse(line) as { external_id: string; custom_attributes?: { tier?: unknown } };
        users.set(u.external_id, (users.get(u.external_id) ?? 0) + 1);
        if (Number(u.external_id.slice(4)) <= 39_000 && u.custom_attributes?.tier !== 'edited')
          notEdited.push(u.external_id);
      }
    }
    expect([...users.entries()].filter(([, count]) => count !== 1)).toEqual([]);
    expect([...users.keys()].sort()).toEqual([...expectedUsers].sort());
    expect(notEdited).toEqual([]);
    const removed = new Map<string, number>();
    for (const p of removedParts) {
      for (const line of await readPartFile(path.join(dir, p.file))) {
        const r = JSON.parse(line) as { external_id: string; service_id: string };
        expect(r).toEqual({ external_id: r.external_id, service_id: `svc-${r.external_id.slice(4)}` });
        removed.set(r.external_id, (removed.get(r.external_id) ?? 0) + 1);
      }
    }
    expect([...removed.entries()].filter(([, count]) => count !== 1)).toEqual([]);
    expect([...removed.keys()].sort()).toEqual([...expectedRemoved].sort());
  }, 150_000);
});
