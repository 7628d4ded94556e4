import { beforeAll, describe, expect, it } from 'vitest';
import { canvasScheduleJob } from '../../jobs/canvas-schedule.js';
import { CANVAS_SCHEDULE_QUEUE, fireJobId } from '../../src/platform/queues/canvas-schedule.js';
import { rearmSchedules } from '../../src/features/canvases/schedules.js';
import { useTestEnv } from '../helpers/context.js';
import { createKey } from '../helpers/seed.js';
import { callApi, statusAndBody } from '../helpers/http.js';

const env = useTestEnv({
  config: { CANVAS_SCHEDULE_MAX_LATENESS_SECONDS: '3600', CANVAS_SCHEDULE_SWEEP_SECONDS: '1' },
  workspaces: ['ws', 'other'],
});
const canvasIds: Record<string, string> = {};

type Json = Record<string, unknown>;
interface ProfileSeed {
  external_id: string;
  time_zone?: string | null;
  canvases_received?: Json[];
  custom_attributes?: Json;
}

async function seedProfiles(workspaceId: string, profiles: ProfileSeed[]): Promise<void> {
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, time_zone, canvases_received, custom_attributes)
     SELECT $1, 'svc-' || r.external_id, r.external_id, 1, r.time_zone, COALESCE(r.canvases_received, '[]'), COALESCE(r.custom_attributes, '{}')
       FROM jsonb_to_recordset($2::jsonb) AS r(external_id text, time_zone text, canvases_received jsonb, custom_attributes jsonb)`,
    [workspaceId, JSON.stringify(profiles)],
  );
}

async function seedCanvas(
  workspaceId: string,
  apiId: string,
  extra: { status?: string; archived?: boolean; api_triggered?: boolean } = {},
) {
  const { rows } = await env.ctx.pool.query<{ id: string }>(
    `INSERT INTO canvases (workspace_id, api_id, name, status, archived, api_triggered) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id`,
    [
      workspaceId,
      apiId,
      `Canvas ${apiId}`,
      extra.status ?? 'active',
      extra.archived ?? false,
      extra.api_triggered ?? true,
    ],
  );
  canvasIds[apiId] = rows[0]!.id;
  return rows[0]!.id;
}

beforeAll(async () => {
  await seedProfiles(env.ws.workspaceId, [
    {
      external_id: 'u1',
      time_zone: 'Asia/Tokyo',
      canvases_received: [{ name: 'Old', api_canvas_id: 'other-canvas', last_entered: '2026-01-01T00:00:00.000Z' }],
    },
    { external_id: 'u2', time_zone: 'Europe/Paris', custom_attributes: { vip: true } },
    { external_id: 'u3', time_zone: 'America/New_York', custom_attributes: { vip: true } },
    { external_id: 'u4', time_zone: null },
    { external_id: 'u5', time_zone: 'Mars/Olympus_Mons' },
    { external_id: 'u6', time_zone: 'Asia/Tokyo' },
  ]);
  await seedProfiles(env.other.workspaceId, [{ external_id: 'u1', time_zone: 'UTC' }]);
  const alias = await env.ctx.pool.query<{ id: number }>(
    `SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = 'u6'`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id) VALUES ($1, 'crm', 'c-6', $2)`,
    [env.ws.workspaceId, alias.rows[0]!.id],
  );
  await env.ctx.pool.query(
    `INSERT INTO segments (workspace_id, api_id, name, filter) VALUES ($1, 'vips', 'VIPs', '{"custom_attribute": "vip", "op": "eq", "value": true}')`,
    [env.ws.workspaceId],
  );
  await seedCanvas(env.ws.workspaceId, 'welcome');
  await seedCanvas(env.ws.workspaceId, 'stopped', { status: 'stopped' });
  await seedCanvas(env.ws.workspaceId, 'dashboard-only', { api_triggered: false });
  await seedCanvas(env.other.workspaceId, 'foreign');

  // Written straight to the store, as the workspace file's apply does: armed by the worker when it starts.
  const fileCanvas = await seedCanvas(env.ws.workspaceId, 'from-file');
  await env.ctx.pool.query(
    `INSERT INTO canvas_schedules (canvas_id, schedule_id, dispatch_id, schedule, recipients)
     VALUES ($1, 'file-schedule', 'file-dispatch', $2, '[{"external_user_id": "u2"}]')`,
    [fileCanvas, JSON.stringify({ time: new Date(Date.now() + 1500).toISOString(), in_local_time: false })],
  );
  const missedCanvas = await seedCanvas(env.ws.workspaceId, 'missed');
  await env.ctx.pool.query(
    `INSERT INTO canvas_schedules (canvas_id, schedule_id, dispatch_id, schedule, recipients)
     VALUES ($1, 'missed-schedule', 'missed-dispatch', $2, '[{"external_user_id": "u2"}]')`,
    [missedCanvas, JSON.stringify({ time: new Date(Date.now() - 2 * 3600_000).toISOString() })],
  );
  env.startWorkers([canvasScheduleJob]);
});

