import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { entries, type AggregateEntry } from '../helpers/aggregates.js';
import { spawnCli, waitFor } from '../helpers/cli.js';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { startOwnPostgres, type OwnPostgres } from '../helpers/own-servers.js';
import { bearer, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

/**
 * User-data commands under the faults /users/track already survives: a real `ces worker` SIGKILLed while one of its
 * transactions is inside a row of merges, and its PostgreSQL stopped (fast, then immediate) while it applies them.
 * Merges are not idempotent (counts add), so a row applied twice, or half, would show: every kept user must end with
 * exactly its own events plus its merged twin's plus those tracked after the merge, every merged user gone, every
 * deleted one gone, each once.
 */

let pg: OwnPostgres;
let env: TestEnv;
let ws: SeededWorkspace;
let child: ChildProcess | undefined;
const down = { pg: false };

const PAIRS = 400;
const BEFORE = 4;
const AFTER = 3;

beforeAll(async () => {
  pg = await startOwnPostgres();
  env = await createTestEnv({ DATABASE_URL: pg.url });
  ws = await seedWorkspace(env.ctx.pool);
}, 60_000);

afterAll(async () => {
  child?.kill('SIGKILL');
  if (down.pg) await pg.start().catch(() => {});
  await env?.close();
  await pg?.close();
});

async function post(url: string, body: unknown) {
  const res = await env.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(ws.apiKey), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, res.body).toBeLessThan(300);
}

const count = async (sql: string, params: unknown[] = []) =>
  (await env.ctx.pool.query<{ n: number }>(sql, params)).rows[0]!.n;
const staged = () => count(`SELECT count(*)::int AS n FROM ingest_staging`);

/** Stages, for a round: events for 2×PAIRS users, a merge of each odd user into its even twin, then more events, and deletes of every tenth kept user. */
async function stageRound(round: string): Promise<void> {
  const user = (i: number) => `${round}-${i}`;
  for (let from = 0; from < 2 * PAIRS; from += 75) {
    const events = Array.from({ length: Math.min(75, 2 * PAIRS - from) }, (_, j) => ({
      external_id: user(from + j),
      name: 'before',
      time: '2026-01-01T00:00:00Z',
    }));
    for (let k = 0; k < BEFORE; k++) await post('/users/track', { events });
  }
  for (let from = 0; from < PAIRS; from += 50) {
    const merge_updates = Array.from({ length: Math.min(50, PAIRS - from) }, (_, j) => ({
      identifier_to_merge: { external_id: user(2 * (from + j) + 1) },
      identifier_to_keep: { external_id: user(2 * (from + j)) },
    }));
    await post('/users/merge', { merge_updates });
  }
  for (let from = 0; from < PAIRS; from += 75) {
    const events = Array.from({ length: Math.min(75, PAIRS - from) }, (_, j) => ({
      external_id: user(2 * (from + j)),
      name: 'after',
      time: '2026-02-01T00:00:00Z',
    }));
    for (let k = 0; k < AFTER; k++) await post('/users/track', { events });
  }
  await post('/users/delete', { external_ids: Array.from({ length: PAIRS / 10 }, (_, i) => user(20 * i)) });
}

/** Every kept user's counts exact; merged and deleted users gone. */
async function expectExact(round: string): Promise<void> {
  const { rows } = await env.ctx.pool.query<{ external_id: string; custom_events: Record<string, AggregateEntry> }>(
    `SELECT external_id, custom_events FROM profiles WHERE workspace_id = $1 AND external_id LIKE $2`,
    [ws.workspaceId, `${round}-%`],
  );
  const byId = new Map(rows.map((r) => [r.external_id, entries(r.custom_events)!]));
  const expected = new Map<string, Array<[string, number]>>();
  for (let p = 0; p < PAIRS; p++) {
    if ((2 * p) % 20 === 0) continue;
    expected.set(`${round}-${2 * p}`, [
      ['after', AFTER],
      ['before', 2 * BEFORE],
    ]);
  }
  expect(byId.size).toBe(expected.size);
  for (const [id, want] of expected)
    expect(
      byId.get(id)?.map((e) => [e.name, e.count]),
      id,
    ).toEqual(want);
  expect(
    await count(`SELECT count(*)::int AS n FROM profile_tombstones WHERE workspace_id = $1 AND external_id LIKE $2`, [
      ws.workspaceId,
      `${round}-%`,
    ]),
  ).toBe(PAIRS + PAIRS / 10);
}

function spawnWorker(): { child: ChildProcess; output: () => string } {
  let output = '';
  const c = spawnCli(['worker', '--queues', 'track-ingest'], {
    NODE_ENV: 'test',
    LOG_LEVEL: 'warn',
    DATABASE_URL: pg.url,
    DATABASE_SCHEMA: env.config.DATABASE_SCHEMA,
    REDIS_URL: env.config.REDIS_URL,
    ...(env.config.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: env.config.REDIS_CLUSTER_NODES } : {}),
    REDIS_PREFIX: env.config.REDIS_PREFIX,
    MIGRATE_ON_START: 'false',
    INGEST_BATCH_MAX_JOBS: '4',
    INGEST_PARTITIONS: '2',
  });
  c.stdout!.on('data', (d) => (output += d));
  c.stderr!.on('data', (d) => (output += d));
  return { child: c, output: () => output };
}

/** True while a backend is inside a transaction that has merged profiles and not committed. */
async function mergeInFlight(): Promise<boolean> {
  return (
    (await count(
      `SELECT count(*)::int AS n FROM pg_stat_activity
        WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid() AND (query LIKE '%UPDATE profiles k SET%' OR query LIKE '%DELETE FROM profiles WHERE workspace_id%' OR query LIKE '%UPDATE profile_aliases a SET profile_id%')`,
    )) > 0
  );
}

describe('user-data commands when the worker or PostgreSQL dies mid-apply', () => {
  it('a worker SIGKILLed inside a row of merges: the row is applied exactly once by the next worker', async () => {
    await stageRound('kill');
    const rows = await staged();
    const worker = spawnWorker();
    child = worker.child;
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      worker.child.on('exit', (_code, signal) => resolve(signal)),
    );
    await waitFor(mergeInFlight, 60_000, 1);
    worker.child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    child = undefined;
    const left = await staged();
    expect(left, worker.output()).toBeGreaterThan(0);
    expect(left).toBeLessThan(rows);
    const workers = env.startWorkers([trackIngestJob]);
    try {
      await waitFor(async () => (await staged()) === 0, 60_000, 50);
    } finally {
      await workers.close(5_000);
    }
    await expectExact('kill');
  }, 180_000);

  for (const mode of ['fast', 'immediate'] as const) {
    it(`PostgreSQL stopped (${mode}) while a worker applies merges: every command applied once after it is back, no manual step`, async () => {
      await stageRound(mode);
      const worker = spawnWorker();
      child = worker.child;
      try {
        await waitFor(mergeInFlight, 60_000, 1);
        await pg.stop(mode);
        down.pg = true;
        await new Promise((r) => setTimeout(r, 1_000));
        await pg.start();
        down.pg = false;
        await waitFor(
          async () => {
            if (worker.child.exitCode !== null) throw new Error(`ces worker exited:\n${worker.output().slice(-2000)}`);
            return (await staged().catch(() => -1)) === 0;
          },
          90_000,
          100,
        );
      } finally {
        worker.child.kill('SIGTERM');
        child = undefined;
      }
      await expectExact(mode);
    }, 240_000);
  }
});
