import { beforeAll, describe, expect, it } from 'vitest';
import { liveActivityPushJob } from '../../jobs/live-activity-push.js';
import { liveActivityRemovalJob } from '../../jobs/live-activity-removal.js';
import { LIVE_ACTIVITY_REMOVAL_QUEUE } from '../../src/platform/queues/live-activity-removal.js';
import { useTestEnv } from '../helpers/context.js';
import { createKey } from '../helpers/seed.js';
import { callApi, statusAndBody } from '../helpers/http.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });
let appRowId: string;
const APP = 'ios-app-1';
const SHAPE = { score: 'number', team: 'string', final: 'boolean', scorers: 'array', meta: 'object' };
const STATE = { score: 1, team: 'Lions', final: false, scorers: ['A'], meta: { period: 2 } };

beforeAll(async () => {
  appRowId = (
    await env.ctx.pool.query<{ id: string }>(
      `INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, $2, 'Sports') RETURNING id`,
      [env.ws.workspaceId, APP],
    )
  ).rows[0]!.id;
  await env.ctx.pool.query(`INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'foreign-app', 'Other')`, [
    env.other.workspaceId,
  ]);
  env.startWorkers([liveActivityPushJob, liveActivityRemovalJob]);
});

type Json = Record<string, unknown>;
async function declare(activityId: string, shape: Json = SHAPE) {
  return (
    await env.ctx.pool.query<{ id: string }>(
      `INSERT INTO live_activities (app_id, activity_id, content_state_shape) VALUES ($1, $2, $3) RETURNING id`,
      [appRowId, activityId, JSON.stringify(shape)],
    )
  ).rows[0]!.id;
}
const post = (url: string, payload: unknown, key = env.ws.apiKey, raw = false) =>
  callApi(env.app, 'POST', url, { key, ...(raw ? { raw: payload as string } : { body: payload }) }).then(statusAndBody);
const update = (payload: unknown, key?: string) => post('/messages/live_activity/update', payload, key);
const activity = async (id: string) =>
  (await env.ctx.pool.query(`SELECT * FROM live_activities WHERE id = $1`, [id])).rows[0]!;
const pushes = async (id: string) =>
  (await env.ctx.pool.query(`SELECT * FROM live_activity_pushes WHERE live_activity_id = $1 ORDER BY id`, [id])).rows;