const post = (url: string, payload: unknown, key = env.ws.apiKey, raw = false) =>
  callApi(env.app, 'POST', url, { key, ...(raw ? { raw: payload as string } : { body: payload }) }).then(statusAndBody);
const create = (payload: unknown, key?: string) => post('/canvas/trigger/schedule/create', payload, key);
const update = (payload: unknown, key?: string) => post('/canvas/trigger/schedule/update', payload, key);
const remove = (payload: unknown, key?: string) => post('/canvas/trigger/schedule/delete', payload, key);

const scheduleRow = async (scheduleId: string) =>
  (await env.ctx.pool.query(`SELECT * FROM canvas_schedules WHERE schedule_id = $1`, [scheduleId])).rows[0]!;
const dispatches = async (scheduleId: string) =>
  (
    await env.ctx.pool.query(
      `SELECT d.* FROM canvas_dispatches d JOIN canvas_schedules s ON s.id = d.schedule_row_id WHERE s.schedule_id = $1 ORDER BY d.fire_at`,
      [scheduleId],
    )
  ).rows;
async function entries(canvasApiId: string): Promise<Record<string, Json>> {
  const { rows } = await env.ctx.pool.query<{ external_id: string; entry: Json }>(
    `SELECT p.external_id, e AS entry FROM profiles p, jsonb_array_elements(p.canvases_received) e WHERE p.workspace_id = $1 AND e->>'api_canvas_id' = $2`,
    [env.ws.workspaceId, canvasApiId],
  );
  return Object.fromEntries(rows.map((r) => [r.external_id, r.entry]));
}
async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false>,
  what: string,
  timeoutMs = 15_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
const waitState = (scheduleId: string, state: string) =>
  waitFor(
    async () => ((await scheduleRow(scheduleId)).state === state ? scheduleRow(scheduleId) : null),
    `schedule ${state}`,
  );
const queue = () => env.ctx.queues.get(CANVAS_SCHEDULE_QUEUE);
const inMs = (ms: number) => new Date(Date.now() + ms).toISOString();

/** The instant a zone's clocks show `wall` (YYYY-MM-DDTHH:MM:SS), computed with Intl, independently of PostgreSQL. */
function zonedInstant(wall: string, tz: string): number {
  const offset = (at: number) => {
    const parts = Object.fromEntries(
      new Intl.DateTimeFormat('en-US', {
        timeZone: tz,
        hourCycle: 'h23',
        year: 'numeric',
        month: '2-digit',
        day: '2-digit',
        hour: '2-digit',
        minute: '2-digit',
        second: '2-digit',
      })
        .formatToParts(new Date(at))
        .map((p) => [p.type, p.value]),
    );
    return Date.UTC(+parts.year!, +parts.month! - 1, +parts.day!, +parts.hour!, +parts.minute!, +parts.second!) - at;
  };
  const guess = Date.parse(`${wall}Z`);
  const first = guess - offset(guess);
  return guess - offset(first);
}

