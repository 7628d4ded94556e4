import { describe, expect, it } from 'vitest';
import type { PoolClient } from '../../src/platform/db/pool.js';
import { applyObjects } from '../../src/profiles/tracked-objects.js';
import { lockProfilePartition, lockWorkspaceProfiles } from '../../src/profiles/write/locks.js';
import { partitionOf, splitByPartition } from '../../src/pipelines/ingest/apply/partitions.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { stageObjects } from '../../src/pipelines/ingest/accept/staging-writer.js';
import type { Identity, TrackAttributes, TrackObjects } from '../../src/profiles/tracked-types.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';
import { entries } from '../helpers/aggregates.js';

const env = useTestEnv({ config: { INGEST_PARTITIONS: '4' }, workspaces: ['ws'] });

const drain = (partitions = env.config.INGEST_PARTITIONS) =>
  drainThrough(env.ctx.pool, undefined, { maxRows: 50, partitions, log: env.ctx.log, metrics: env.ctx.metrics });

const external = (value: string): Identity => ({ type: 'external_id', value });
const event = (user: string, name: string) => ({
  identity: external(user),
  create: true,
  name,
  time: '2024-01-01T00:00:00.000Z',
});

async function eventCount(externalId: string): Promise<number> {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    `SELECT coalesce(sum((e->>'count')::int), 0)::int AS n FROM profiles p, jsonb_each(p.custom_events) AS c(name, e)
      WHERE p.workspace_id = $1 AND p.external_id = $2`,
    [env.ws.workspaceId, externalId],
  );
  return rows[0]!.n;
}

describe('partitioning a request', () => {
  it('puts every object in exactly one partition, the same identifier always in the same one, in the order sent', () => {
    const objects: TrackObjects = {
      events: Array.from({ length: 60 }, (_, i) => event(`user-${i % 30}`, `e${i}`)),
      purchases: [],
      attributes: [
        {
          identity: { type: 'email', value: 'a@example.com' },
          create: false,
          at: '2024-01-01T00:00:00.000Z',
          standard: {},
          custom: { x: 1 },
        },
      ],
    };
    const parts = splitByPartition(objects, 4);
    expect(parts.length).toBeGreaterThan(1);
    expect(parts.map((p) => p.part)).toEqual([...new Set(parts.map((p) => p.part))].sort());
    const seen = parts.flatMap((p) => p.objects.events.map((e) => e.name));
    expect(seen.sort()).toEqual(objects.events.map((e) => e.name).sort());
    for (const { part, objects: o } of parts) {
      for (const e of o.events) expect(partitionOf(e.identity, 4)).toBe(part);
      // Within a partition the order sent is kept.
      const indexes = o.events.map((e) => Number(e.name.slice(1)));
      expect(indexes).toEqual([...indexes].sort((a, b) => a - b));
    }
    expect(parts.flatMap((p) => p.objects.attributes)).toHaveLength(1);
    expect(splitByPartition(objects, 1)).toEqual([{ part: 0, objects }]);
  });

  it('spreads users over the partitions', () => {
    const counts = [0, 0, 0, 0];
    for (let i = 0; i < 4000; i++) counts[partitionOf(external(`user-${i}`), 4)]!++;
    for (const c of counts) expect(c).toBeGreaterThan(800);
  });
});

describe('staging and draining by partition', () => {
  it('stages a request as one row per partition in one commit, and a drain applies them all', async () => {
    const res = await env.app.inject({
      method: 'POST',
      url: '/users/track',
      headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
      payload: {
        events: Array.from({ length: 75 }, (_, i) => ({
          external_id: `p-${i % 25}`,
          name: 'opened',
          time: '2024-01-01T00:00:00Z',
        })),
      },
    });
    expect(res.statusCode).toBe(201);
    const { rows } = await env.ctx.pool.query<{ part: number; objects: number; payload: string }>(
      'SELECT part, objects, payload FROM ingest_staging ORDER BY id',
    );
    expect(rows.length).toBeGreaterThan(1);
    expect(rows.reduce((n, r) => n + r.objects, 0)).toBe(75);
    for (const r of rows) {
      for (const e of (JSON.parse(r.payload) as TrackObjects).events) expect(partitionOf(e.identity, 4)).toBe(r.part);
    }
    await drain();
    expect((await env.ctx.pool.query('SELECT 1 FROM ingest_staging')).rowCount).toBe(0);
    for (let i = 0; i < 25; i++) expect(await eventCount(`p-${i}`)).toBe(3);
  });

  it('drains rows staged with more partitions than the drain uses, and with fewer', async () => {
    await stageObjects(
      env.ctx.pool,
      env.ws.workspaceId,
      { events: Array.from({ length: 30 }, (_, i) => event(`q-${i}`, 'x')), purchases: [], attributes: [] },
      16,
    );
    const parts = (await env.ctx.pool.query<{ part: number }>('SELECT DISTINCT part FROM ingest_staging')).rows.map(
      (r) => r.part,
    );
    expect(Math.max(...parts)).toBeGreaterThanOrEqual(4);
    await stageObjects(
      env.ctx.pool,
      env.ws.workspaceId,
      { events: [event('q-0', 'x')], purchases: [], attributes: [] },
      1,
    );
    const result = await drain(4);
    expect(result.events).toBe(31);
    expect((await env.ctx.pool.query('SELECT 1 FROM ingest_staging')).rowCount).toBe(0);
    expect(await eventCount('q-0')).toBe(2);
  });
});

