import { beforeAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { useTestEnv } from '../helpers/context.js';
import { waitFor } from '../helpers/cli.js';
import { callApi } from '../helpers/http.js';

/**
 * The event, purchase and user KPI series (docs/analytics.md) of events accepted by /users/track and applied by a
 * worker, read from the rollups: exact counts by UTC day and by hour, across a day boundary, with ending_at in other
 * zones; activity (DAU, new users, MAU) checked against a count made here from the events sent, including events sent
 * late for earlier days and several new days of one person in one batch.
 */

const env = useTestEnv({ workspaces: ['ws', 'other'] });

const get = (url: string, key: string | null = env.ws.apiKey) => callApi(env.app, 'GET', url, { key });

async function staged() {
  return (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_staging')).rows[0]!.n;
}

async function track(body: unknown, key = env.ws.apiKey) {
  const r = await callApi(env.app, 'POST', '/users/track', { key, body });
  expect(r.status, JSON.stringify(r.body)).toBe(201);
  await waitFor(async () => (await staged()) === 0, 30_000, 20);
}

const ev = (user: string, name: string, time: string, app?: string) => ({
  external_id: user,
  name,
  time,
  ...(app ? { app_id: app } : {}),
});
const buy = (user: string, product: string, price: number, quantity: number, time: string, app?: string) => ({
  external_id: user,
  product_id: product,
  currency: 'USD',
  price,
  quantity,
  time,
  ...(app ? { app_id: app } : {}),
});

const FIRST_EVENTS = [
  ev('a', 'played', '2024-01-08T10:00:00Z', 'ios'),
  ev('a', 'played', '2024-01-08T10:30:00Z', 'ios'),
  ev('a', 'played', '2024-01-09T23:30:00Z', 'ios'),
  ev('a', 'played', '2024-01-10T00:30:00Z', 'ios'),
  ev('b', 'played', '2024-01-10T00:45:00Z', 'android'),
  ev('c', 'played', '2024-01-10T13:00:00+01:00'), // 12:00 UTC
  ev('c', 'opened', '2023-12-20T05:00:00Z'),
];
const FIRST_PURCHASES = [
  buy('a', 'sku-1', 9.5, 2, '2024-01-10T10:00:00Z', 'ios'),
  buy('d', 'sku-2', 1.25, 1, '2024-01-10T23:59:59Z'),
  buy('d', 'sku-1', 3, 1, '2024-01-09T00:00:00Z', 'web'),
];
// Sent later: b's event moves their first day earlier; e's three new days arrive in one batch, out of order; c is
// already active on the 20th.
const LATE_EVENTS = [
  ev('b', 'played', '2024-01-02T08:00:00Z', 'android'),
  ev('e', 'opened', '2023-11-01T00:00:00Z'),
  ev('e', 'opened', '2024-01-05T00:00:00Z'),
  ev('e', 'opened', '2023-12-15T00:00:00Z'),
  ev('c', 'opened', '2023-12-20T06:00:00Z'),
];

beforeAll(async () => {
  env.startWorkers([trackIngestJob]);
  await track({ events: FIRST_EVENTS, purchases: FIRST_PURCHASES });
  await track({ events: LATE_EVENTS });
});

const points = (body: { data: Record<string, unknown>[] }, key: string) =>
  Object.fromEntries(body.data.map((d) => [d.time, d[key]]));

describe('GET /events/data_series', () => {
  it('counts an event a UTC day, oldest first, zero-filled, the last day whole', async () => {
    const r = await get('/events/data_series?event=played&length=4&ending_at=2024-01-10T12:00:00Z');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      message: 'success',
      data: [
        { time: '2024-01-07', count: 0 },
        { time: '2024-01-08', count: 2 },
        { time: '2024-01-09', count: 1 },
        { time: '2024-01-10', count: 3 },
      ],
    });
  });

  it('counts by hour across a day boundary, with ending_at at another offset', async () => {
    // 01:10 at +01:00 is 00:10 UTC on the 10th: the last hour is 00:00Z, the one before the 9th's 23:00.
    const r = await get(
      `/events/data_series?event=played&length=3&unit=hour&ending_at=${encodeURIComponent('2024-01-10T01:10:00+01:00')}`,
    );
    expect(r.body.data).toEqual([
      { time: '2024-01-09T22:00:00Z', count: 0 },
      { time: '2024-01-09T23:00:00Z', count: 1 },
      { time: '2024-01-10T00:00:00Z', count: 2 },
    ]);
    const noon = await get('/events/data_series?event=played&length=1&unit=hour&ending_at=2024-01-10T12:59:59Z');
    expect(noon.body.data).toEqual([{ time: '2024-01-10T12:00:00Z', count: 1 }]);
  });

  it('places ending_at with an offset on its UTC day, and a date alone on that day', async () => {
    // 00:30 at +01:00 is 23:30 UTC on the 9th; 18:59 at -5:00 is 23:59 UTC on the 9th.
    const plus = await get(`/events/data_series?event=played&length=2&ending_at=2024-01-10T00:30:00%2B01:00`);
    expect(points(plus.body, 'count')).toEqual({ '2024-01-08': 2, '2024-01-09': 1 });
    const minus = await get('/events/data_series?event=played&length=1&ending_at=2024-01-09T18:59:00-5:00');
    expect(minus.body.data).toEqual([{ time: '2024-01-09', count: 1 }]);
    const dateOnly = await get('/events/data_series?event=played&length=1&ending_at=2024-01-10');
    expect(dateOnly.body.data).toEqual([{ time: '2024-01-10', count: 3 }]);
  });

  it('filters by app_id; an unknown event or app counts zeros', async () => {
    const ios = await get('/events/data_series?event=played&length=3&ending_at=2024-01-10&app_id=ios');
    expect(points(ios.body, 'count')).toEqual({ '2024-01-08': 2, '2024-01-09': 1, '2024-01-10': 1 });
    const android = await get('/events/data_series?event=played&length=9&ending_at=2024-01-10&app_id=android');
    expect(android.body.data.filter((d: { count: number }) => d.count > 0)).toEqual([
      { time: '2024-01-02', count: 1 },
      { time: '2024-01-10', count: 1 },
    ]);
    for (const q of ['event=nobody-sent-this', 'event=played&app_id=tvos']) {
      const r = await get(`/events/data_series?${q}&length=100&ending_at=2024-01-10`);
      expect(r.status).toBe(200);
      expect(r.body.data).toHaveLength(100);
      expect(r.body.data.every((d: { count: number }) => d.count === 0)).toBe(true);
    }
  });

  it("keeps another workspace's events apart", async () => {
    const r = await get('/events/data_series?event=played&length=3&ending_at=2024-01-10', env.other.apiKey);
    expect(r.body.data.map((d: { count: number }) => d.count)).toEqual([0, 0, 0]);
  });
});