describe('schedules from the workspace file', () => {
  it('are armed when the worker starts and fire into canvases_received', async () => {
    const row = await waitState('file-schedule', 'sent');
    expect(row.fire_times).toHaveLength(1);
    const got = await entries('from-file');
    expect(Object.keys(got)).toEqual(['u2']);
    const [d] = await dispatches('file-schedule');
    expect(d).toMatchObject({ status: 'done', users_entered: 1, dispatch_id: 'file-dispatch', time_zones: null });
  });

  it('records a firing far later than its time as missed, not sent', async () => {
    const row = await waitState('missed-schedule', 'sent');
    expect(row.state).toBe('sent');
    const [d] = await dispatches('missed-schedule');
    expect(d.status).toBe('skipped');
    expect(d.note).toMatch(/^missed/);
    expect(await entries('missed')).toEqual({});
  });

  it('re-arming is idempotent, and the periodic sweep arms rows written while the worker runs', async () => {
    const canvas = await seedCanvas(env.ws.workspaceId, 'late-file');
    await env.ctx.pool.query(
      `INSERT INTO canvas_schedules (canvas_id, schedule_id, dispatch_id, schedule, audience) VALUES ($1, 'late-file-schedule', 'late-dispatch', $2, '{"segment_id": "vips"}')`,
      [canvas, JSON.stringify({ time: inMs(60_000) })],
    );
    const row = await waitFor(async () => {
      const r = await scheduleRow('late-file-schedule');
      return r.fire_times ? r : null;
    }, 'the sweep to arm the row');
    const id = fireJobId(row.id, 1, row.fire_times[0]);
    expect(await (await queue().getJob(id))?.getState()).toBe('delayed');
    const before = await queue().getDelayedCount();
    await rearmSchedules(env.ctx.pool, env.ctx.queues, env.ctx.log);
    await rearmSchedules(env.ctx.pool, env.ctx.queues, env.ctx.log);
    expect(await queue().getDelayedCount()).toBe(before);
  });
});

