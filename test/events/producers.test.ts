import { beforeAll, describe, expect, it } from 'vitest';
import { canvasScheduleJob } from '../../jobs/canvas-schedule.js';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { enterUsers } from '../../src/profiles/canvas-entries.js';
import { useTestEnv } from '../helpers/context.js';
import { putLocal, syncOnce } from '../helpers/cdi.js';
import { waitFor } from '../helpers/cli.js';
import { keyedId, logRows, withoutIds } from '../helpers/event-log.js';
import { callApi, statusAndBody } from '../helpers/http.js';

/**
 * The event log's producers beyond events and purchases, each logging in the transaction (here: the statement) that
 * applies its change: subscription state changes (users.behaviors.subscription.GlobalStateChange) from
 * /users/track attributes, CDI rows, /email/status and hard bounces; uninstalls (users.behaviors.Uninstall); canvas
 * entries (users.canvas.Entry).
 */

const env = useTestEnv({ config: { CANVAS_SCHEDULE_MAX_LATENESS_SECONDS: '3600' }, workspaces: ['ws'] });
const ws = () => env.ws.workspaceId;
const post = (url: string, body: unknown) =>
  callApi(env.app, 'POST', url, { key: env.ws.apiKey, body }).then(statusAndBody);
const STATE = 'users.behaviors.subscription.GlobalStateChange';
const states = (where = 'true', params: unknown[] = []) =>
  logRows(env, ws(), `type = '${STATE}' AND (${where})`, params);

/** Accepts a /users/track body and applies it as a worker does; returns the staged rows' ids, oldest first. */
async function track(body: unknown): Promise<number[]> {
  const r = await post('/users/track', body);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  const { rows } = await env.ctx.pool.query<{ id: string }>(
    'SELECT id FROM ingest_staging WHERE workspace_id = $1 ORDER BY id',
    [ws()],
  );
  await drainThrough(env.ctx.pool, undefined, {
    maxRows: 100,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });
  return rows.map((r) => Number(r.id));
}

async function profile(externalId: string) {
  const { rows } = await env.ctx.pool.query<{
    id: string;
    service_id: string;
    email_subscribe: string | null;
    attribute_times: Record<string, string>;
  }>(
    'SELECT id, service_id, email_subscribe, attribute_times FROM profiles WHERE workspace_id = $1 AND external_id = $2',
    [ws(), externalId],
  );
  return rows[0]!;
}

const stateRow = (
  externalId: string,
  serviceId: string,
  time: string,
  data: { subscription_status: string; email_address: string | null; state_change_source: string },
) => ({
  type: STATE,
  time,
  name: null,
  properties: null,
  app_id: null,
  user_id: serviceId,
  external_user_id: externalId,
  data: { channel: 'email', ...data },
});