describe('GET /purchases/quantity_series and /purchases/revenue_series', () => {
  it('sums quantity and price x quantity a day, of every product or one, by app', async () => {
    const q = await get('/purchases/quantity_series?length=2&ending_at=2024-01-10T01:00:00Z');
    expect(q.body).toEqual({
      message: 'success',
      data: [
        { time: '2024-01-09', purchase_quantity: 1 },
        { time: '2024-01-10', purchase_quantity: 3 },
      ],
    });
    const rev = await get('/purchases/revenue_series?length=2&ending_at=2024-01-10');
    expect(points(rev.body, 'revenue')).toEqual({ '2024-01-09': 3, '2024-01-10': 20.25 });
    const sku1 = await get('/purchases/revenue_series?length=2&ending_at=2024-01-10&product=sku-1');
    expect(points(sku1.body, 'revenue')).toEqual({ '2024-01-09': 3, '2024-01-10': 19 });
    const web = await get('/purchases/quantity_series?length=2&ending_at=2024-01-10&app_id=web');
    expect(points(web.body, 'purchase_quantity')).toEqual({ '2024-01-09': 1, '2024-01-10': 0 });
    const none = await get('/purchases/revenue_series?length=2&ending_at=2024-01-10&product=sku-404');
    expect(points(none.body, 'revenue')).toEqual({ '2024-01-09': 0, '2024-01-10': 0 });
  });

  it('by hour, the last second of a day in its own hour', async () => {
    const r = await get('/purchases/quantity_series?length=2&unit=hour&ending_at=2024-01-11T00:00:00Z');
    expect(r.body.data).toEqual([
      { time: '2024-01-10T23:00:00Z', purchase_quantity: 1 },
      { time: '2024-01-11T00:00:00Z', purchase_quantity: 0 },
    ]);
    const rev = await get('/purchases/revenue_series?length=1&unit=hour&ending_at=2024-01-10T10:59:00Z');
    expect(rev.body.data).toEqual([{ time: '2024-01-10T10:00:00Z', revenue: 19 }]);
  });
});

type Activity = { user: string; app?: string; time: string };

/** DAU, new users and MAU of a UTC day counted from the events sent, by brute force. */
function expectedKpis(activity: Activity[], app: string | undefined, days: string[]) {
  const byUser = new Map<string, Set<string>>();
  for (const a of activity) {
    if (app !== undefined && a.app !== app) continue;
    const day = new Date(a.time).toISOString().slice(0, 10);
    (byUser.get(a.user) ?? byUser.set(a.user, new Set()).get(a.user)!).add(day);
  }
  const dayMs = (d: string) => Date.parse(`${d}T00:00:00Z`);
  return days.map((time) => {
    let dau = 0;
    let newUsers = 0;
    let mau = 0;
    for (const set of byUser.values()) {
      const sorted = [...set].sort();
      if (set.has(time)) dau++;
      if (sorted[0] === time) newUsers++;
      if (sorted.some((d) => dayMs(d) <= dayMs(time) && dayMs(d) > dayMs(time) - 30 * 86_400_000)) mau++;
    }
    return { time, dau, new_users: newUsers, mau };
  });
}