describe('POST /canvas/trigger/schedule/create', () => {
  it('answers 201 {dispatch_id, schedule_id, message} and fires at its time into canvases_received', async () => {
    const time = inMs(1500);
    const { status, body } = await create({
      canvas_id: 'welcome',
      recipients: [
        { external_user_id: 'u1', canvas_entry_properties: { coupon: 'A1' } },
        { external_user_id: 'ghost' },
        { user_alias: { alias_name: 'c-6', alias_label: 'crm' } },
      ],
      trigger_properties: { campaign: 'spring' },
      schedule: { time },
    });
    expect(status).toBe(201);
    expect(body).toEqual({ dispatch_id: expect.any(String), schedule_id: expect.any(String), message: 'success' });
    const scheduleId = String(body.schedule_id);
    const armed = await scheduleRow(scheduleId);
    expect(armed.state).toBe('scheduled');
    expect(armed.trigger_properties).toEqual({ campaign: 'spring' });
    expect(await (await queue().getJob(fireJobId(armed.id, 1, new Date(time))))?.getState()).toBe('delayed');
    expect(await entries('welcome')).toEqual({});

    await waitState(scheduleId, 'sent');
    const got = await entries('welcome');
    expect(Object.keys(got).sort()).toEqual(['u1', 'u6']);
    const iso = new Date(time).toISOString();
    expect(got.u1).toEqual({
      name: 'Canvas welcome',
      api_canvas_id: 'welcome',
      last_entered: iso,
      last_received_message: iso,
      in_control: false,
      last_entered_control_at: null,
      steps_received: [],
    });
    // Entries of other canvases stay.
    const u1 = (
      await env.ctx.pool.query(
        `SELECT canvases_received FROM profiles WHERE workspace_id = $1 AND external_id = 'u1'`,
        [env.ws.workspaceId],
      )
    ).rows[0]!;
    expect(u1.canvases_received.map((e: Json) => e.api_canvas_id)).toEqual(['other-canvas', 'welcome']);
    const [d] = await dispatches(scheduleId);
    expect(d).toMatchObject({
      status: 'done',
      users_entered: 2,
      dispatch_id: body.dispatch_id,
      trigger_properties: { campaign: 'spring' },
    });
  });

  it('broadcasts to a segment, and to the whole workspace, updating an earlier entry in place', async () => {
    await env.ctx.pool.query(
      `UPDATE profiles SET canvases_received = canvases_received || '[{"name": "Old name", "api_canvas_id": "welcome", "steps_received": [{"name": "s1", "api_canvas_step_id": "st1", "last_received": "2026-01-02T00:00:00.000Z"}], "variation_name": "B"}]'
        WHERE workspace_id = $1 AND external_id = 'u3'`,
      [env.ws.workspaceId],
    );
    const seg = await create({
      canvas_id: 'welcome',
      audience: { segment_id: 'vips' },
      broadcast: true,
      schedule: { time: inMs(1000) },
    });
    expect(seg.status).toBe(201);
    await waitState(String(seg.body.schedule_id), 'sent');
    const got = await entries('welcome');
    expect(got.u2!.last_entered).toBe(got.u3!.last_entered);
    expect(got.u3).toMatchObject({
      name: 'Canvas welcome',
      variation_name: 'B',
      steps_received: [{ name: 's1', api_canvas_step_id: 'st1', last_received: '2026-01-02T00:00:00.000Z' }],
    });
    expect((await dispatches(String(seg.body.schedule_id)))[0].users_entered).toBe(2);

    const all = await create({ canvas_id: 'welcome', broadcast: true, schedule: { time: inMs(1000) } });
    await waitState(String(all.body.schedule_id), 'sent');
    expect(Object.keys(await entries('welcome')).sort()).toEqual(['u1', 'u2', 'u3', 'u4', 'u5', 'u6']);
    expect((await dispatches(String(all.body.schedule_id)))[0].users_entered).toBe(6);
    const foreign = await env.ctx.pool.query(`SELECT canvases_received FROM profiles WHERE workspace_id = $1`, [
      env.other.workspaceId,
    ]);
    expect(foreign.rows[0]!.canvases_received).toEqual([]);
  });

  it('recipients with an audience enter only those in the segment', async () => {
    const { body } = await create({
      canvas_id: 'welcome',
      recipients: [{ external_user_id: 'u1' }, { external_user_id: 'u2' }],
      audience: { segment_id: 'vips' },
      schedule: { time: inMs(800) },
    });
    await waitState(String(body.schedule_id), 'sent');
    expect((await dispatches(String(body.schedule_id)))[0].users_entered).toBe(1);
  });

  it('in local time arms one job per group of the audience time zones, at that local time', async () => {
    const day = new Date(Date.now() + 30 * 86_400_000).toISOString().slice(0, 10);
    const wall = `${day}T09:00:00`;
    const { status, body } = await create({
      canvas_id: 'welcome',
      broadcast: true,
      schedule: { time: wall, in_local_time: true },
    });
    expect(status).toBe(201);
    const row = await scheduleRow(String(body.schedule_id));
    // Tokyo, Paris, New York, and UTC for the users without a known zone.
    const expected = ['Asia/Tokyo', 'Europe/Paris', 'America/New_York', 'UTC']
      .map((tz) => zonedInstant(wall, tz))
      .sort((a, b) => a - b);
    expect(row.fire_times.map((d: Date) => d.getTime()).sort((a: number, b: number) => a - b)).toEqual(expected);
    for (const t of expected)
      expect(await (await queue().getJob(fireJobId(row.id, 1, new Date(t))))?.getState()).toBe('delayed');
    await remove({ canvas_id: 'welcome', schedule_id: body.schedule_id });
  });

  const base = {
    canvas_id: 'welcome',
    broadcast: true,
    schedule: { time: new Date(Date.now() + 3600_000).toISOString() },
  };
  const refusals: [string, unknown, number, RegExp][] = [
    ['no canvas_id', { broadcast: true, schedule: base.schedule }, 400, /canvas_id is required/],
    ['canvas_id a number', { ...base, canvas_id: 5 }, 400, /canvas_id must be a string/],
    ['an unknown canvas', { ...base, canvas_id: 'nope' }, 404, /Unknown canvas_id/],
    ["another workspace's canvas", { ...base, canvas_id: 'foreign' }, 404, /Unknown canvas_id/],
    ['a canvas that is not API-triggered', { ...base, canvas_id: 'dashboard-only' }, 400, /not API-triggered/],
    ['a stopped canvas', { ...base, canvas_id: 'stopped' }, 400, /not active \(stopped\)/],
    ['no schedule', { canvas_id: 'welcome', broadcast: true }, 400, /schedule/],
    ['schedule.time missing', { ...base, schedule: {} }, 400, /schedule.time is required/],
    ['schedule.time not ISO', { ...base, schedule: { time: 'next tuesday' } }, 400, /ISO 8601/],
    ['schedule.time not a real day', { ...base, schedule: { time: '2026-02-30T10:00:00Z' } }, 400, /ISO 8601/],
    [
      'schedule.time a number',
      { ...base, schedule: { time: 1700000000 } },
      400,
      /schedule.time must be an ISO 8601 string/,
    ],
    ['schedule.time in the past', { ...base, schedule: { time: '2020-01-01T00:00:00Z' } }, 400, /in the past/],
    [
      'local time passed everywhere',
      { ...base, schedule: { time: '2020-01-01T00:00:00', in_local_time: true } },
      400,
      /passed in every time zone/,
    ],
    [
      'over 90 days ahead',
      { ...base, schedule: { time: new Date(Date.now() + 91 * 86_400_000).toISOString() } },
      400,
      /90 days/,
    ],
    [
      'in_local_time quoted',
      { ...base, schedule: { ...base.schedule, in_local_time: 'true' } },
      400,
      /in_local_time must be true or false/,
    ],
    ['at_optimal_time', { ...base, schedule: { ...base.schedule, at_optimal_time: true } }, 400, /not supported/],
    [
      'no recipients and no broadcast',
      { canvas_id: 'welcome', schedule: base.schedule },
      400,
      /broadcast must be true/,
    ],
    [
      'recipients with broadcast',
      { ...base, recipients: [{ external_user_id: 'u1' }] },
      400,
      /broadcast must not be true/,
    ],
    [
      '51 recipients',
      {
        canvas_id: 'welcome',
        schedule: base.schedule,
        recipients: Array.from({ length: 51 }, (_, i) => ({ external_user_id: `x${i}` })),
      },
      400,
      /at most 50/,
    ],
    ['empty recipients', { canvas_id: 'welcome', schedule: base.schedule, recipients: [] }, 400, /must not be empty/],
    [
      'recipients not an array',
      { canvas_id: 'welcome', schedule: base.schedule, recipients: { external_user_id: 'u1' } },
      400,
      /recipients must be an array/,
    ],
    [
      'a recipient with two ids',
      {
        canvas_id: 'welcome',
        schedule: base.schedule,
        recipients: [{ external_user_id: 'u1', user_alias: { alias_name: 'a', alias_label: 'b' } }],
      },
      400,
      /exactly one/,
    ],
    [
      'a recipient with no id',
      { canvas_id: 'welcome', schedule: base.schedule, recipients: [{ trigger_properties: {} }] },
      400,
      /exactly one/,
    ],
    [
      'an external id too long',
      { canvas_id: 'welcome', schedule: base.schedule, recipients: [{ external_user_id: 'x'.repeat(256) }] },
      400,
      /at most 255/,
    ],
    [
      'send_to_existing_only false',
      {
        canvas_id: 'welcome',
        schedule: base.schedule,
        recipients: [{ external_user_id: 'u1', send_to_existing_only: false }],
      },
      400,
      /never creates users/,
    ],
    ['an unknown segment', { ...base, audience: { segment_id: 'nope' } }, 404, /Unknown audience.segment_id/],
    ['a filter audience', { ...base, audience: { AND: [] } }, 400, /audience/],
    [
      'trigger_properties not an object',
      { ...base, trigger_properties: 'x' },
      400,
      /trigger_properties must be an object/,
    ],
    ['trigger_properties over 50 KB', { ...base, trigger_properties: { big: 'x'.repeat(51 * 1024) } }, 400, /50 KB/],
    ['an unknown field', { ...base, send_id: 'x' }, 400, /send_id/],
  ];
  // Firing jobs only: the sweep's job scheduler keeps its own next run delayed, and may re-add it at any moment.
  const delayedFirings = async () =>
    (await queue().getDelayed()).filter((j) => j.name !== 'sweep' && !j.repeatJobKey).length;
  it.each(refusals)('refuses %s and stores nothing', async (_name, payload, status, message) => {
    const rows = (await env.ctx.pool.query(`SELECT count(*)::int AS n FROM canvas_schedules`)).rows[0]!.n;
    const jobs = await delayedFirings();
    const res = await create(payload);
    expect(res.status).toBe(status);
    expect(res.body.message).toMatch(message);
    expect((await env.ctx.pool.query(`SELECT count(*)::int AS n FROM canvas_schedules`)).rows[0]!.n).toBe(rows);
    expect(await delayedFirings()).toBe(jobs);
  });

  it('refuses malformed JSON, missing credentials and missing permission', async () => {
    const raw = await post('/canvas/trigger/schedule/create', '{"canvas_id":', env.ws.apiKey, true);
    expect(raw.status).toBe(400);
    expect(raw.body.message).toMatch(/Malformed JSON/);
    const none = await env.app.inject({
      method: 'POST',
      url: '/canvas/trigger/schedule/create',
      headers: { 'content-type': 'application/json' },
      payload: '{}',
    });
    expect(none.statusCode).toBe(401);
    const bare = await create({ ...base }, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toMatch(/canvas\.trigger\.schedule\.create/);
  });
});

describe('POST /canvas/trigger/schedule/update', () => {
  it('moves a schedule: the old delayed job is replaced and it fires at the new time', async () => {
    const { body } = await create({
      canvas_id: 'welcome',
      recipients: [{ external_user_id: 'u4' }],
      schedule: { time: inMs(3600_000) },
    });
    const scheduleId = String(body.schedule_id);
    const before = await scheduleRow(scheduleId);
    const oldJob = fireJobId(before.id, 1, before.fire_times[0]);
    expect(await (await queue().getJob(oldJob))?.getState()).toBe('delayed');

    const time = inMs(1500);
    const res = await update({
      canvas_id: 'welcome',
      schedule_id: scheduleId,
      schedule: { time },
      trigger_properties: { moved: true },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: 'success', applied: true });
    expect(await queue().getJob(oldJob)).toBeUndefined();
    const after = await scheduleRow(scheduleId);
    expect(after).toMatchObject({ version: 2, schedule: { time }, trigger_properties: { moved: true } });

    await waitState(scheduleId, 'sent');
    const ds = await dispatches(scheduleId);
    expect(ds).toHaveLength(1);
    expect(ds[0]).toMatchObject({ version: 2, status: 'done', users_entered: 1 });
    expect(ds[0].fire_at.toISOString()).toBe(new Date(time).toISOString());
  });

  it('switches from local time to UTC: dropping in_local_time sends everyone at the UTC time', async () => {
    const day = new Date(Date.now() + 10 * 86_400_000).toISOString().slice(0, 10);
    const { body } = await create({
      canvas_id: 'welcome',
      broadcast: true,
      schedule: { time: `${day}T08:00:00`, in_local_time: true },
    });
    const scheduleId = String(body.schedule_id);
    const local = await scheduleRow(scheduleId);
    expect(local.fire_times.length).toBe(4);
    const oldJobs = local.fire_times.map((t: Date) => fireJobId(local.id, 1, t));

    const time = inMs(1500);
    const res = await update({ canvas_id: 'welcome', schedule_id: scheduleId, schedule: { time } });
    expect(res.body).toEqual({ message: 'success', applied: true });
    for (const id of oldJobs) expect(await queue().getJob(id)).toBeUndefined();
    const utc = await scheduleRow(scheduleId);
    expect(utc.fire_times.map((d: Date) => d.toISOString())).toEqual([new Date(time).toISOString()]);

    await waitState(scheduleId, 'sent');
    const ds = await dispatches(scheduleId);
    expect(ds).toHaveLength(1);
    expect(ds[0]).toMatchObject({ time_zones: null, users_entered: 6 });
    const iso = new Date(time).toISOString();
    const got = await entries('welcome');
    for (const u of ['u1', 'u2', 'u3', 'u4', 'u5', 'u6']) expect(got[u]!.last_entered, u).toBe(iso);
  });

  it('fires in local time zone by zone; an update after part was sent applies to the rest only', async () => {
    await seedCanvas(env.ws.workspaceId, 'local');
    // Tokyo's clocks reach this wall time in about 1.5 s; everyone else's hours later.
    const tokyoWall = new Intl.DateTimeFormat('sv-SE', {
      timeZone: 'Asia/Tokyo',
      dateStyle: 'short',
      timeStyle: 'medium',
    })
      .format(new Date(Date.now() + 1500))
      .replace(' ', 'T');
    const { body } = await create({
      canvas_id: 'local',
      broadcast: true,
      schedule: { time: tokyoWall, in_local_time: true },
    });
    const scheduleId = String(body.schedule_id);
    const tokyo = await waitFor(
      async () => (await dispatches(scheduleId)).find((d) => d.status === 'done'),
      'the Tokyo firing',
    );
    expect(tokyo.time_zones).toContain('Asia/Tokyo');
    expect(tokyo.time_zones).not.toContain('UTC');
    expect(tokyo.users_entered).toBe(2);
    expect(Object.keys(await entries('local')).sort()).toEqual(['u1', 'u6']);
    expect((await scheduleRow(scheduleId)).state).toBe('sending');

    // Now in UTC, a second from now: Tokyo users must not get it twice.
    const time = inMs(1000);
    const res = await update({ canvas_id: 'local', schedule_id: scheduleId, schedule: { time } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: 'success', applied: true, detail: expect.stringMatching(/already been sent/) });
    await waitState(scheduleId, 'sent');
    const got = await entries('local');
    expect(Object.keys(got).sort()).toEqual(['u1', 'u2', 'u3', 'u4', 'u5', 'u6']);
    expect(got.u1!.last_entered).toBe(tokyo.fire_at.toISOString());
    expect(got.u2!.last_entered).toBe(new Date(time).toISOString());
    const last = (await dispatches(scheduleId)).find((d) => d.version === 2)!;
    expect(last.users_entered).toBe(4);
  });

  it('says the update was not applied once the schedule has been sent, and changes nothing', async () => {
    const { body } = await create({
      canvas_id: 'welcome',
      recipients: [{ external_user_id: 'u2' }],
      schedule: { time: inMs(500) },
    });
    const scheduleId = String(body.schedule_id);
    const sent = await waitState(scheduleId, 'sent');
    const res = await update({ canvas_id: 'welcome', schedule_id: scheduleId, schedule: { time: inMs(3600_000) } });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: 'success', applied: false, detail: expect.stringMatching(/not applied/) });
    expect(await scheduleRow(scheduleId)).toEqual(sent);
  });

  it('refuses bad updates and changes nothing', async () => {
    const { body } = await create({
      canvas_id: 'welcome',
      recipients: [{ external_user_id: 'u2' }],
      schedule: { time: inMs(3600_000) },
    });
    const scheduleId = String(body.schedule_id);
    const foreign = await create(
      { canvas_id: 'foreign', broadcast: true, schedule: { time: inMs(3600_000) } },
      env.other.apiKey,
    );
    await seedCanvas(env.ws.workspaceId, 'second');
    const before = await scheduleRow(scheduleId);
    const good = { canvas_id: 'welcome', schedule_id: scheduleId, schedule: { time: inMs(7200_000) } };
    const cases: [unknown, number, RegExp][] = [
      [{ ...good, schedule_id: undefined }, 400, /schedule_id is required/],
      [{ ...good, canvas_id: undefined }, 400, /canvas_id is required/],
      [{ ...good, schedule: undefined }, 400, /schedule/],
      [{ ...good, schedule_id: 'nope' }, 404, /Unknown schedule_id/],
      [{ ...good, canvas_id: 'second' }, 404, /Unknown schedule_id/],
      [{ ...good, canvas_id: 'nope' }, 404, /Unknown canvas_id/],
      [{ ...good, schedule_id: foreign.body.schedule_id }, 404, /Unknown schedule_id/],
      [{ ...good, schedule: { time: 'soon' } }, 400, /ISO 8601/],
      [{ ...good, schedule: { time: '2021-01-01T00:00:00Z' } }, 400, /in the past/],
      [{ ...good, schedule: { time: good.schedule.time, in_local_time: 1 } }, 400, /in_local_time/],
      [{ ...good, trigger_properties: [] }, 400, /trigger_properties must be an object/],
      [{ ...good, schedule_id: 's'.repeat(256) }, 400, /at most 255/],
    ];
    for (const [payload, status, message] of cases) {
      const res = await update(payload);
      expect(res.status, JSON.stringify(payload).slice(0, 100)).toBe(status);
      expect(res.body.message, JSON.stringify(payload).slice(0, 100)).toMatch(message);
    }
    const raw = await post('/canvas/trigger/schedule/update', '{', env.ws.apiKey, true);
    expect(raw.status).toBe(400);
    const bare = await update(good, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toMatch(/canvas\.trigger\.schedule\.update/);
    const createOnly = await createKey(env.ctx.pool, env.ws.workspaceId, 'create-only', [
      'canvas.trigger.schedule.create',
    ]);
    expect((await update(good, createOnly)).status).toBe(401);
    expect(await scheduleRow(scheduleId)).toEqual(before);
    expect(await (await queue().getJob(fireJobId(before.id, 1, before.fire_times[0])))?.getState()).toBe('delayed');
  });
});