describe('drain loops of one process', () => {
  it('run one at a time per partition: a second drain claims no rows while the first waits for the partition', async () => {
    for (let i = 0; i < 10; i++)
      await stageObjects(
        env.ctx.pool,
        env.ws.workspaceId,
        { events: [event(`turn-${i}`, 'x')], purchases: [], attributes: [] },
        1,
      );
    const claimable = async () =>
      (
        await env.ctx.pool.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM (SELECT 1 FROM ingest_staging FOR UPDATE SKIP LOCKED) s',
        )
      ).rows[0]!.n;
    const options = { maxRows: 4, partitions: 1, log: env.ctx.log, metrics: env.ctx.metrics };
    // Another process's batch holds partition 0: the first drain claims its first batch, then waits for the lock.
    const holder = await inTransaction();
    await lockProfilePartition(holder, [env.ws.workspaceId], 0);
    const first = drainThrough(env.ctx.pool, undefined, options);
    for (let i = 0; i < 250 && (await claimable()) !== 6; i++) await new Promise((r) => setTimeout(r, 20));
    expect(await claimable()).toBe(6);
    // A second job of this process waits its turn instead of claiming the next rows and sitting on them.
    const second = drainThrough(env.ctx.pool, undefined, options);
    for (let i = 0; i < 25; i++) {
      expect(await claimable()).toBe(6);
      await new Promise((r) => setTimeout(r, 20));
    }
    await commit(holder);
    const [a, b] = await Promise.all([first, second]);
    expect(a.events + b.events).toBe(10);
    expect(b.events).toBe(0);
    expect((await env.ctx.pool.query('SELECT 1 FROM ingest_staging')).rowCount).toBe(0);
    for (let i = 0; i < 10; i++) expect(await eventCount(`turn-${i}`)).toBe(1);
  });
});

/** Waits until the backend of `client` is blocked on a lock (a row lock or an advisory lock). */
async function blockedOnLock(client: PoolClient): Promise<void> {
  const pid = (client as unknown as { processID: number }).processID;
  for (let i = 0; i < 500; i++) {
    const { rows } = await env.ctx.pool.query<{ w: string | null }>(
      'SELECT wait_event_type AS w FROM pg_stat_activity WHERE pid = $1',
      [pid],
    );
    if (rows[0]?.w === 'Lock') return;
    await new Promise((r) => setTimeout(r, 20));
  }
  throw new Error(`backend ${pid} never waited on a lock`);
}

async function inTransaction(): Promise<PoolClient> {
  const client = await env.ctx.pool.connect();
  await client.query('BEGIN');
  return client;
}

async function commit(client: PoolClient): Promise<void> {
  await client.query('COMMIT');
  client.release();
}