describe('GET /kpi/dau, /kpi/new_users and /kpi/mau data_series', () => {
  const activity: Activity[] = [...FIRST_EVENTS, ...FIRST_PURCHASES, ...LATE_EVENTS].map((o) => ({
    user: o.external_id,
    app: o.app_id,
    time: o.time,
  }));

  async function kpis(query: string) {
    const [dau, newUsers, mau] = await Promise.all(
      ['dau', 'new_users', 'mau'].map((k) => get(`/kpi/${k}/data_series?${query}`)),
    );
    return dau!.body.data.map((d: { time: string; dau: number }, i: number) => ({
      time: d.time,
      dau: d.dau,
      new_users: newUsers!.body.data[i].new_users,
      mau: mau!.body.data[i].mau,
    }));
  }

  it('counts each day as a count of the events sent would, for every app and each', async () => {
    const got = await kpis('length=100&ending_at=2024-01-20T00:00:00Z');
    const days = got.map((d: { time: string }) => d.time);
    expect(days[0]).toBe('2023-10-13');
    expect(got).toEqual(expectedKpis(activity, undefined, days));
    for (const app of ['ios', 'android', 'web']) {
      expect(await kpis(`length=100&ending_at=2024-01-20&app_id=${app}`)).toEqual(expectedKpis(activity, app, days));
    }
  });

  it('gives the figures worked out by hand', async () => {
    // 10 January: a, b, c and d active; nobody new (b's first day moved to the 2nd by the late event); active in the
    // 30 days to it: a, b, c (20 Dec), d, e (15 Dec, 5 Jan).
    expect(await kpis('length=1&ending_at=2024-01-10')).toEqual([{ time: '2024-01-10', dau: 4, new_users: 0, mau: 5 }]);
    // 30 Nov: e (1 Nov) is the only one within 30 days; 1 Dec: e's 1 Nov is 30 days back, out of the window.
    expect(await kpis('length=2&ending_at=2023-12-01T23:00:00%2B01:00')).toEqual([
      { time: '2023-11-30', dau: 0, new_users: 0, mau: 1 },
      { time: '2023-12-01', dau: 0, new_users: 0, mau: 0 },
    ]);
  });

  it('adds the MAU counted day by day before migration 0470 to what its ranges give', async () => {
    const before = await kpis('length=2&ending_at=2023-11-30');
    // As an install upgraded from before 0470 holds it: 7 people on 29 November counted in the day's own row.
    await env.ctx.pool.query(
      `INSERT INTO user_kpi_daily (workspace_id, app_id, day, mau) VALUES ($1, '', '2023-11-29', 7)
       ON CONFLICT (workspace_id, app_id, day) DO UPDATE SET mau = user_kpi_daily.mau + 7`,
      [env.ws.workspaceId],
    );
    try {
      const after = await kpis('length=2&ending_at=2023-11-30');
      expect(after).toEqual([{ ...before[0], mau: before[0].mau + 7 }, before[1]]);
    } finally {
      await env.ctx.pool.query(
        `UPDATE user_kpi_daily SET mau = mau - 7 WHERE workspace_id = $1 AND app_id = '' AND day = '2023-11-29'`,
        [env.ws.workspaceId],
      );
    }
  });

  it('stays exact for many people whose days arrive in shuffled batches', async () => {
    // A fixed pseudo-random sequence: 30 people, each active on a few of 90 days, the events sent in 6 requests in an
    // order unrelated to their days (each request adds days before, between and after ones already counted).
    let seed = 43;
    const rand = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;
    const sent: { external_id: string; name: string; time: string; app_id?: string }[] = [];
    for (let u = 0; u < 30; u++)
      for (let k = 0; k < 1 + Math.floor(rand() * 12); k++) {
        const day = new Date(
          Date.UTC(2024, 5, 1) + Math.floor(rand() * 90) * 86_400_000 + Math.floor(rand() * 86_400_000),
        );
        sent.push({
          external_id: `r${u}`,
          name: 'r',
          time: day.toISOString(),
          ...(rand() < 0.5 ? { app_id: 'ios' } : {}),
        });
      }
    sent.sort(() => rand() - 0.5);
    for (let i = 0; i < sent.length; i += 60) await track({ events: sent.slice(i, i + 60) });
    const mine = sent.map((o) => ({ user: o.external_id, app: o.app_id, time: o.time }));
    for (const app of [undefined, 'ios']) {
      const got = await kpis(`length=100&ending_at=2024-09-10${app ? `&app_id=${app}` : ''}`);
      const days = got.map((d: { time: string }) => d.time);
      expect(got).toEqual(expectedKpis(mine, app, days));
      expect(Math.max(...got.map((d: { mau: number }) => d.mau))).toBeGreaterThan(10);
    }
  });
});