describe('POST /canvas/trigger/schedule/delete', () => {
  it('cancels a schedule: its job is removed, it never fires, and it can no longer be updated', async () => {
    const { body } = await create({
      canvas_id: 'welcome',
      recipients: [{ external_user_id: 'u2' }],
      schedule: { time: inMs(1200) },
    });
    const scheduleId = String(body.schedule_id);
    const row = await scheduleRow(scheduleId);
    expect((await remove({ canvas_id: 'welcome', schedule_id: 5 })).status).toBe(400);
    const missing = await remove({ canvas_id: 'welcome' });
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/schedule_id is required/);
    expect((await post('/canvas/trigger/schedule/delete', '{"canvas_id"', env.ws.apiKey, true)).status).toBe(400);
    const none = await env.app.inject({
      method: 'POST',
      url: '/canvas/trigger/schedule/delete',
      headers: { 'content-type': 'application/json' },
      payload: '{}',
    });
    expect(none.statusCode).toBe(401);
    expect((await scheduleRow(scheduleId)).state).toBe('scheduled');
    expect((await remove({ canvas_id: 'welcome', schedule_id: 'nope' })).status).toBe(404);
    expect((await remove({ canvas_id: 'welcome', schedule_id: scheduleId }, env.ws.bareKey)).status).toBe(401);
    const res = await remove({ canvas_id: 'welcome', schedule_id: scheduleId });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({ message: 'success' });
    expect(await queue().getJob(fireJobId(row.id, 1, row.fire_times[0]))).toBeUndefined();
    await new Promise((r) => setTimeout(r, 2000));
    expect((await scheduleRow(scheduleId)).state).toBe('cancelled');
    expect(await dispatches(scheduleId)).toHaveLength(0);
    expect(
      (await update({ canvas_id: 'welcome', schedule_id: scheduleId, schedule: { time: inMs(60_000) } })).status,
    ).toBe(404);
    expect((await remove({ canvas_id: 'welcome', schedule_id: scheduleId })).status).toBe(404);
  });
});