describe('GlobalStateChange from /users/track attributes', () => {
  it('logs a state an attributes object changes, keyed by its staged row and place, and nothing when unchanged', async () => {
    const [staged] = await track({
      attributes: [{ external_id: 'a1', email: 'A1@example.com', email_subscribe: 'opted_in' }],
    });
    const a1 = await profile('a1');
    expect(a1.email_subscribe).toBe('opted_in');
    const logged = await states(`external_user_id = 'a1'`);
    expect(withoutIds(logged)).toEqual([
      stateRow('a1', a1.service_id, a1.attribute_times.email_subscribe!, {
        subscription_status: 'opted_in',
        email_address: 'A1@example.com',
        state_change_source: 'api',
      }),
    ]);
    expect(logged[0]!.id).toBe(keyedId(ws(), `track:${staged}:a0:email_subscribe`));

    // The same state again, a batch without email_subscribe, and a state cleared (no state to report): nothing logged.
    await track({ attributes: [{ external_id: 'a1', email_subscribe: 'opted_in', first_name: 'Al' }] });
    await track({
      attributes: [{ external_id: 'a1', last_name: 'One' }],
      events: [{ external_id: 'a1', name: 'x', time: '2024-01-01' }],
    });
    await track({ attributes: [{ external_id: 'a1', email_subscribe: null }] });
    expect((await profile('a1')).email_subscribe).toBeNull();
    expect(await states(`external_user_id = 'a1'`)).toHaveLength(1);
  });

  it('logs the net change of a batch: the winning object’s state, once', async () => {
    await track({ attributes: [{ external_id: 'a2', email: 'a2@example.com', email_subscribe: 'subscribed' }] });
    const [staged] = await track({
      attributes: [
        { external_id: 'a2', email_subscribe: 'unsubscribed' },
        { external_id: 'a2', email_subscribe: 'opted_in' },
      ],
    });
    const a2 = await profile('a2');
    expect(a2.email_subscribe).toBe('opted_in');
    const logged = await states(`external_user_id = 'a2'`);
    expect(logged.map((r) => (r.data as { subscription_status: string }).subscription_status)).toEqual([
      'subscribed',
      'opted_in',
    ]);
    expect(logged[1]!.id).toBe(keyedId(ws(), `track:${staged}:a1:email_subscribe`));
    // Back to where it was within one batch: no net change, nothing logged.
    await track({
      attributes: [
        { external_id: 'a2', email_subscribe: 'unsubscribed' },
        { external_id: 'a2', email_subscribe: 'opted_in' },
      ],
    });
    expect(await states(`external_user_id = 'a2'`)).toHaveLength(2);
  });

  it('logs the state stored for an address when an attributes object ties the address to a user', async () => {
    expect(
      (await post('/email/status', { email: 'pending@example.com', subscription_state: 'unsubscribed' })).status,
    ).toBe(201);
    expect(await states(`data->>'email_address' ILIKE 'pending@example.com'`)).toEqual([]);
    const [staged] = await track({ attributes: [{ external_id: 't1', email: 'Pending@Example.com' }] });
    const t1 = await profile('t1');
    expect(t1.email_subscribe).toBe('unsubscribed');
    const logged = await states(`external_user_id = 't1'`);
    expect(withoutIds(logged)).toEqual([
      stateRow('t1', t1.service_id, t1.attribute_times.email!, {
        subscription_status: 'unsubscribed',
        email_address: 'Pending@Example.com',
        state_change_source: 'api',
      }),
    ]);
    expect(logged[0]!.id).toBe(keyedId(ws(), `track:${staged}:a0:email_subscribe`));
    // Tied again to a user already in that state: no change.
    await track({ attributes: [{ external_id: 't1', email: 'other@example.com' }] });
    await track({ attributes: [{ external_id: 't1', email: 'pending@example.com' }] });
    expect(await states(`external_user_id = 't1'`)).toHaveLength(1);
  });

  it('compares with the state the write replaces, not the one its statement first saw', async () => {
    await track({ attributes: [{ external_id: 'c1', email: 'c1@example.com', email_subscribe: 'subscribed' }] });
    expect(await states(`external_user_id = 'c1'`)).toHaveLength(1);
    // Another writer unsubscribes the user (without a newer time, so the batch's value still wins) and holds the row
    // while the batch's UPDATE starts: that statement's snapshot still says `subscribed`.
    const other = await env.ctx.pool.connect();
    try {
      await other.query('BEGIN');
      await other.query(
        `UPDATE profiles SET email_subscribe = 'unsubscribed' WHERE workspace_id = $1 AND external_id = 'c1'`,
        [ws()],
      );
      const applying = track({ attributes: [{ external_id: 'c1', email_subscribe: 'unsubscribed' }] });
      await waitFor(
        async () => {
          const { rows } = await env.ctx.pool.query(
            `SELECT 1 FROM pg_stat_activity
            WHERE datname = current_database() AND wait_event_type = 'Lock'
              AND query LIKE '%UPDATE profiles p SET%email_subscribe = CASE%'`,
          );
          return rows.length > 0;
        },
        10_000,
        10,
      );
      await other.query('COMMIT');
      await applying;
    } finally {
      other.release();
    }
    expect((await profile('c1')).email_subscribe).toBe('unsubscribed');
    expect(await states(`external_user_id = 'c1'`)).toHaveLength(1);
  });
});

