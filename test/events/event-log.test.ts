import { beforeAll, describe, expect, it } from 'vitest';
import { bulkImportJob } from '../../jobs/bulk-import.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { stageObjects } from '../../src/pipelines/ingest/accept/staging-writer.js';
import { LocalStore } from '../../src/platform/storage/local-store.js';
import type { TrackEvent } from '../../src/profiles/tracked-types.js';
import { useTestEnv, type SuiteEnv } from '../helpers/context.js';
import { waitFor } from '../helpers/cli.js';
import { callApi, statusAndBody } from '../helpers/http.js';
import { keyedId, logRows, withoutIds } from '../helpers/event-log.js';
import { maintainEventLogDays } from '../../src/profiles/event-log.js';

/**
 * The event log (migration 0320, src/profiles/event-log.ts) as ingestion writes it: every custom event and purchase a
 * worker applies to a profile is one row, written in the transaction that applies it, with an id that is the same
 * whatever retries the apply; what is not applied (unmatched, dead-lettered) is not in it; a deletion takes a person's
 * rows away and leaves a users.Deleted row; a merged user's rows are the kept profile's (migration 0460: they keep their
 * profile id, and an erasure of the kept one takes them). Custom events and purchases are found for an erasure by the
 * hours their profile's `event_log_hours` stamps, not by an index of the log.
 */

