import { spawn, type ChildProcess } from 'node:child_process';
import { mkdir, mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportCallbackJob } from '../jobs/export-callback.js';
import { exportShardJob } from '../jobs/export-shard.js';
import { segmentExportJob } from '../jobs/segment-export.js';
import type { ExportManifest } from '../src/exports/manifest.js';
import { useTestEnv } from './helpers/context.js';
import { createSegment, exportedIdCounts, exportStatus, insertProfiles, requestExport, waitForExport } from './helpers/export-fixtures.js';
import { localWorkspaceDir } from '../src/storage/local-store.js';

const ROOT = path.resolve(import.meta.dirname, '..');
// Four shards of about 15,000 members, run one at a time by the child worker: plenty of time to kill it mid-export.
const MEMBERS = 60_000;

const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '2500' }, workspaces: ['ws'] });
let child: ChildProcess | undefined;
let childTmp: string;

beforeAll(async () => {
  childTmp = await mkdtemp(path.join(tmpdir(), 'ces-crash-worker-'));
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'big');
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, MEMBERS);
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 500_001, 2_000, false);
}, 120_000);
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
      // The killed worker's part spool stays behind in its temporary directory: keep it where afterAll removes it.
      TMPDIR: childTmp,
    },
    stdio: 'ignore',
  });
}

describe('a worker SIGKILLed in the middle of an export', () => {
  it('loses nothing: another worker finishes the export with every member exactly once', async () => {
    const res = await requestExport(env, env.ws.apiKey, { segment_id: 'big', fields_to_export: ['external_id', 'email', 'custom_attributes', 'custom_events'], output_format: 'gzip' });
    expect(res.status).toBe(201);
    const prefix = String(res.body.object_prefix);

    child = startChildWorker();
    // Wait until the child has uploaded some parts but not all, then kill it without warning.
    const deadline = Date.now() + 60_000;
    let atKill: Record<string, unknown> = {};
    for (;;) {
      atKill = (await exportStatus(env, env.ws.apiKey, prefix)).body;
      // ...and while it is cutting a part, not between two shards: its spool directory exists only meanwhile.
      const cutting = (await readdir(childTmp)).some((n) => n.startsWith('ces-export-'));
      if (Number(atKill.parts_done) >= 2 && cutting) break;
      if (Date.now() > deadline || child.exitCode !== null) throw new Error(`child worker made no progress: ${JSON.stringify(atKill)}`);
      await new Promise((r) => setTimeout(r, 50));
    }
    child.kill('SIGKILL');
    await new Promise((r) => child!.once('exit', r));
    // Its spool (the NDJSON of the part it was cutting) stays behind, named after the dead process. The kill may land
    // in the instant a shard ended and removed its spool: then leave one as a worker killed a moment earlier would
    // have, so that the clean-up checked below is exercised on every run.
    const deadSpool = () => readdir(childTmp).then((names) => names.filter((n) => n.startsWith(`ces-export-${child!.pid}-`)));
    if ((await deadSpool()).length === 0) await mkdir(path.join(childTmp, `ces-export-${child.pid}-killed`));
    const spool = await deadSpool();
    expect(spool).toHaveLength(1);
    expect(atKill.status).toBe('running');
    const afterKill = (await exportStatus(env, env.ws.apiKey, prefix)).body;
    expect(afterKill.status).toBe('running');
    expect(Number(afterKill.users_done)).toBeLessThan(MEMBERS);

    // A fresh worker: BullMQ's stalled-job check hands it the dead worker's shard once that job's lock lapses.
    env.startWorkers([segmentExportJob, exportShardJob, exportCallbackJob]);
    const done = await waitForExport(env, env.ws.apiKey, prefix, 90_000);
    expect(done).toMatchObject({ status: 'ready', users_done: MEMBERS, parts_done: 12 });

    const keyPrefix = String(done.key_prefix);
    const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), keyPrefix);
    const manifest: ExportManifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8'));
    expect(manifest.parts.map((p) => p.users)).toEqual([...Array(12).fill(5000)]);
    // Nothing the killed attempt wrote is left beside the parts: only the manifest's files and the manifest.
    const files = (await readdir(dir)).sort();
    expect(files).toEqual([...manifest.parts.map((p) => p.file), 'manifest.json'].sort());

    const count = await exportedIdCounts(dir, manifest.parts);
    expect(count.size).toBe(MEMBERS);
    expect([...count.values()].filter((n) => n !== 1)).toEqual([]);
    expect([...count.keys()].filter((id) => Number(id.slice(4)) > MEMBERS)).toEqual([]);

    // The next worker started on that machine removes the dead one's spool (a queue with no work here is enough).
    child = startChildWorker('export-callback');
    const cleaned = Date.now() + 30_000;
    while ((await readdir(childTmp)).some((n) => spool.includes(n))) {
      if (Date.now() > cleaned || child.exitCode !== null) throw new Error('the dead worker\'s spool was not removed');
      await new Promise((r) => setTimeout(r, 100));
    }
    child.kill('SIGKILL');
  }, 150_000);
});
