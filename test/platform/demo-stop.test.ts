import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync, readdirSync } from 'node:fs';
import { rm } from 'node:fs/promises';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { repoRoot, waitFor } from '../helpers/cli.js';

/**
 * `npm run demo` as a person runs it, on a schema, port, store and Redis prefix of its own with a small user count:
 * when the `npm run demo` process is sent SIGTERM or SIGINT (a process manager, `kill`, an IDE's stop button), the
 * service it started stops too, its worker child with it. It used to keep serving: npm's signal killed the `sh -c`
 * between npm and the script, and the script, never told, waited on.
 */

const DATABASE_URL = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const runs: { schema: string; prefix: string; dir: string; pids: number[] }[] = [];

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

/** The processes whose parent is `pid` (from /proc). */
function childrenOf(pid: number): number[] {
  const out: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) out.push(Number(entry));
    } catch {
      // gone meanwhile
    }
  }
  return out;
}

/** Starts `npm run demo` and resolves once it says the service keeps running, with the service's pid. */
async function startDemo(): Promise<{ npm: ChildProcess; service: number; port: number; output: () => string }> {
  const id = `t_demo_${randomBytes(4).toString('hex')}`;
  const port = 20000 + Math.floor(Math.random() * 20000);
  const run = { schema: id, prefix: `ces-${id}`, dir: `/tmp/ces-test/${id}`, pids: [] as number[] };
  runs.push(run);
  const npm = spawn('npm', ['run', 'demo'], {
    cwd: repoRoot,
    env: {
      ...process.env,
      DATABASE_URL,
      DATABASE_SCHEMA: run.schema,
      REDIS_PREFIX: run.prefix,
      PORT: String(port),
      LOCAL_STORE_DIR: `${run.dir}/bucket`,
      DEMO_USERS: '30',
      LOG_LEVEL: 'warn',
      ADMIN_PASSWORD: 'demo-stop-test',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  run.pids.push(npm.pid!);
  let out = '';
  npm.stdout!.on('data', (d) => (out += d));
  npm.stderr!.on('data', (d) => (out += d));
  let service = 0;
  await waitFor(
    () => {
      if (npm.exitCode !== null) throw new Error(`npm run demo exited ${npm.exitCode}:\n${out}`);
      service = Number(/The service keeps running \(pid (\d+)\)/.exec(out)?.[1] ?? 0);
      return service > 0;
    },
    240_000,
    250,
  );
  run.pids.push(service, ...childrenOf(service));
  return { npm, service, port, output: () => out };
}

const answers = (port: number) =>
  fetch(`http://127.0.0.1:${port}/healthz`).then(
    () => true,
    () => false,
  );

afterAll(async () => {
  // Whatever a failed run left: its processes (by pid), its schema, its keys, its files.
  for (const run of runs) for (const pid of run.pids.reverse()) if (alive(pid)) process.kill(pid, 'SIGKILL');
  const client = new pg.Client({ connectionString: DATABASE_URL });
  await client.connect();
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  for (const run of runs) {
    await client.query(`DROP SCHEMA IF EXISTS "${run.schema}" CASCADE`);
    const keys = await redis.keys(`${run.prefix}:*`);
    if (keys.length > 0) await redis.del(...keys);
    await rm(run.dir, { recursive: true, force: true });
  }
  await client.end();
  redis.disconnect();
});

describe('npm run demo, stopped by a signal to its npm process', () => {
  for (const signal of ['SIGTERM', 'SIGINT'] as const) {
    it(`${signal}: the service and its worker stop, and nothing answers on the port`, async () => {
      const { npm, service, port, output } = await startDemo();
      expect(await answers(port)).toBe(true);
      const workers = childrenOf(service);
      expect(workers.length, 'the worker child of ces start').toBeGreaterThan(0);
      const exited = new Promise((resolve) => npm.on('exit', resolve));
      npm.kill(signal);
      await exited;
      await waitFor(() => !alive(service) && workers.every((w) => !alive(w)), 30_000).catch(() => {
        throw new Error(
          `still running after ${signal}: ${[service, ...workers].filter(alive).join(', ')}\n${output()}`,
        );
      });
      expect(await answers(port)).toBe(false);
      expect(output()).toContain(`stopping the service (pid ${service})`);
    }, 300_000);
  }
});