async function waitFor<T>(
  fn: () => Promise<T | undefined | null | false>,
  what: string,
  timeoutMs = 10_000,
): Promise<T> {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
const delivered = (id: string, n: number) =>
  waitFor(
    async () => ((await pushes(id)).filter((p) => p.status === 'delivered').length >= n ? pushes(id) : null),
    `${n} delivered pushes`,
  );

describe('POST /messages/live_activity/update: running -> running', () => {
  it('updates the content, ignores dismissal_date, and queues an ActivityKit update push', async () => {
    const id = await declare('game-1');
    const before = Math.floor(Date.now() / 1000);
    const { status, body } = await update({
      app_id: APP,
      activity_id: 'game-1',
      content_state: STATE,
      stale_date: '2030-01-01T00:10:00Z',
      dismissal_date: '2030-01-01T00:00:00Z',
      notification: { platform_push: { alert: { title: 'Goal!', body: 'Lions score' } } },
    });
    expect(status).toBe(201);
    expect(body).toEqual({ message: 'success' });
    const row = await activity(id);
    expect(row.state).toBe('running');
    expect(row.content_state).toEqual(STATE);
    expect(row.dismissal_date).toBeNull();
    expect(row.stale_date.toISOString()).toBe('2030-01-01T00:10:00.000Z');
    const [push] = await delivered(id, 1);
    expect(push.event).toBe('update');
    expect(push.adapter).toBe('record');
    expect(push.payload).toEqual({
      aps: {
        timestamp: expect.any(Number),
        event: 'update',
        'content-state': STATE,
        'stale-date': Date.UTC(2030, 0, 1, 0, 10) / 1000,
        alert: { title: 'Goal!', body: 'Lions score' },
      },
    });
    expect(push.payload.aps.timestamp).toBeGreaterThanOrEqual(before);
  });

  it('accepts the alert as platform_push {title, body} and sends no alert without a notification', async () => {
    const id = await declare('game-2');
    expect(
      (
        await update({
          app_id: APP,
          activity_id: 'game-2',
          content_state: STATE,
          notification: { platform_push: { title: 'T', body: 'B' } },
        })
      ).status,
    ).toBe(201);
    expect((await update({ app_id: APP, activity_id: 'game-2', content_state: { ...STATE, score: 2 } })).status).toBe(
      201,
    );
    const [first, second] = await delivered(id, 2);
    expect(first.payload.aps.alert).toEqual({ title: 'T', body: 'B' });
    expect(second.payload.aps).not.toHaveProperty('alert');
    expect(second.payload.aps).not.toHaveProperty('stale-date');
    expect(second.payload.aps['content-state'].score).toBe(2);
  });
});

describe('POST /messages/live_activity/update: running -> ended', () => {
  it('ends with a future dismissal date and removes the activity when it comes (delayed job)', async () => {
    const id = await declare('game-3');
    const dismissal = new Date(Date.now() + 1500);
    const { status } = await update({
      app_id: APP,
      activity_id: 'game-3',
      content_state: { ...STATE, final: true },
      end_activity: true,
      dismissal_date: dismissal.toISOString(),
    });
    expect(status).toBe(201);
    const ended = await activity(id);
    expect(ended.state).toBe('ended');
    expect(ended.ended_at).not.toBeNull();
    expect(ended.removed_at).toBeNull();
    const [push] = await delivered(id, 1);
    expect(push.payload.aps.event).toBe('end');
    expect(push.payload.aps['dismissal-date']).toBe(Math.floor(dismissal.getTime() / 1000));
    const removed = await waitFor(async () => {
      const row = await activity(id);
      return row.state === 'removed' ? row : null;
    }, 'removal at the dismissal date');
    expect(removed.removed_at.getTime()).toBeGreaterThanOrEqual(dismissal.getTime() - 50);
  });

  it('removes the activity at once when the dismissal date is past', async () => {
    const id = await declare('game-4');
    const { status } = await update({
      app_id: APP,
      activity_id: 'game-4',
      content_state: STATE,
      end_activity: true,
      dismissal_date: '2020-01-01T00:00:00Z',
    });
    expect(status).toBe(201);
    const row = await activity(id);
    expect(row.state).toBe('removed');
    expect(row.removed_at).not.toBeNull();
    const [push] = await delivered(id, 1);
    expect(push.payload.aps['dismissal-date']).toBe(Date.UTC(2020, 0, 1) / 1000);
  });

  it('without a dismissal date, ends and arms removal four hours later (the iOS default)', async () => {
    const id = await declare('game-5');
    const t0 = Date.now();
    expect(
      (await update({ app_id: APP, activity_id: 'game-5', content_state: STATE, end_activity: true })).status,
    ).toBe(201);
    const row = await activity(id);
    expect(row.state).toBe('ended');
    expect(Math.abs(row.dismissal_date.getTime() - (t0 + 4 * 3600 * 1000))).toBeLessThan(5000);
    const job = await env.ctx.queues.get(LIVE_ACTIVITY_REMOVAL_QUEUE).getJob(`la-remove-${id}`);
    expect(await job?.getState()).toBe('delayed');
    const [push] = await delivered(id, 1);
    expect(push.payload.aps).not.toHaveProperty('dismissal-date');
  });

  it('end_activity false is a plain update', async () => {
    const id = await declare('game-6');
    expect(
      (
        await update({
          app_id: APP,
          activity_id: 'game-6',
          content_state: STATE,
          end_activity: false,
          dismissal_date: '2020-01-01T00:00:00Z',
        })
      ).status,
    ).toBe(201);
    expect((await activity(id)).state).toBe('running');
  });

  it('refuses an update to an ended or removed activity with 4XX {error} and changes nothing', async () => {
    const id = await declare('game-7');
    await update({
      app_id: APP,
      activity_id: 'game-7',
      content_state: STATE,
      end_activity: true,
      dismissal_date: '2099-01-01T00:00:00Z',
    });
    const before = await activity(id);
    const res = await update({ app_id: APP, activity_id: 'game-7', content_state: { ...STATE, score: 9 } });
    expect(res.status).toBe(409);
    expect(res.body).toEqual({ error: expect.stringMatching(/has ended/) });
    const again = await update({ app_id: APP, activity_id: 'game-4', content_state: STATE });
    expect(again.status).toBe(409);
    expect(again.body.error).toMatch(/removed/);
    expect(await activity(id)).toEqual(before);
    expect(await pushes(id)).toHaveLength(1);
  });
});

describe('POST /messages/live_activity/update: refusals', () => {
  it('refuses unknown apps and activities with 404 {error}', async () => {
    await declare('game-8');
    const app = await update({ app_id: 'no-app', activity_id: 'game-8', content_state: STATE });
    expect(app.status).toBe(404);
    expect(app.body).toEqual({ error: expect.stringMatching(/Unknown app_id/) });
    const foreign = await update({ app_id: 'foreign-app', activity_id: 'game-8', content_state: STATE });
    expect(foreign.status).toBe(404);
    const act = await update({ app_id: APP, activity_id: 'no-game', content_state: STATE });
    expect(act.status).toBe(404);
    expect(act.body).toEqual({ error: expect.stringMatching(/Unknown activity_id/) });
  });

  it('refuses content_state that does not match the declared shape with 400 {error}, changing nothing', async () => {
    const id = await declare('game-9');
    const before = await activity(id);
    const cases: [Json, RegExp][] = [
      [{ ...STATE, score: '1' }, /score must be a number/],
      [{ team: 'x', final: true, scorers: [], meta: {} }, /missing score \(number\)/],
      [{ ...STATE, extra: 1 }, /extra is not declared/],
      [{ ...STATE, scorers: {} }, /scorers must be an array/],
      [{ ...STATE, meta: null }, /meta must be an object/],
    ];
    for (const [content_state, message] of cases) {
      const res = await update({ app_id: APP, activity_id: 'game-9', content_state });
      expect(res.status, JSON.stringify(content_state)).toBe(400);
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(res.body.error).toMatch(message);
    }
    expect(await activity(id)).toEqual(before);
    expect(await pushes(id)).toHaveLength(0);
  });

  it('refuses malformed JSON, wrong types, missing fields and over-limit values with 400 {error}', async () => {
    const id = await declare('game-10');
    const base = { app_id: APP, activity_id: 'game-10', content_state: STATE };
    const raw = await post('/messages/live_activity/update', '{"app_id": ', env.ws.apiKey, true);
    expect(raw.status).toBe(400);
    expect(raw.body.error).toMatch(/Malformed JSON/);
    const cases: [unknown, RegExp][] = [
      [{ activity_id: 'game-10', content_state: STATE }, /app_id is required/],
      [{ app_id: APP, content_state: STATE }, /activity_id is required/],
      [{ app_id: APP, activity_id: 'game-10' }, /content_state is required/],
      [{ ...base, content_state: [1] }, /content_state/],
      [{ ...base, app_id: 7 }, /app_id must be a string/],
      [{ ...base, end_activity: 'true' }, /end_activity must be true or false/],
      [{ ...base, dismissal_date: 'tomorrow' }, /dismissal_date must be an ISO 8601/],
      [{ ...base, stale_date: 1700000000 }, /stale_date must be an ISO 8601/],
      [{ ...base, stale_date: '2026-02-30T00:00:00Z' }, /stale_date must be an ISO 8601/],
      [{ ...base, notification: { alert: 'x' } }, /notification|platform_push/],
      [{ ...base, notification: { platform_push: { title: 'only a title' } } }, /title and body/],
      [
        { ...base, notification: { platform_push: { alert: { title: 1, body: 'b' } } } },
        /alert title must be a string/,
      ],
      [{ ...base, activity_id: 'a'.repeat(256) }, /activity_id must be at most 255/],
      [{ ...base, notification: { platform_push: { title: 't'.repeat(1001), body: 'b' } } }, /at most 1000/],
      [{ ...base, surprise: true }, /surprise/],
      [[], /body/],
    ];
    for (const [payload, message] of cases) {
      const res = await update(payload);
      expect(res.status, JSON.stringify(payload).slice(0, 120)).toBe(400);
      expect(Object.keys(res.body)).toEqual(['error']);
      expect(res.body.error, JSON.stringify(payload).slice(0, 120)).toMatch(message);
    }
    expect((await activity(id)).content_state).toBeNull();
    expect(await pushes(id)).toHaveLength(0);
  });

  it('refuses an update whose push would exceed the APNs 4 KB limit', async () => {
    const id = await declare('game-11', { text: 'string' });
    const res = await update({ app_id: APP, activity_id: 'game-11', content_state: { text: 'x'.repeat(5000) } });
    expect(res.status).toBe(400);
    expect(res.body.error).toMatch(/APNs accepts at most 4096/);
    expect((await activity(id)).content_state).toBeNull();
  });

  it('refuses missing credentials and a key without messages.live_activity.update', async () => {
    const id = await declare('game-12');
    const payload = { app_id: APP, activity_id: 'game-12', content_state: STATE };
    const none = await env.app.inject({
      method: 'POST',
      url: '/messages/live_activity/update',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(payload),
    });
    expect(none.statusCode).toBe(401);
    const bare = await update(payload, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toMatch(/messages\.live_activity\.update/);
    const registerOnly = await createKey(env.ctx.pool, env.ws.workspaceId, 'register-only', [
      'messages.live_activity.register',
    ]);
    expect((await update(payload, registerOnly)).status).toBe(401);
    expect((await activity(id)).content_state).toBeNull();
  });
});

describe('POST /messages/live_activity/register', () => {
  const register = (payload: unknown, key?: string) => post('/messages/live_activity/register', payload, key);
  const TOKEN_A = 'ab'.repeat(32);
  const TOKEN_B = 'cd'.repeat(32);

  it('registers a new activity with its shape, then more devices; updates reach every token', async () => {
    const first = await register({
      app_id: APP,
      activity_id: 'match-1',
      push_token: TOKEN_A,
      content_state_shape: { score: 'number' },
      external_id: 'user-1',
    });
    expect(first.status).toBe(201);
    expect(first.body).toEqual({ message: 'success' });
    expect((await register({ app_id: APP, activity_id: 'match-1', push_token: TOKEN_B })).status).toBe(201);
    expect(
      (
        await register({
          app_id: APP,
          activity_id: 'match-1',
          push_token: TOKEN_A.toUpperCase(),
          content_state_shape: { score: 'number' },
        })
      ).status,
    ).toBe(201);
    const row = (
      await env.ctx.pool.query(`SELECT * FROM live_activities WHERE app_id = $1 AND activity_id = 'match-1'`, [
        appRowId,
      ])
    ).rows[0]!;
    expect(row.state).toBe('running');
    expect(row.content_state_shape).toEqual({ score: 'number' });
    const tokens = (
      await env.ctx.pool.query(
        `SELECT push_token, external_id FROM live_activity_tokens WHERE live_activity_id = $1 ORDER BY push_token`,
        [row.id],
      )
    ).rows;
    expect(tokens).toEqual([
      { push_token: TOKEN_A, external_id: 'user-1' },
      { push_token: TOKEN_B, external_id: null },
    ]);
    expect((await update({ app_id: APP, activity_id: 'match-1', content_state: { score: 3 } })).status).toBe(201);
    const [push] = await delivered(row.id, 1);
    expect(push.tokens).toBe(2);
  });

  it('adopts a shape for an activity declared without one', async () => {
    const id = await declare('match-2', {});
    expect(
      (
        await register({
          app_id: APP,
          activity_id: 'match-2',
          push_token: TOKEN_A,
          content_state_shape: { n: 'number' },
        })
      ).status,
    ).toBe(201);
    expect((await activity(id)).content_state_shape).toEqual({ n: 'number' });
  });

  it('refuses bad registrations and changes nothing', async () => {
    await declare('match-3');
    const ended = await declare('match-4');
    await env.ctx.pool.query(`UPDATE live_activities SET state = 'ended' WHERE id = $1`, [ended]);
    const tokensBefore = (await env.ctx.pool.query(`SELECT count(*)::int AS n FROM live_activity_tokens`)).rows[0]!.n;
    const activitiesBefore = (await env.ctx.pool.query(`SELECT count(*)::int AS n FROM live_activities`)).rows[0]!.n;
    const cases: [unknown, number, RegExp][] = [
      [{ app_id: APP, activity_id: 'new-one', push_token: TOKEN_A }, 400, /content_state_shape is required/],
      [
        { app_id: APP, activity_id: 'match-3', push_token: TOKEN_A, content_state_shape: { score: 'string' } },
        409,
        /differs/,
      ],
      [{ app_id: APP, activity_id: 'match-4', push_token: TOKEN_A }, 409, /ended/],
      [{ app_id: 'nope', activity_id: 'match-3', push_token: TOKEN_A }, 404, /Unknown app_id/],
      [{ app_id: APP, activity_id: 'match-3', push_token: 'not hex!' }, 400, /push_token must be the hex/],
      [{ app_id: APP, activity_id: 'match-3' }, 400, /push_token is required/],
      [
        { app_id: APP, activity_id: 'x', push_token: TOKEN_A, content_state_shape: { a: 'date' } },
        400,
        /attribute types/,
      ],
      [{ app_id: APP, activity_id: 'x', push_token: TOKEN_A, content_state_shape: [] }, 400, /content_state_shape/],
      [{ app_id: APP, activity_id: 'x', push_token: 'a'.repeat(513), content_state_shape: {} }, 400, /push_token/],
    ];
    for (const [payload, status, message] of cases) {
      const res = await register(payload);
      expect(res.status, JSON.stringify(payload).slice(0, 100)).toBe(status);
      expect(res.body.error, JSON.stringify(payload).slice(0, 100)).toMatch(message);
    }
    const bare = await register({ app_id: APP, activity_id: 'match-3', push_token: TOKEN_A }, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toMatch(/messages\.live_activity\.register/);
    expect((await env.ctx.pool.query(`SELECT count(*)::int AS n FROM live_activity_tokens`)).rows[0]!.n).toBe(
      tokensBefore,
    );
    expect((await env.ctx.pool.query(`SELECT count(*)::int AS n FROM live_activities`)).rows[0]!.n).toBe(
      activitiesBefore,
    );
  });
});
