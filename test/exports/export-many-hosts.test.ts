import { type ChildProcess } from 'node:child_process';
import { mkdtemp, readdir, readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { EXPORT_SHARD_QUEUE } from '../../src/platform/queues/export-shard.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import {
  createSegment,
  exportedIdCounts,
  insertProfiles,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';
import { netnsUnavailable, startNetnsHosts, type NetnsHost } from '../helpers/netns-hosts.js';
import { startOwnPostgres, startOwnRedis, type OwnPostgres, type OwnRedis } from '../helpers/own-servers.js';
import { seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/*
 * One export fanned out over worker processes on three "hosts": network namespaces with their own addresses, which
 * reach the test's own PostgreSQL and Redis only over a veth link, as machines on a network would. One host's worker
 * is SIGKILLed mid-export; the others finish it with every member exactly once. Where namespaces cannot be made (no
 * root, no CAP_NET_ADMIN), the test is reported as skipped, with the reason in its name.
 */

const ROOT = path.resolve(import.meta.dirname, '../..');
const HOSTS = 3;
// Twenty shards of about 4,000 members: enough for every host to take several.
const MEMBERS = 80_000;
const unavailable = await netnsUnavailable();

describe(
  unavailable
    ? `export over many hosts: SKIPPED, network namespaces unavailable here (${unavailable})`
    : 'an export fanned out over three worker hosts',
  () => {
    let pgServer: OwnPostgres;
    let redisServer: OwnRedis;
    let network: Awaited<ReturnType<typeof startNetnsHosts>>;
    let env: TestEnv;
    let ws: SeededWorkspace;
    let spoolRoot: string;
    const workers: { host: NetnsHost; child: ChildProcess; shards: number[]; spool: string }[] = [];

    beforeAll(async () => {
      if (unavailable) return;
      network = await startNetnsHosts(HOSTS);
      const gateways = network.hosts.map((h) => h.gateway);
      pgServer = await startOwnPostgres({ settings: { listen_addresses: "'*'" }, trustNetworks: ['10.213.0.0/16'] });
      redisServer = await startOwnRedis(gateways);
      env = await createTestEnv({
        DATABASE_URL: pgServer.url,
        REDIS_URL: redisServer.url,
        EXPORT_SHARD_BUCKETS: '500',
      });
      ws = await seedWorkspace(env.ctx.pool);
      await createSegment(env.ctx.pool, ws.workspaceId, 'all');
      await insertProfiles(env.ctx.pool, ws.workspaceId, 1, MEMBERS);
      spoolRoot = await mkdtemp(path.join(tmpdir(), 'ces-hosts-'));
    }, 180_000);
    afterAll(async () => {
      for (const w of workers) if (w.child.exitCode === null) w.child.kill('SIGKILL');
      await env?.close();
      await redisServer?.close();
      await pgServer?.close();
      await network?.close();
      if (spoolRoot) await rm(spoolRoot, { recursive: true, force: true });
    });

    /** `ces worker` for the export queues, inside a host, talking to our servers through its link. */
    async function startWorker(host: NetnsHost): Promise<void> {
      const c = env.config;
      const spool = await mkdtemp(path.join(spoolRoot, `${host.name}-`));
      const child = host.spawn(
        process.execPath,
        ['--import', 'tsx', 'src/cli.ts', 'worker', '--queues', 'export-shard,segment-export'],
        {
          cwd: ROOT,
          env: {
            ...process.env,
            NODE_ENV: 'test',
            LOG_LEVEL: 'info',
            DATABASE_URL: `postgres://postgres@${host.gateway}:${pgServer.port}/postgres`,
            DATABASE_SCHEMA: c.DATABASE_SCHEMA,
            REDIS_URL: `redis://${host.gateway}:${redisServer.port}`,
            REDIS_PREFIX: c.REDIS_PREFIX,
            LOCAL_STORE_DIR: c.LOCAL_STORE_DIR,
            MIGRATE_ON_START: 'false',
            WORKER_CONCURRENCY: '1',
            WORKER_METRICS_PORT: '0',
            TMPDIR: spool,
          },
          stdio: ['ignore', 'pipe', 'ignore'],
        },
      );
      const worker = { host, child, shards: [] as number[], spool };
      let buffered = '';
      child.stdout!.on('data', (chunk: Buffer) => {
        buffered += chunk.toString('utf8');
        const lines = buffered.split('\n');
        buffered = lines.pop()!;
        for (const line of lines) {
          try {
            const entry = JSON.parse(line) as { msg?: string; shard?: number };
            if (entry.msg === 'export shard done' && typeof entry.shard === 'number') worker.shards.push(entry.shard);
          } catch {
            // Not a log line of ours.
          }
        }
      });
      workers.push(worker);
    }

    it.skipIf(unavailable !== undefined)(
      'shards run on every host, one host dies mid-export, and every member is exported exactly once',
      async () => {
        for (const host of network.hosts) await startWorker(host);
        // Every host's worker is listening before the export is requested, so that each can take shards.
        const ready = Date.now() + 60_000;
        while ((await env.ctx.queues.get(EXPORT_SHARD_QUEUE).getWorkers()).length < HOSTS) {
          if (Date.now() > ready) throw new Error("the hosts' workers did not start");
          await new Promise((r) => setTimeout(r, 100));
        }
        const res = await requestExport(env, ws.apiKey, {
          segment_id: 'all',
          fields_to_export: ['external_id', 'email', 'custom_attributes', 'custom_events'],
          output_format: 'gzip',
        });
        expect(res.status, JSON.stringify(res.body)).toBe(201);
        const prefix = String(res.body.object_prefix);

        // Where PostgreSQL sees the workers' connections come from, sampled until the export is ready.
        const clients = new Set<string>();
        const sample = async () => {
          const { rows } = await env.ctx.pool.query<{ addr: string }>(
            `SELECT DISTINCT host(client_addr) AS addr FROM pg_stat_activity WHERE client_addr IS NOT NULL`,
          );
          for (const r of rows) clients.add(r.addr);
        };
        let sampling = Promise.resolve();
        const sampler = setInterval(() => (sampling = sampling.then(sample).catch(() => {})), 100);
        // The victim: the first worker seen to have finished a shard and to be cutting a part of the next one.
        const isCutting = async (w: (typeof workers)[number]) =>
          (await readdir(w.spool)).some((n) => n.startsWith('ces-export-'));
        let victim: (typeof workers)[number] | undefined;
        const deadline = Date.now() + 90_000;
        while (!victim) {
          for (const w of workers) if (!victim && w.shards.length >= 1 && (await isCutting(w))) victim = w;
          if (Date.now() > deadline)
            throw new Error(
              `no worker was caught mid-shard (shards: ${workers.map((w) => w.shards.length).join(',')})`,
            );
          if (!victim) await new Promise((r) => setTimeout(r, 10));
        }
        victim.child.kill('SIGKILL');
        await new Promise((r) => victim.child.once('exit', r));
        const doneBeforeKill = victim.shards.length;

        const done = await waitForExport(env, ws.apiKey, prefix, 120_000).finally(() => clearInterval(sampler));
        await sampling;
        expect(done).toMatchObject({ status: 'ready', users_done: MEMBERS });

        // Every host worked on this export, from its own address.
        for (const w of workers) expect(w.shards.length, `${w.host.name} ended no shard`).toBeGreaterThan(0);
        for (const h of network.hosts) expect([...clients], `no connection from ${h.address}`).toContain(h.address);
        // The twenty shards, each ended by some host; the killed host's last one by a survivor.
        const ended = workers.flatMap((w) => w.shards);
        expect(new Set(ended).size).toBe(20);
        expect(victim.shards.length).toBe(doneBeforeKill);

        const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, ws), String(done.key_prefix));
        const manifest = JSON.parse(await readFile(path.join(dir, 'manifest.json'), 'utf8')) as ExportManifest;
        const count = await exportedIdCounts(dir, manifest.parts);
        expect(count.size).toBe(MEMBERS);
        expect([...count.values()].filter((n) => n !== 1)).toEqual([]);
      },
      240_000,
    );
  },
);
