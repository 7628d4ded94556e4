import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, spawnCli, waitFor } from './helpers/cli.js';

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

  it('starts API and workers in one process and stops gracefully on SIGTERM', async () => {
    const port = String(20000 + Math.floor(Math.random() * 20000));
    const child = spawnCli(['start'], { ...env, PORT: port, HOST: '127.0.0.1' });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await waitFor(async () => {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/readyz`);
        return res.status === 200;
      } catch {
        return false;
      }
    }, 30_000);
    child.kill('SIGTERM');
    expect(await exited).toBe(0);
    expect(out).toContain('shutting down');
  });
});
