import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, spawnCli, waitFor } from '../helpers/cli.js';

const schema = `t_cli_${randomBytes(4).toString('hex')}`;
const env = {
  DATABASE_URL: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  DATABASE_SCHEMA: schema,
  REDIS_PREFIX: `ces-${schema}`,
  LOG_LEVEL: 'info',
  NODE_ENV: 'test',
};

afterAll(async () => {
  const client = new pg.Client({ connectionString: env.DATABASE_URL });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
  const redis = new Redis(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379');
  const keys = await redis.keys(`${env.REDIS_PREFIX}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

/** Runs `ces <args>` on a free-ish port, collecting everything it prints. */
function startService(args: string[]) {
  const port = String(20000 + Math.floor(Math.random() * 20000));
  const child = spawnCli(args, { ...env, PORT: port, HOST: '127.0.0.1' });
  let out = '';
  child.stdout!.on('data', (d) => (out += d));
  child.stderr!.on('data', (d) => (out += d));
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
  return { port, child, output: () => out, exited };
}

describe('ces', () => {
  it('refuses to start on invalid configuration, naming the variable', async () => {
    const res = await runCli(['serve'], { ...env, PORT: 'eighty', LOG_LEVEL: 'loud' });
    expect(res.code).toBe(2);
    expect(res.stderr).toMatch(/PORT/);
    expect(res.stderr).toMatch(/LOG_LEVEL/);
  });

  it('migrates once, then finds nothing to do; concurrent migrators wait for each other', async () => {
    const [a, b] = await Promise.all([runCli(['migrate'], env), runCli(['migrate'], env)]);
    expect(a.code).toBe(0);
    expect(b.code).toBe(0);
    const applied = [a.stdout, b.stdout].filter((s) => s.includes('applied'));
    expect(applied).toHaveLength(1);
    const again = await runCli(['migrate'], env);
    expect(again.stdout).toContain('database is up to date');
  });

  it('starts the API with its workers in a lower-priority child process, restarts a dead child, and stops both on SIGTERM', async () => {
    const { port, child, output, exited } = startService(['start']);
    const workerPids = () =>
      output()
        .split('\n')
        .filter((line) => line.includes('worker process started'))
        .map((line) => (JSON.parse(line) as { pid: number }).pid);
    const alive = (pid: number) => {
      try {
        process.kill(pid, 0);
        return true;
      } catch {
        return false;
      }
    };
    await waitFor(async () => {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`);
        return res.status === 200 && workerPids().length === 1;
      } catch {
        return false;
      }
    }, 30_000);
    const [first] = workerPids();
    expect(alive(first!)).toBe(true);
    // Field 19 of /proc/<pid>/stat is the niceness (WORKER_PROCESS_NICE, default 10).
    const stat = readFileSync(`/proc/${first}/stat`, 'utf8');
    expect(Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16])).toBe(10);
    await waitFor(() => output().includes('workers started'), 30_000);

    // /metrics sums both processes: the resident memory it reports exceeds the API process's own.
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    const resident = Number(/^ces_process_resident_memory_bytes (\d+)/m.exec(metrics)?.[1]);
    const apiResident = Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${child.pid}/status`, 'utf8'))![1]) * 1024;
    expect(resident).toBeGreaterThan(apiResident * 1.2);

    process.kill(first!, 'SIGKILL');
    await waitFor(() => workerPids().length === 2, 30_000);
    const second = workerPids()[1]!;
    expect(second).not.toBe(first);
    expect(output()).toContain('worker process exited');

    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(output()).toContain('shutting down');
    await waitFor(() => !alive(second), 10_000);
  });

  it('runs API and workers on one thread with --single-process', async () => {
    const { port, output, child, exited } = startService(['start', '--single-process']);
    await waitFor(async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200 && output().includes('workers started');
      } catch {
        return false;
      }
    }, 30_000);
    expect(output()).not.toContain('worker process started');
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
  });
});