describe('GlobalStateChange from CDI, /email/status and hard bounces', () => {
  beforeAll(() => {
    env.startWorkers([cdiSyncJob]);
  });

  it('logs a CDI row’s state change with its run and line as key', async () => {
    const integration = '3f0a0c56-3c1e-4a5e-9d7e-1b2c3d4e5f60';
    await env.ctx.pool.query(
      `INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'states', $3)`,
      [integration, ws(), JSON.stringify({ type: 'bucket', prefix: 'cdi/states/', format: 'ndjson' })],
    );
    await putLocal(
      env,
      env.ws,
      'cdi/states/1.ndjson',
      [
        { external_id: 'cdi-1', payload: JSON.stringify({ email: 'cdi1@example.com', email_subscribe: 'subscribed' }) },
        { external_id: 'cdi-2', payload: JSON.stringify({ first_name: 'No state' }) },
      ]
        .map((l) => JSON.stringify(l))
        .join('\n'),
    );
    const run = await syncOnce(env, env.ws, integration);
    expect(run).toMatchObject({ job_status: 'success', rows_synced: 2 });
    const job = (await env.ctx.pool.query(`SELECT id FROM cdi_sync_jobs WHERE integration_id = $1`, [integration]))
      .rows[0]!.id as string;
    const cdi1 = await profile('cdi-1');
    const logged = await states(`external_user_id IN ('cdi-1', 'cdi-2')`);
    expect(withoutIds(logged)).toEqual([
      stateRow('cdi-1', cdi1.service_id, cdi1.attribute_times.email_subscribe!, {
        subscription_status: 'subscribed',
        email_address: 'cdi1@example.com',
        state_change_source: 'cdi',
      }),
    ]);
    expect(logged[0]!.id).toBe(keyedId(ws(), `cdi:${job}:cdi/states/1.ndjson:1:email_subscribe`));
  });

  it('logs what /email/status changes: each profile with the address whose state moves, and nothing on a repeat', async () => {
    await track({
      attributes: [
        { external_id: 'e1', email: 'Shared@example.com' },
        { external_id: 'e2', email: 'shared@example.com', email_subscribe: 'unsubscribed' },
      ],
    });
    const already = (await states(`external_user_id IN ('e1', 'e2')`)).length;
    const at = Date.now();
    expect(
      (
        await post('/email/status', {
          email: ['shared@EXAMPLE.com', 'nobody@example.com'],
          subscription_state: 'unsubscribed',
        })
      ).status,
    ).toBe(201);
    const e1 = await profile('e1');
    const logged = await states(`external_user_id IN ('e1', 'e2')`);
    expect(logged).toHaveLength(already + 1);
    expect(withoutIds(logged.filter((r) => r.external_user_id === 'e1'))).toEqual([
      stateRow('e1', e1.service_id, e1.attribute_times.email_subscribe!, {
        subscription_status: 'unsubscribed',
        email_address: 'Shared@example.com',
        state_change_source: 'email_status',
      }),
    ]);
    expect(Date.parse(e1.attribute_times.email_subscribe!)).toBeGreaterThanOrEqual(at - 1000);
    await post('/email/status', { email: 'shared@example.com', subscription_state: 'unsubscribed' });
    expect(await states(`external_user_id IN ('e1', 'e2')`)).toHaveLength(already + 1);
    await post('/email/status', { email: 'shared@example.com', subscription_state: 'subscribed' });
    const after = await states(`external_user_id IN ('e1', 'e2') AND data->>'state_change_source' = 'email_status'`);
    expect(
      after
        .map((r) => `${r.external_user_id} ${(r.data as { subscription_status: string }).subscription_status}`)
        .sort(),
    ).toEqual(['e1 subscribed', 'e1 unsubscribed', 'e2 subscribed']);
  });

  it('logs the unsubscribe of a hard bounce at the bounce time, not over a later change nor twice', async () => {
    await track({
      attributes: [
        { external_id: 'b1', email: 'b1@example.com', email_subscribe: 'opted_in' },
        { external_id: 'b2', email: 'b2@example.com', email_subscribe: 'unsubscribed' },
      ],
    });
    const already = (await states(`external_user_id IN ('b1', 'b2')`)).length;
    const bounce = {
      records: [
        { email: 'B1@example.com', time: '2999-01-01T00:00:00Z' },
        { email: 'b2@example.com', time: '2999-01-01T00:00:00Z' },
      ],
    };
    expect((await post('/internal/records/hard_bounces', bounce)).status).toBe(201);
    const b1 = await profile('b1');
    expect(b1.email_subscribe).toBe('unsubscribed');
    const logged = await states(`external_user_id IN ('b1', 'b2') AND data->>'state_change_source' = 'bounce'`);
    expect(withoutIds(logged)).toEqual([
      stateRow('b1', b1.service_id, '2999-01-01T00:00:00.000Z', {
        subscription_status: 'unsubscribed',
        email_address: 'b1@example.com',
        state_change_source: 'bounce',
      }),
    ]);
    expect((await post('/internal/records/hard_bounces', bounce)).status).toBe(201);
    expect(await states(`external_user_id IN ('b1', 'b2')`)).toHaveLength(already + 1);
  });
});

