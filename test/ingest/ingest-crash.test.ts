import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { useTestEnv } from '../helpers/context.js';
import { spawnCli, waitFor } from '../helpers/cli.js';
import { bearer } from '../helpers/seed.js';
import { entries, type AggregateEntry } from '../helpers/aggregates.js';

const env = useTestEnv({ workspaces: ['ws'] });
let child: ChildProcess | undefined;

afterAll(async () => {
  child?.kill('SIGKILL');
});

const USERS = 300;
const NAMES = 5;
const REQUESTS = 160;

async function staged() {
  return (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_staging')).rows[0]!.n;
}

/** True while some backend is inside one of our batch transactions with writes done (mid-batch). */
async function batchInFlight() {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE backend_xid IS NOT NULL AND pid <> pg_backend_pid()
        AND (query LIKE '%jsonb_to_recordset($1::jsonb) AS u(id bigint, seen xid8, ev jsonb%' OR query LIKE '%DELETE FROM ingest_staging%'
             OR query LIKE '%INSERT INTO event_log%'
             OR query LIKE '%SELECT ''e'' AS t, p.external_id AS k%')`,
  );
  return rows[0]!.n > 0;
}

describe('a worker killed mid-batch', () => {
  it('loses no accepted event and counts none twice', async () => {
    // Accept every request first (the API answers 201 only once its objects are committed to the staging log).
    const expected = new Map<string, { count: number; first: string; last: string }>();
    let n = 0;
    for (let r = 0; r < REQUESTS; r++) {
      const events = Array.from({ length: 75 }, () => {
        n++;
        const user = `k${(n * 7919) % USERS}`;
        const name = `e${n % NAMES}`;
        const time = new Date(Date.UTC(2024, 0, 1) + ((n * 104_729) % 10_000_000) * 1000).toISOString();
        const key = `${user}/${name}`;
        const e = expected.get(key);
        if (!e) expected.set(key, { count: 1, first: time, last: time });
        else {
          e.count++;
          if (time < e.first) e.first = time;
          if (time > e.last) e.last = time;
        }
        return { external_id: user, name, time };
      });
      const res = await env.app.inject({
        method: 'POST',
        url: '/users/track',
        headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
        payload: { events },
      });
      expect(res.statusCode).toBe(201);
    }
    // A row per request and ingestion partition (75 random users fall in every partition).
    const stagedRows = REQUESTS * env.config.INGEST_PARTITIONS;
    expect(await staged()).toBe(stagedRows);

    // A real `ces worker` process applies them, a few rows per transaction and its partitions at once, and is
    // killed with SIGKILL while one of its transactions has written rows but not committed.
    const workerEnv = {
      DATABASE_URL: env.config.DATABASE_URL,
      DATABASE_SCHEMA: env.config.DATABASE_SCHEMA,
      REDIS_URL: env.config.REDIS_URL,
      ...(env.config.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: env.config.REDIS_CLUSTER_NODES } : {}),
      REDIS_PREFIX: env.config.REDIS_PREFIX,
      MIGRATE_ON_START: 'false',
      INGEST_BATCH_MAX_JOBS: '8',
      LOG_LEVEL: 'warn',
    };
    child = spawnCli(['worker', '--queues', 'track-ingest'], workerEnv);
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child!.on('exit', (_code, signal) => resolve(signal)),
    );
    await waitFor(async () => (await staged()) < stagedRows - 16, 60_000, 20);
    await waitFor(batchInFlight, 30_000, 1);
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    child = undefined;
    const left = await staged();
    expect(left, stderr).toBeGreaterThan(0);
    expect(left).toBeLessThan(stagedRows);

    // Another worker finishes the work: the killed batch was rolled back whole and is applied exactly once.
    env.startWorkers([trackIngestJob]);
    await waitFor(async () => (await staged()) === 0, 60_000, 50);

    const { rows } = await env.ctx.pool.query<{ external_id: string; custom_events: Record<string, AggregateEntry> }>(
      'SELECT external_id, custom_events FROM profiles WHERE workspace_id = $1',
      [env.ws.workspaceId],
    );
    expect(rows).toHaveLength(USERS);
    const actual = new Map<string, { count: number; first: string; last: string }>();
    for (const p of rows)
      for (const e of entries(p.custom_events)!)
        actual.set(`${p.external_id}/${e.name}`, { count: e.count, first: e.first, last: e.last });
    expect(actual.size).toBe(expected.size);
    for (const [key, e] of expected) expect(actual.get(key), key).toEqual(e);
    expect([...actual.values()].reduce((s, e) => s + e.count, 0)).toBe(REQUESTS * 75);

    // The event log, written in the same transactions: one row per accepted event, none twice (the killed batch's
    // rows went with it, and its objects kept their ids when applied again).
    const log = await env.ctx.pool.query<{ n: number; ids: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT id)::int AS ids
         FROM event_log WHERE workspace_id = $1 AND type = 'users.behaviors.CustomEvent'`,
      [env.ws.workspaceId],
    );
    expect(log.rows[0]).toEqual({ n: REQUESTS * 75, ids: REQUESTS * 75 });
  });
});