describe('batches of two partitions on the same user', () => {
  const attributes = (
    identity: Identity,
    at: string,
    standard: TrackAttributes['standard'],
    custom: TrackAttributes['custom'],
  ): TrackObjects => ({
    events: [{ identity, create: false, name: identity.type, time: at }],
    purchases: [],
    attributes: [{ identity, create: false, at, standard, custom }],
  });

  it('keep the newer attribute values and every count when the older batch commits last', async () => {
    // One user named by external_id in one partition's batch and by email in another's.
    await env.ctx.pool.query(
      `INSERT INTO profiles (workspace_id, service_id, external_id, email, random_bucket, custom_attributes, attribute_times)
       VALUES ($1, 'svc-lww', 'lww', 'lww@example.com', 1, '{"keep": "old"}', '{"custom_attributes.keep": "2024-01-01T00:00:00.000Z"}')`,
      [env.ws.workspaceId],
    );
    const newer = await inTransaction();
    await applyObjects(newer, [
      {
        workspaceId: env.ws.workspaceId,
        objects: attributes(
          external('lww'),
          '2024-06-02T00:00:00.000Z',
          { first_name: 'Newer' },
          { tier: 'gold', keep: 'newer' },
        ),
      },
    ]);
    // The older batch read the row before the newer one committed: it decides to write, then waits for the row lock.
    const older = await inTransaction();
    const olderApplied = applyObjects(older, [
      {
        workspaceId: env.ws.workspaceId,
        objects: attributes(
          { type: 'email', value: 'lww@example.com' },
          '2024-06-01T00:00:00.000Z',
          { first_name: 'Older', last_name: 'Only-older' },
          { tier: 'silver', keep: null },
        ),
      },
    ]);
    await blockedOnLock(older);
    await commit(newer);
    await olderApplied;
    await commit(older);

    const { rows } = await env.ctx.pool.query('SELECT * FROM profiles WHERE workspace_id = $1 AND external_id = $2', [
      env.ws.workspaceId,
      'lww',
    ]);
    const p = rows[0];
    expect(p.first_name).toBe('Newer');
    expect(p.last_name).toBe('Only-older');
    expect(p.custom_attributes).toEqual({ tier: 'gold', keep: 'newer' });
    expect(p.attribute_times).toEqual({
      first_name: '2024-06-02T00:00:00.000Z',
      last_name: '2024-06-01T00:00:00.000Z',
      'custom_attributes.tier': '2024-06-02T00:00:00.000Z',
      'custom_attributes.keep': '2024-06-02T00:00:00.000Z',
    });
    expect(entries(p.custom_events)!.map((e) => [e.name, e.count])).toEqual([
      ['email', 1],
      ['external_id', 1],
    ]);
  });

  it('a stored email state applies only where the batch wrote the address', async () => {
    await env.ctx.pool.query(
      `INSERT INTO email_subscriptions (workspace_id, email, state) VALUES ($1, 'stale@example.com', 'unsubscribed'), ($1, 'fresh@example.com', 'unsubscribed')`,
      [env.ws.workspaceId],
    );
    await env.ctx.pool.query(
      `INSERT INTO profiles (workspace_id, service_id, external_id, email, random_bucket) VALUES ($1, 'svc-tie', 'tie', 'tie@example.com', 1)`,
      [env.ws.workspaceId],
    );
    const newer = await inTransaction();
    // The newer batch sets the address and its state explicitly: the address's stored state must not replace it.
    await applyObjects(newer, [
      {
        workspaceId: env.ws.workspaceId,
        objects: attributes(
          external('tie'),
          '2024-06-02T00:00:00.000Z',
          { email: 'fresh@example.com', email_subscribe: 'opted_in' },
          {},
        ),
      },
    ]);
    const older = await inTransaction();
    const olderApplied = applyObjects(older, [
      {
        workspaceId: env.ws.workspaceId,
        objects: attributes(
          { type: 'email', value: 'tie@example.com' },
          '2024-06-01T00:00:00.000Z',
          { email: 'stale@example.com' },
          {},
        ),
      },
    ]);
    await blockedOnLock(older);
    await commit(newer);
    await olderApplied;
    await commit(older);
    const { rows } = await env.ctx.pool.query(
      'SELECT email, email_subscribe FROM profiles WHERE workspace_id = $1 AND external_id = $2',
      [env.ws.workspaceId, 'tie'],
    );
    expect(rows[0]).toEqual({ email: 'fresh@example.com', email_subscribe: 'opted_in' });
  });
});

describe('ingestion locks', () => {
  it('partitions apply at once; a writer taking the whole workspace waits for them, and they for it', async () => {
    const part0 = await inTransaction();
    await lockProfilePartition(part0, [env.ws.workspaceId], 0);
    // Another partition is not held up (this would time out if it were).
    const part1 = await inTransaction();
    await lockProfilePartition(part1, [env.ws.workspaceId], 1);

    const whole = await inTransaction();
    let wholeHeld = false;
    const wholeLocked = lockWorkspaceProfiles(whole, [env.ws.workspaceId]).then(() => (wholeHeld = true));
    await blockedOnLock(whole);
    await commit(part0);
    expect(wholeHeld).toBe(false);
    await commit(part1);
    await wholeLocked;

    const again = await inTransaction();
    const againLocked = lockProfilePartition(again, [env.ws.workspaceId], 0);
    await blockedOnLock(again);
    await commit(whole);
    await againLocked;
    await commit(again);
  });
});