describe('Uninstall', () => {
  it('logs each recorded uninstall that names a user, keyed by its record; not anonymous ones nor repeats', async () => {
    await env.ctx.pool.query(`INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'app-ios', 'iOS')`, [ws()]);
    await track({ attributes: [{ external_id: 'un1', first_name: 'Una' }] });
    const records = [
      { app_id: 'app-ios', external_id: 'un1', time: '2024-03-01T10:00:00Z' },
      { app_id: 'app-ios', time: '2024-03-01T10:00:00Z' },
      { app_id: 'app-ios', external_id: 'un1', time: '2024-02-01T10:00:00Z' },
    ];
    expect((await post('/internal/records/uninstalls', { records })).body).toMatchObject({ recorded: 3 });
    const un1 = await profile('un1');
    const logged = await logRows(env, ws(), `type = 'users.behaviors.Uninstall'`);
    const row = (time: string) => ({
      type: 'users.behaviors.Uninstall',
      time,
      name: null,
      properties: null,
      app_id: 'app-ios',
      user_id: un1.service_id,
      external_user_id: 'un1',
      data: {},
    });
    expect(withoutIds(logged)).toEqual([row('2024-02-01T10:00:00.000Z'), row('2024-03-01T10:00:00.000Z')]);
    const { rows: events } = await env.ctx.pool.query<{ id: string; occurred_at: Date }>(
      `SELECT id, occurred_at FROM uninstall_events WHERE profile_id = $1 ORDER BY occurred_at`,
      [un1.id],
    );
    expect(logged.map((r) => r.id)).toEqual(events.map((e) => keyedId(ws(), `uninstall:${e.id}`)));
    expect((await post('/internal/records/uninstalls', { records: [records[0]] })).body).toMatchObject({ recorded: 0 });
    expect(await logRows(env, ws(), `type = 'users.behaviors.Uninstall'`)).toHaveLength(2);
  });
});

describe('Canvas Entry', () => {
  it('logs each user a canvas firing enters, keyed by the dispatch and the user; a retried batch logs none twice', async () => {
    env.startWorkers([canvasScheduleJob]);
    await track({ attributes: [{ external_id: 'cv1' }, { external_id: 'cv2' }] });
    await env.ctx.pool.query(
      `INSERT INTO canvases (workspace_id, api_id, name, status, archived, api_triggered) VALUES ($1, 'welcome', 'Welcome', 'active', false, true)`,
      [ws()],
    );
    const time = new Date(Date.now() + 800).toISOString();
    const created = await post('/canvas/trigger/schedule/create', {
      canvas_id: 'welcome',
      recipients: [{ external_user_id: 'cv1' }, { external_user_id: 'cv2' }, { external_user_id: 'ghost' }],
      schedule: { time },
    });
    expect(created.status).toBe(201);
    let dispatch: { id: string; status: string } | undefined;
    await waitFor(async () => {
      dispatch = (
        await env.ctx.pool.query(
          `SELECT d.id, d.status FROM canvas_dispatches d JOIN canvas_schedules s ON s.id = d.schedule_row_id WHERE s.schedule_id = $1`,
          [created.body.schedule_id],
        )
      ).rows[0];
      return dispatch?.status === 'done';
    }, 20_000);
    const cv1 = await profile('cv1');
    const cv2 = await profile('cv2');
    const row = (externalId: string, serviceId: string) => ({
      type: 'users.canvas.Entry',
      time,
      name: null,
      properties: null,
      app_id: null,
      user_id: serviceId,
      external_user_id: externalId,
      data: { canvas_id: 'welcome', canvas_name: 'Welcome', canvas_variation_id: null, in_control_group: false },
    });
    const logged = await logRows(env, ws(), `type = 'users.canvas.Entry'`);
    expect(withoutIds(logged).sort((a, b) => (a.external_user_id! < b.external_user_id! ? -1 : 1))).toEqual([
      row('cv1', cv1.service_id),
      row('cv2', cv2.service_id),
    ]);
    expect(logged.map((r) => r.id).sort()).toEqual(
      [keyedId(ws(), `canvas:${dispatch!.id}:${cv1.id}`), keyedId(ws(), `canvas:${dispatch!.id}:${cv2.id}`)].sort(),
    );

    // The same firing's batch run again (as after a crash): the users it entered are skipped, nothing logged twice.
    const entered = await enterUsers(
      env.ctx.pool,
      {
        canvasApiId: 'welcome',
        canvasName: 'Welcome',
        dispatchRowId: Number(dispatch!.id),
        knownZones: [],
        zones: null,
        covered: [],
      },
      { sql: `p.workspace_id = $1 AND p.external_id = ANY($2::text[])`, params: [ws(), ['cv1', 'cv2']] },
      new Date(time),
      10,
    );
    expect(entered).toBe(0);
    expect(await logRows(env, ws(), `type = 'users.canvas.Entry'`)).toHaveLength(2);
  });
});