async function staged(env: SuiteEnv) {
  return (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_staging')).rows[0]!.n;
}

async function serviceIdOf(env: SuiteEnv, workspaceId: string, externalId: string) {
  const { rows } = await env.ctx.pool.query<{ service_id: string; id: string }>(
    'SELECT service_id, id FROM profiles WHERE workspace_id = $1 AND external_id = $2',
    [workspaceId, externalId],
  );
  return rows[0];
}

describe('events and purchases applied by a worker', () => {
  const env = useTestEnv({ workspaces: ['ws', 'other'] });
  const post = (url: string, body: unknown, key = env.ws.apiKey) =>
    callApi(env.app, 'POST', url, { key, body }).then(statusAndBody);
  /** Accepted, then applied by the worker (the staging log empties). */
  async function accept(url: string, body: unknown, key = env.ws.apiKey) {
    const r = await post(url, body, key);
    expect(r.status, JSON.stringify(r.body)).toBeLessThan(300);
    await waitFor(async () => (await staged(env)) === 0, 30_000, 20);
    return r.body;
  }
  const rows = (where?: string, params?: unknown[]) => logRows(env, env.ws.workspaceId, where, params);

  beforeAll(async () => {
    env.startWorkers([trackIngestJob]);
    await accept('/users/track', { attributes: [{ external_id: 'known', first_name: 'Kay' }] });
  });

  it('logs exactly the events and purchases of a /users/track body, with their fields', async () => {
    const before = (await rows()).length;
    const body = await accept('/users/track', {
      events: [
        {
          external_id: 'known',
          name: 'played',
          time: '2024-03-01T10:00:00+01:00',
          app_id: 'app-ios',
          properties: { level: 3, tags: ['a', 'b'], meta: { x: 1 }, at: '2024-01-01T00:00:00Z', ok: true },
        },
        { external_id: 'fresh', name: 'opened', time: '2024-03-02T00:00:00Z' },
        { external_id: 'ghost', name: 'opened', time: '2024-03-02T00:00:00Z', _update_existing_only: true },
      ],
      purchases: [
        {
          external_id: 'known',
          product_id: 'sku-1',
          currency: 'eur',
          price: 9.5,
          quantity: 2,
          time: '2024-03-03T12:00:00Z',
          app_id: 'app-web',
          properties: { color: 'red' },
        },
        {
          external_id: 'ghost',
          product_id: 'sku-1',
          currency: 'EUR',
          price: 1,
          time: '2024-03-03T12:00:00Z',
          _update_existing_only: true,
        },
      ],
    });
    expect(body).toMatchObject({ events_processed: 3, purchases_processed: 2 });
    const known = (await serviceIdOf(env, env.ws.workspaceId, 'known'))!;
    const fresh = (await serviceIdOf(env, env.ws.workspaceId, 'fresh'))!;
    expect(await serviceIdOf(env, env.ws.workspaceId, 'ghost')).toBeUndefined();
    expect(await rows()).toHaveLength(before + 3);
    const logged = await rows(`external_user_id IN ('known', 'fresh', 'ghost')`);
    expect(withoutIds(logged)).toEqual([
      {
        type: 'users.behaviors.CustomEvent',
        time: '2024-03-01T09:00:00.000Z',
        name: 'played',
        properties: { level: 3, tags: ['a', 'b'], meta: '{"x":1}', at: '2024-01-01T00:00:00Z', ok: true },
        app_id: 'app-ios',
        user_id: known.service_id,
        external_user_id: 'known',
        data: {},
      },
      {
        type: 'users.behaviors.CustomEvent',
        time: '2024-03-02T00:00:00.000Z',
        name: 'opened',
        properties: null,
        app_id: null,
        user_id: fresh.service_id,
        external_user_id: 'fresh',
        data: {},
      },
      {
        type: 'users.behaviors.Purchase',
        time: '2024-03-03T12:00:00.000Z',
        name: 'sku-1',
        properties: { color: 'red' },
        app_id: 'app-web',
        user_id: known.service_id,
        external_user_id: 'known',
        data: { price: 9.5, currency: 'EUR', quantity: 2 },
      },
    ]);
    for (const r of logged) expect(r.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
    expect(new Set(logged.map((r) => r.id)).size).toBe(logged.length);
    // Nothing of another workspace.
    expect(await logRows(env, env.other.workspaceId)).toEqual([]);
  });

  it('logs an import file’s events with ids from their lines, and not its unmatched or refused lines', async () => {
    env.startWorkers([bulkImportJob]);
    const store = LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, env.ws);
    const lines = [
      { external_id: 'imp-1', name: 'visit', time: '2024-05-01T00:00:00Z', properties: { page: '/a' } },
      { external_id: 'imp-1', name: 'visit', time: 'not a time' },
      { external_id: 'nobody', name: 'visit', time: '2024-05-01T00:00:00Z', _update_existing_only: true },
      { external_id: 'imp-2', name: 'visit', time: '2024-05-02T00:00:00Z', app_id: 'app-ios' },
    ];
    await store.put('imports/ev.ndjson', Buffer.from(lines.map((l) => JSON.stringify(l)).join('\n') + '\n'));
    const started = await post('/users/import', { key: 'imports/ev.ndjson' });
    expect(started.status).toBe(201);
    const importId = String(started.body.import_id);
    await waitFor(async () => {
      const s = await callApi(env.app, 'GET', `/users/import/${importId}`, { key: env.ws.apiKey });
      return s.body.status === 'completed';
    });
    const logged = await rows(`name = 'visit'`);
    const imp1 = (await serviceIdOf(env, env.ws.workspaceId, 'imp-1'))!;
    const imp2 = (await serviceIdOf(env, env.ws.workspaceId, 'imp-2'))!;
    expect(logged).toEqual([
      {
        id: keyedId(env.ws.workspaceId, `import:${importId}:1`),
        type: 'users.behaviors.CustomEvent',
        time: '2024-05-01T00:00:00.000Z',
        name: 'visit',
        properties: { page: '/a' },
        app_id: null,
        user_id: imp1.service_id,
        external_user_id: 'imp-1',
        data: {},
      },
      {
        id: keyedId(env.ws.workspaceId, `import:${importId}:4`),
        type: 'users.behaviors.CustomEvent',
        time: '2024-05-02T00:00:00.000Z',
        name: 'visit',
        properties: null,
        app_id: 'app-ios',
        user_id: imp2.service_id,
        external_user_id: 'imp-2',
        data: {},
      },
    ]);
  });

  it('does not log an object set aside as a dead letter, nor count it on the profile', async () => {
    const event = (externalId: string, name = 'dl'): TrackEvent => ({
      identity: { type: 'external_id', value: externalId },
      create: true,
      name,
      time: '2024-06-01T00:00:00.000Z',
    });
    // A NUL in an event's name, which the API refuses, staged here as by an older version: the log's text (and the
    // profile's jsonb) refuse it.
    const ids = [
      ...(await stageObjects(env.ctx.pool, env.ws.workspaceId, {
        events: [event('dl-1')],
        purchases: [],
        attributes: [],
      })),
      ...(await stageObjects(env.ctx.pool, env.ws.workspaceId, {
        events: [event('dl-2', 'd\u0000l')],
        purchases: [],
        attributes: [],
      })),
      ...(await stageObjects(env.ctx.pool, env.ws.workspaceId, {
        events: [event('dl-3')],
        purchases: [],
        attributes: [],
      })),
    ];
    // Queued by a request accepted after them, as a worker would pick them up.
    await accept('/users/track', { events: [{ external_id: 'dl-1', name: 'dl-after', time: '2024-06-02T00:00:00Z' }] });
    const letters = await env.ctx.pool.query(`SELECT staged_id FROM ingest_dead_letters WHERE staged_id = ANY($1)`, [
      ids,
    ]);
    expect(letters.rows.map((r) => Number(r.staged_id))).toEqual([ids[1]]);
    const logged = await rows(`name = 'dl'`);
    expect(logged.map((r) => r.external_user_id).sort()).toEqual(['dl-1', 'dl-3']);
    expect(logged.map((r) => r.id).sort()).toEqual(
      [keyedId(env.ws.workspaceId, `track:${ids[0]}:e0`), keyedId(env.ws.workspaceId, `track:${ids[2]}:e0`)].sort(),
    );
    const dl2 = await env.ctx.pool.query(`SELECT custom_events FROM profiles WHERE external_id = 'dl-2'`);
    expect(dl2.rows[0]?.custom_events ?? {}).not.toHaveProperty('dl');
  });

  it('a deletion removes the person’s rows and leaves one users.Deleted row with their ids', async () => {
    await accept('/users/track', {
      events: [
        { external_id: 'del-1', name: 'e', time: '2024-07-01T00:00:00Z' },
        { external_id: 'del-1', name: 'e', time: '2024-07-02T00:00:00Z' },
        { external_id: 'stay-1', name: 'e', time: '2024-07-01T00:00:00Z' },
      ],
      purchases: [{ external_id: 'del-1', product_id: 'p', currency: 'EUR', price: 1, time: '2024-07-03T00:00:00Z' }],
    });
    const del = (await serviceIdOf(env, env.ws.workspaceId, 'del-1'))!;
    expect(await rows(`user_id = $2`, [del.service_id])).toHaveLength(3);
    const before = Date.now();
    await accept('/users/delete', { external_ids: ['del-1'] });
    const left = await rows(`user_id = $2 OR external_user_id = 'del-1'`, [del.service_id]);
    expect(withoutIds(left)).toEqual([
      {
        type: 'users.Deleted',
        time: expect.any(String),
        name: null,
        properties: null,
        app_id: null,
        user_id: del.service_id,
        external_user_id: 'del-1',
        data: {},
      },
    ]);
    expect(Date.parse(left[0]!.time)).toBeGreaterThanOrEqual(before - 1000);
    expect(await rows(`external_user_id = 'stay-1'`)).toHaveLength(1);
  });

  it('a merge makes the merged user’s rows the kept profile’s and logs users.Merged; erasing the kept one takes all', async () => {
    await accept('/users/track', {
      events: [
        { external_id: 'm-keep', name: 'k', time: '2024-08-01T00:00:00Z' },
        { external_id: 'm-gone', name: 'g', time: '2024-08-02T00:00:00Z' },
        { external_id: 'm-gone', name: 'g', time: '2024-08-03T00:00:00Z' },
      ],
    });
    const keep = (await serviceIdOf(env, env.ws.workspaceId, 'm-keep'))!;
    const gone = (await serviceIdOf(env, env.ws.workspaceId, 'm-gone'))!;
    await accept('/users/merge', {
      merge_updates: [
        { identifier_to_merge: { external_id: 'm-gone' }, identifier_to_keep: { external_id: 'm-keep' } },
      ],
    });
    // The rows keep the profile they were logged for; the merge records whose they are now, and where.
    const owners = await env.ctx.pool.query<{ name: string; profile_id: string }>(
      `SELECT name, profile_id FROM event_log WHERE workspace_id = $1 AND name IN ('k', 'g') ORDER BY time`,
      [env.ws.workspaceId],
    );
    expect(owners.rows).toEqual([
      { name: 'k', profile_id: keep.id },
      { name: 'g', profile_id: gone.id },
      { name: 'g', profile_id: gone.id },
    ]);
    const merged = await env.ctx.pool.query(
      `SELECT profile_id FROM event_log_merged_profiles WHERE merged_profile_id = $1`,
      [gone.id],
    );
    expect(merged.rows).toEqual([{ profile_id: keep.id }]);
    const hours = await env.ctx.pool.query(`SELECT event_log_hours FROM profiles WHERE id = $1`, [keep.id]);
    expect(hours.rows[0].event_log_hours).toEqual([Math.floor(Date.now() / 3_600_000)]);
    expect(withoutIds(await rows(`type = 'users.Merged'`))).toEqual([
      {
        type: 'users.Merged',
        time: expect.any(String),
        name: null,
        properties: null,
        app_id: null,
        user_id: keep.service_id,
        external_user_id: 'm-keep',
        data: { merged_user_id: gone.service_id, merged_external_user_id: 'm-gone' },
      },
    ]);
    await accept('/users/delete', { external_ids: ['m-keep'] });
    expect(await rows(`name IN ('k', 'g') OR type = 'users.Merged'`)).toEqual([]);
    expect(withoutIds(await rows(`type = 'users.Deleted' AND external_user_id = 'm-keep'`))).toEqual([
      expect.objectContaining({ user_id: keep.service_id, external_user_id: 'm-keep', data: {} }),
    ]);
  });
});

describe('the hours a profile’s events are logged in', () => {
  const env = useTestEnv({ workspaces: ['ws'] });
  const track = async (externalId: string) => {
    const r = await callApi(env.app, 'POST', '/users/track', {
      key: env.ws.apiKey,
      body: { events: [{ external_id: externalId, name: 'stamped', time: '2024-09-01T00:00:00Z' }] },
    }).then(statusAndBody);
    expect(r.status).toBe(201);
    await waitFor(async () => (await staged(env)) === 0, 30_000, 20);
  };
  const stampsOf = async (externalId: string) =>
    (await env.ctx.pool.query(`SELECT event_log_hours FROM profiles WHERE external_id = $1`, [externalId])).rows[0]
      ?.event_log_hours as number[] | null;

  beforeAll(() => env.startWorkers([trackIngestJob]));

  it('are stamped by the apply, the hours the log no longer holds dropped, and read by an erasure', async () => {
    const hour = () => Math.floor(Date.now() / 3_600_000);
    const before = hour();
    await track('st-1');
    await track('st-2');
    expect([before, hour()]).toContain((await stampsOf('st-1'))![0]);
    const start = Number(
      (await env.ctx.pool.query(`SELECT extract(epoch FROM event_log_start()) / 3600 AS h`)).rows[0].h,
    );
    // An hour before the log's first day (dropped at the next stamp) and the previous hour (kept).
    const now = hour();
    await env.ctx.pool.query(`UPDATE profiles SET event_log_hours = $1 WHERE external_id = 'st-1'`, [
      [start - 5, now - 1],
    ]);
    // st-1's first event as if logged an hour earlier (yesterday's partition when this runs just after midnight).
    await env.ctx.pool.query(
      `UPDATE event_log SET accepted_at = accepted_at - interval '1 hour' WHERE workspace_id = $1 AND external_user_id = 'st-1'`,
      [env.ws.workspaceId],
    );
    await track('st-1');
    expect(await stampsOf('st-1')).toEqual([now - 1, hour()]);
    await track('st-1');
    expect(await stampsOf('st-1')).toEqual([now - 1, hour()]);
    const logged = (who: string) =>
      logRows(env, env.ws.workspaceId, `external_user_id = $2 AND name = 'stamped'`, [who]).then((r) => r.length);
    expect(await logged('st-1')).toBe(3);
    const r = await callApi(env.app, 'POST', '/users/delete', {
      key: env.ws.apiKey,
      body: { external_ids: ['st-1'] },
    }).then(statusAndBody);
    expect(r.status).toBe(202);
    await waitFor(async () => (await staged(env)) === 0, 30_000, 20);
    await waitFor(async () => (await logged('st-1')) === 0, 30_000, 50);
    expect(await logged('st-2')).toBe(1);
  });
});

describe('the log’s days', () => {
  const env = useTestEnv({ workspaces: ['ws'] });

  it('are made ahead and dropped after their retention, with the records of merges older than the log', async () => {
    const pool = env.ctx.pool;
    const partitions = async () =>
      (
        await pool.query<{ name: string }>(
          `SELECT c.relname AS name FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
            WHERE i.inhparent = 'event_log'::regclass ORDER BY 1`,
        )
      ).rows.map((r) => r.name);
    const now = new Date('2031-03-20T12:00:00Z');
    const day = (offset: number) =>
      `event_log_${new Date(now.getTime() + offset * 86_400_000).toISOString().slice(0, 10).replaceAll('-', '')}`;
    await pool.query(`SELECT event_log_make_partitions($1::date, 2)`, ['2031-03-10']);
    const { rows } = await pool.query<{ id: string }>(
      `INSERT INTO profiles (workspace_id, service_id, random_bucket) VALUES ($1, 'merge-keeper', 1) RETURNING id`,
      [env.ws.workspaceId],
    );
    await pool.query(
      `INSERT INTO event_log_merged_profiles (merged_profile_id, profile_id, merged_at)
       VALUES (-1, $1, '2031-03-10T12:00:00Z'), (-2, $1, '2031-03-11T12:00:00Z')`,
      [rows[0]!.id],
    );
    const result = await maintainEventLogDays(pool, 9, now);
    const after = await partitions();
    expect(after).not.toContain(day(-10));
    expect(after).toContain(day(-9));
    expect(after).toContain(day(7));
    expect(result.dropped).toBeGreaterThanOrEqual(1);
    const merges = await pool.query(`SELECT merged_profile_id FROM event_log_merged_profiles WHERE profile_id = $1`, [
      rows[0]!.id,
    ]);
    expect(merges.rows).toEqual([{ merged_profile_id: -2 }]);
  });
});

describe('an apply rolled back and applied again', () => {
  const env = useTestEnv({ config: { INGEST_PARTITIONS: '1' }, workspaces: ['ws'] });

  it('logs each object once, with the id its staged row and place give it', async () => {
    // The first transaction that writes the log fails after writing it, as a deadlock victim does: the worker
    // rolls the batch back whole and applies it again.
    await env.ctx.pool.query(`
      CREATE SEQUENCE fail_once;
      CREATE FUNCTION fail_once() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF nextval('fail_once') = 1 THEN RAISE EXCEPTION 'chosen as a victim' USING ERRCODE = 'deadlock_detected'; END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER fail_once AFTER INSERT ON event_log FOR EACH STATEMENT EXECUTE FUNCTION fail_once();`);
    const r = await callApi(env.app, 'POST', '/users/track', {
      key: env.ws.apiKey,
      body: {
        events: Array.from({ length: 10 }, (_, i) => ({
          external_id: `r${i % 3}`,
          name: `n${i}`,
          time: '2024-01-01T00:00:00Z',
        })),
        purchases: [{ external_id: 'r0', product_id: 'p', currency: 'USD', price: 2, time: '2024-01-01T00:00:00Z' }],
      },
    });
    expect(r.status).toBe(201);
    const { rows: stagedRows } = await env.ctx.pool.query<{ id: string }>('SELECT id FROM ingest_staging');
    expect(stagedRows).toHaveLength(1);
    const stagedId = stagedRows[0]!.id;
    env.startWorkers([trackIngestJob]);
    await waitFor(async () => (await staged(env)) === 0, 30_000, 20);
    const attempts = await env.ctx.pool.query<{ n: string }>(`SELECT last_value AS n FROM fail_once`);
    expect(Number(attempts.rows[0]!.n)).toBeGreaterThanOrEqual(2);

    const logged = await logRows(env, env.ws.workspaceId);
    expect(logged).toHaveLength(11);
    expect(new Set(logged.map((l) => l.id)).size).toBe(11);
    const expected = [
      ...Array.from({ length: 10 }, (_, i) => keyedId(env.ws.workspaceId, `track:${stagedId}:e${i}`)),
      keyedId(env.ws.workspaceId, `track:${stagedId}:p0`),
    ];
    expect(logged.map((l) => l.id).sort()).toEqual(expected.sort());
    expect(logged.find((l) => l.name === 'n4')!.id).toBe(keyedId(env.ws.workspaceId, `track:${stagedId}:e4`));
  });
});
