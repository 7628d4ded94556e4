/**
 * What writing the event log costs the apply, statement by statement (`npm run bench:event-log-write`, issue 42:
 * bench:ingest's closed loop with the log on must keep 0.9 of its rate with it off).
 *
 * bench:ingest measures that end to end, through the API, the staging table and the worker, where two cores shared with
 * the load generator make single runs vary by 2x. This isolates the part that differs: in the schema BENCH_SCHEMA
 * (`bench_event_log_write`, recreated) with BENCH_USERS (100,000) profiles as bench:ingest loads them, transactions
 * each of BENCH_BATCH (1,500) events of as many random profiles (bench:ingest's worst case: one event per rewritten
 * profile) run the apply's profile rewrite and then, per variant, nothing or one way of logging the events, committed.
 * The variants alternate round by round (BENCH_ROUNDS, 12), so that a change of the machine's load moves them all;
 * printed: the median µs per event of each variant and its rate against the rewrite alone.
 * Nothing here is a test: the figures depend on the machine and what else runs on it.
 */
import { readFileSync } from 'node:fs';
import { createPool, type Pool } from '../src/platform/db/pool.js';
import { freshWorkspace } from './workspace.js';
import type { PoolClient } from '../src/platform/db/pool.js';
import { copyLogRows, logEvents, logRows } from '../src/profiles/event-log.js';
import type { EventEntry } from '../src/profiles/event-log-types.js';

const USERS = Number(process.env.BENCH_USERS ?? 100_000);
const BATCH = Number(process.env.BENCH_BATCH ?? 1_500);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 12);
const SCHEMA = process.env.BENCH_SCHEMA ?? 'bench_event_log_write';
const DATABASE_URL = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/ces';
const LIVE_TIMES = process.env.BENCH_EVENT_TIMES === 'live';
const log = (line: string) => console.log(`[bench:event-log-write] ${line}`);

interface Batch {
  ids: number[];
  entries: EventEntry[];
}

async function prepare(pool: Pool): Promise<string> {
  const ws = await freshWorkspace(pool, SCHEMA);
  await pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, first_name, email, custom_attributes, custom_events)
     SELECT $1, md5('s' || g), 'user-' || g, g % 10000, 'First' || g, 'user' || g || '@example.com',
            jsonb_build_object('plan', 'gold', 'score', g % 100, 'tags', jsonb_build_array('a', 'b', 'c')),
            (SELECT jsonb_object_agg('event-' || e, jsonb_build_object('name', 'event-' || e, 'first', '2023-01-01T00:00:00.000Z',
                                                                         'last', '2023-06-01T00:00:00.000Z', 'count', 3))
               FROM generate_series(0, 9) e)
       FROM generate_series(0, $2 - 1) g`,
    [ws, USERS],
  );
  await pool.query('VACUUM ANALYZE profiles');
  return ws;
}

let serial = 0;
function makeBatch(ws: string, lo: number): Batch {
  const ids = new Set<number>();
  while (ids.size < BATCH) ids.add(lo + Math.floor(Math.random() * USERS));
  const base = Date.UTC(2024, 0, 1);
  const entries = [...ids].map((id): EventEntry => ({
    type: 'users.behaviors.CustomEvent',
    workspaceId: ws,
    key: `bench:${serial++}`,
    profileId: id,
    time: LIVE_TIMES
      ? new Date().toISOString()
      : new Date(base + Math.floor(Math.random() * 180 * 86_400_000)).toISOString(),
    appId: null,
    name: `event-${Math.floor(Math.random() * 20)}`,
    properties: { source: 'bench', amount: Math.round(Math.random() * 1000) / 10 },
  }));
  return { ids: [...ids], entries };
}

/** The apply's rewrite of the batch's profiles, as bench:ingest's ceiling prices it (one event counted on each). */
async function rewrite(client: PoolClient, b: Batch): Promise<void> {
  await client.query(
    `UPDATE profiles p SET custom_events = jsonb_set(p.custom_events, '{event-1,count}',
            to_jsonb(coalesce((p.custom_events #>> '{event-1,count}')::int, 0) + 1)), updated_at = now()
      WHERE p.id = ANY($1::bigint[])`,
    [b.ids],
  );
}

const VARIANTS: Record<string, (client: PoolClient, b: Batch) => Promise<void>> = {
  'rewrite alone': async () => {},
  'rewrite + log and rollups': (client, b) => logEvents(client, b.entries),
  'rewrite + log': (client, b) => copyLogRows(client, logRows(b.entries)),
};

/** CPU seconds (user + system) a PostgreSQL backend has used: what a statement costs whatever else runs. */
function backendCpu(pid: number): number {
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  return (Number(fields[11]) + Number(fields[12])) / 100;
}

async function measure(pool: Pool, ws: string, lo: number) {
  const times: Record<string, number[]> = Object.fromEntries(Object.keys(VARIANTS).map((k) => [k, []]));
  const cpu: Record<string, number> = Object.fromEntries(Object.keys(VARIANTS).map((k) => [k, 0]));
  for (let round = 0; round < ROUNDS + 1; round++) {
    const order = Object.keys(VARIANTS);
    if (round % 2 === 1) order.reverse();
    for (const name of order) {
      const b = makeBatch(ws, lo);
      const client = await pool.connect();
      try {
        const pid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid;
        const cpuBefore = backendCpu(pid);
        const started = process.hrtime.bigint();
        await client.query('BEGIN');
        await rewrite(client, b);
        await VARIANTS[name]!(client, b);
        await client.query('COMMIT');
        const us = Number(process.hrtime.bigint() - started) / 1000 / BATCH;
        if (round > 0) {
          // round 0 warms the caches
          times[name]!.push(us);
          cpu[name]! += backendCpu(pid) - cpuBefore;
        }
      } finally {
        client.release();
      }
    }
  }
  const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
  const alone = median(times['rewrite alone']!);
  const cpuAlone = cpu['rewrite alone']!;
  for (const [name, xs] of Object.entries(times)) {
    const m = median(xs);
    const cpuUs = (cpu[name]! * 1e6) / (ROUNDS * BATCH);
    log(
      `${name.padEnd(30)} ${m.toFixed(1).padStart(7)} µs/event (wall, median), ${cpuUs.toFixed(1).padStart(6)} µs/event PostgreSQL CPU;` +
        ` vs rewrite alone: rate ${(alone / m).toFixed(2)}, CPU ${(cpuAlone / cpu[name]!).toFixed(2)}`,
    );
  }
}

async function main() {
  const pool = createPool({ DATABASE_URL, DATABASE_SCHEMA: SCHEMA, DATABASE_POOL_SIZE: 2 });
  try {
    const ws = await prepare(pool);
    const lo = Number((await pool.query<{ lo: string }>('SELECT min(id) AS lo FROM profiles')).rows[0]!.lo);
    log(
      `${USERS.toLocaleString('en-US')} profiles; batches of ${BATCH} events; ${ROUNDS} rounds; times ${LIVE_TIMES ? 'live' : 'spread over 180 days'}`,
    );
    for (const phase of ['with the profile_id btree', 'without it']) {
      if (phase === 'without it') await pool.query('DROP INDEX event_log_profile');
      log(phase);
      await measure(pool, ws, lo);
    }
  } finally {
    if (!process.env.BENCH_KEEP) await pool.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`).catch(() => {});
    await pool.end();
  }
}

await main();
