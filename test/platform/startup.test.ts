import { randomBytes } from 'node:crypto';
import { once } from 'node:events';
import { Redis } from 'ioredis';
import pg from 'pg';
import { afterAll, describe, expect, it } from 'vitest';
import { runCli, spawnCli, waitFor, type CliResult } from '../helpers/cli.js';
import { freePort } from '../helpers/own-servers.js';

/**
 * `ces` against a PostgreSQL or Redis that cannot be reached: it gives up within STARTUP_TIMEOUT_SECONDS with one
 * line that names the variable and the address (never a password), instead of serving 500s or hanging; and an idle
 * worker stops at once on SIGTERM.
 */

const schema = `t_start_${randomBytes(4).toString('hex')}`;
const databaseUrl = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const redisUrl = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const TIMEOUT_S = 2;
const env = {
  DATABASE_URL: databaseUrl,
  DATABASE_SCHEMA: schema,
  REDIS_URL: redisUrl,
  REDIS_PREFIX: `ces-${schema}`,
  LOG_LEVEL: 'info',
  NODE_ENV: 'test',
  HOST: '127.0.0.1',
  STARTUP_TIMEOUT_SECONDS: String(TIMEOUT_S),
};
const SECRET = 'hunter2-never-printed';

afterAll(async () => {
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  await client.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await client.end();
  const redis = new Redis(redisUrl);
  const keys = await redis.keys(`${env.REDIS_PREFIX}:*`);
  if (keys.length > 0) await redis.del(...keys);
  redis.disconnect();
});

/** Runs `ces <command>` and how long it took; a process that never exits fails the test (runCli's own timeout). */
async function timed(command: string, overrides: Record<string, string>): Promise<CliResult & { seconds: number }> {
  const started = Date.now();
  const port = String(await freePort());
  const res = await runCli([command], { ...env, PORT: port, ...overrides }, 90_000);
  return { ...res, seconds: (Date.now() - started) / 1000 };
}

const lines = (text: string) => text.split('\n').filter((l) => l.trim() !== '');

// Node and tsx take a few seconds to load the sources on a busy two-core machine: that, not the wait, is most of it,
// and it grows with the load (20-28 s seen with the suite's other files and a benchmark beside it). So each command's
// time is held against the same command's refusal of a malformed URL, started at the same moment: it loads the same
// sources and exits before connecting to anything, so the difference is the wait and what follows it.
const STARTUP_ALLOWANCE_S = 10;

/**
 * `ces <command>` of each command against an unreachable service, and beside them `ces serve` refusing a malformed URL
 * (its baseline): `waited` is each one's time less the baseline's.
 */
async function timedAgainstBaseline(commands: string[], overrides: Record<string, string>) {
  const [baseline, ...results] = await Promise.all([
    timed('serve', { DATABASE_URL: 'not-a-url' }),
    ...commands.map((command) => timed(command, overrides)),
  ]);
  expect(baseline!.code, baseline!.stderr).toBe(2);
  return results.map((res) => ({ ...res, waited: res.seconds - baseline!.seconds }));
}

describe('ces start-up', () => {
  it('serve, worker and start exit 1 within the timeout when Redis cannot be reached, with one line naming REDIS_URL', async () => {
    const closed = await freePort();
    const results = await timedAgainstBaseline(['serve', 'worker', 'start'], {
      REDIS_URL: `redis://:${SECRET}@127.0.0.1:${closed}`,
    });
    for (const res of results) {
      expect(res.code, res.stderr).toBe(1);
      expect(res.waited).toBeLessThan(TIMEOUT_S + STARTUP_ALLOWANCE_S);
      expect(lines(res.stderr), res.stderr).toHaveLength(1);
      expect(res.stderr).toContain(
        `cannot reach Redis at redis://:***@127.0.0.1:${closed} (REDIS_URL) within ${TIMEOUT_S} s`,
      );
      expect(res.stdout + res.stderr).not.toContain(SECRET);
      // ioredis' own lines for errors nobody listens to must not appear either.
      expect(res.stdout + res.stderr).not.toContain('Unhandled error event');
    }
  }, 120_000);

  it('serve, worker, start and migrate exit 1 within the timeout when PostgreSQL cannot be reached, naming DATABASE_URL', async () => {
    const closed = await freePort();
    const url = `postgres://postgres:${SECRET}@127.0.0.1:${closed}/test`;
    const results = await timedAgainstBaseline(['serve', 'worker', 'start', 'migrate'], { DATABASE_URL: url });
    for (const res of results) {
      expect(res.code, res.stderr).toBe(1);
      expect(res.waited).toBeLessThan(TIMEOUT_S + STARTUP_ALLOWANCE_S);
      expect(lines(res.stderr), res.stderr).toHaveLength(1);
      expect(res.stderr).toContain(
        `cannot reach PostgreSQL at postgres://postgres:***@127.0.0.1:${closed}/test (DATABASE_URL) within ${TIMEOUT_S} s`,
      );
      expect(res.stdout + res.stderr).not.toContain(SECRET);
    }
  }, 120_000);

  it('refuses a DATABASE_URL or REDIS_URL that is not a URL, with exit code 2, before connecting to anything', async () => {
    const [database, redis] = await Promise.all([
      timed('serve', { DATABASE_URL: 'not-a-url' }),
      timed('worker', { REDIS_URL: 'localhost:6379' }),
    ]);
    expect(database.code).toBe(2);
    expect(database.stderr).toMatch(/DATABASE_URL: must be a URL/);
    expect(database.stderr).not.toMatch(/ENOTFOUND|getaddrinfo/);
    expect(redis.code).toBe(2);
    expect(redis.stderr).toMatch(/REDIS_URL: must be a URL/);
  });

  it('migrate needs only PostgreSQL; an idle worker stops within 2 s of SIGTERM', async () => {
    const migrated = await timed('migrate', { REDIS_URL: `redis://127.0.0.1:${await freePort()}` });
    expect(migrated.code, migrated.stderr).toBe(0);

    const child = spawnCli(['worker'], { ...env, MIGRATE_ON_START: 'false' });
    let out = '';
    child.stdout!.on('data', (d) => (out += d));
    child.stderr!.on('data', (d) => (out += d));
    const exited = once(child, 'exit') as Promise<[number | null, NodeJS.Signals | null]>;
    // Started, and its start hooks (schedules armed) done: nothing is running.
    await waitFor(() => out.includes('workers started') && out.includes('canvas schedules armed'), 30_000);
    await new Promise((r) => setTimeout(r, 500));
    const signalled = Date.now();
    child.kill('SIGTERM');
    const [code] = await exited;
    expect(Date.now() - signalled).toBeLessThan(2000);
    expect(code, out).toBe(0);
  });
});
