import { beforeAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { useTestEnv } from '../helpers/context.js';
import { waitFor } from '../helpers/cli.js';
import { callApi } from '../helpers/http.js';

/**
 * The analytics lists (GET /events/list, /events, /purchases/product_list) and what every analytics read refuses: the
 * names recorded by /users/track, alphabetical, in pages and through the Link header; 400s naming the parameter;
 * credentials and permissions; segment_id read from the event log for the days it holds.
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

const NAMES = Array.from({ length: 260 }, (_, i) => `event-${String(i).padStart(3, '0')}`);
const now = new Date();
const hourAgo = new Date(now.getTime() - 3_600_000);

beforeAll(async () => {
  env.startWorkers([trackIngestJob]);
  // 260 names (sent out of order), each once; in the other workspace, one name of its own.
  const shuffled = [...NAMES].reverse();
  for (let i = 0; i < shuffled.length; i += 75)
    await track({
      events: shuffled.slice(i, i + 75).map((name) => ({ external_id: 'lister', name, time: '2024-02-01T00:00:00Z' })),
    });
  await track({
    attributes: [
      { external_id: 'ann', first_name: 'Ann' },
      { external_id: 'bob', first_name: 'Bob' },
    ],
    events: [
      { external_id: 'ann', name: 'seen', time: now.toISOString() },
      { external_id: 'ann', name: 'seen', time: hourAgo.toISOString(), app_id: 'ios' },
      { external_id: 'bob', name: 'seen', time: now.toISOString() },
    ],
    purchases: ['zeta', 'Alpha', 'beta'].map((product_id) => ({
      external_id: 'ann',
      product_id,
      currency: 'EUR',
      price: 1,
      time: '2024-02-01T00:00:00Z',
    })),
  });
  await track({ events: [{ external_id: 'x', name: 'foreign', time: '2024-02-01T00:00:00Z' }] }, env.other.apiKey);
  await env.ctx.pool.query(
    `INSERT INTO segments (workspace_id, api_id, name, filter) VALUES
       ($1, 'anns', 'Anns', '{"attribute": "first_name", "op": "eq", "value": "Ann"}'),
       ($1, 'gone', 'Archived', '{"all": []}')`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(`UPDATE segments SET archived = true WHERE api_id = 'gone'`);
});

describe('GET /events/list', () => {
  it('gives the names alphabetically, 250 a page', async () => {
    const first = await get('/events/list');
    expect(first.status).toBe(200);
    expect(first.body.message).toBe('success');
    expect(first.body.events).toEqual([...NAMES, 'seen'].slice(0, 250));
    const second = await get('/events/list?page=1');
    expect(second.body.events).toEqual([...NAMES.slice(250), 'seen']);
    expect((await get('/events/list?page=2')).body.events).toEqual([]);
    expect((await get('/events/list', env.other.apiKey)).body.events).toEqual(['foreign']);
  });
});

describe('GET /events', () => {
  it('gives the event objects 50 a page, the next page named by a relative Link header', async () => {
    const seen: string[] = [];
    let url: string | null = '/events';
    let pages = 0;
    while (url) {
      const r = await get(url);
      expect(r.status).toBe(200);
      pages++;
      expect(r.body.events.length).toBeLessThanOrEqual(50);
      seen.push(...r.body.events.map((e: { name: string }) => e.name));
      const link = r.headers.link as string | undefined;
      url = link ? /^<([^>]+)>; rel="next"$/.exec(link)![1]! : null;
    }
    expect(pages).toBe(6);
    expect(seen).toEqual([...NAMES, 'seen']);
    const one = await get('/events');
    expect(one.body.events[0]).toEqual({
      name: 'event-000',
      description: null,
      included_in_analytics_report: false,
      status: 'Active',
      tag_names: [],
    });
    expect(one.headers['x-ratelimit-limit']).toBe('1000');
  });

  it('refuses a cursor it did not issue', async () => {
    const r = await get('/events?cursor=bm90LWEtY3Vyc29y!');
    expect(r.status).toBe(400);
    expect(r.body.message).toMatch(/cursor/);
  });
});

describe('GET /purchases/product_list', () => {
  it('gives the product ids, by their bytes', async () => {
    const r = await get('/purchases/product_list?page=0');
    expect(r.body).toEqual({ message: 'success', products: ['Alpha', 'beta', 'zeta'] });
    expect((await get('/purchases/product_list?page=1')).body.products).toEqual([]);
  });
});

describe('GET /events/data_series with segment_id', () => {
  it("counts only the segment's members, from the event log", async () => {
    const hour = (d: Date) => `${d.toISOString().slice(0, 13)}:00:00Z`;
    // Two days (yesterday and today), as `hourAgo` is yesterday in the first hour of a UTC day.
    const day = (d: Date) => d.toISOString().slice(0, 10);
    const yesterday = day(new Date(now.getTime() - 86_400_000));
    const days = (counts: Date[]) =>
      [yesterday, day(now)].map((time) => ({ time, count: counts.filter((d) => day(d) === time).length }));
    const all = await get('/events/data_series?event=seen&length=2');
    expect(all.body.data).toEqual(days([now, hourAgo, now]));
    const anns = await get('/events/data_series?event=seen&length=2&segment_id=anns');
    expect(anns.status).toBe(200);
    expect(anns.body.data).toEqual(days([now, hourAgo]));
    const hourly = await get('/events/data_series?event=seen&length=2&unit=hour&segment_id=anns');
    expect(hourly.body.data).toEqual([
      { time: hour(hourAgo), count: 1 },
      { time: hour(now), count: 1 },
    ]);
    const ios = await get('/events/data_series?event=seen&length=2&unit=hour&segment_id=anns&app_id=ios');
    expect(ios.body.data.map((d: { count: number }) => d.count)).toEqual([1, 0]);
  });

  it("counts a merged user's events as the kept profile's, whose segment they then are in", async () => {
    const at = now.toISOString();
    await track({
      attributes: [{ external_id: 'ann-kept', first_name: 'Ann' }],
      events: [
        { external_id: 'ann-kept', name: 'merged-seen', time: at },
        { external_id: 'anon-merged', name: 'merged-seen', time: at },
        { external_id: 'anon-merged', name: 'merged-seen', time: at },
      ],
    });
    const today = async () =>
      (await get('/events/data_series?event=merged-seen&length=1&segment_id=anns')).body.data[0].count;
    expect(await today()).toBe(1);
    const r = await callApi(env.app, 'POST', '/users/merge', {
      key: env.ws.apiKey,
      body: {
        merge_updates: [
          { identifier_to_merge: { external_id: 'anon-merged' }, identifier_to_keep: { external_id: 'ann-kept' } },
        ],
      },
    });
    expect(r.status).toBeLessThan(300);
    await waitFor(async () => (await staged()) === 0, 30_000, 20);
    expect(await today()).toBe(3);
  });

  it('refuses a range older than the log holds (400), and an unknown or archived segment (404)', async () => {
    const old = await get('/events/data_series?event=seen&length=100&segment_id=anns');
    expect(old.status).toBe(400);
    expect(old.body.message).toMatch(/^segment_id: .*event log/);
    for (const id of ['nope', 'gone']) {
      const r = await get(`/events/data_series?event=seen&length=1&segment_id=${id}`);
      expect(r.status).toBe(404);
      expect(r.body.message).toContain(id);
    }
  });
});

const SERIES = [
  '/events/data_series?event=seen&',
  '/purchases/quantity_series?',
  '/purchases/revenue_series?',
  '/kpi/dau/data_series?',
  '/kpi/new_users/data_series?',
  '/kpi/mau/data_series?',
];

describe('every series refuses what it cannot read, naming the parameter', () => {
  it.each([
    ['', /length is required/],
    ['length=0', /length must be an integer from 1 to 100/],
    ['length=101', /length must be an integer from 1 to 100/],
    ['length=1.5', /length/],
    ['length=7&length=8', /length/],
    ['length=7&ending_at=yesterday', /ending_at must be an ISO 8601 time/],
    ['length=7&ending_at=2024-02-30T00:00:00Z', /ending_at/],
    ['length=7&app_id=', /app_id must not be empty/],
  ])('%s', async (query, message) => {
    for (const base of SERIES) {
      const r = await get(`${base}${query}`);
      expect(r.status, `${base}${query}`).toBe(400);
      expect(r.body.message).toMatch(message);
    }
  });

  it('refuses a missing or empty event, and a unit other than day or hour', async () => {
    expect((await get('/events/data_series?length=7')).body.message).toMatch(/event is required/);
    expect((await get('/events/data_series?length=7&event=')).body.message).toMatch(/event must not be empty/);
    for (const base of SERIES.slice(0, 3)) {
      const r = await get(`${base}length=7&unit=week`);
      expect(r.status).toBe(400);
      expect(r.body.message).toMatch(/unit must be 'day' or 'hour'/);
    }
    for (const url of ['/events/list?page=-1', '/purchases/product_list?page=x'])
      expect((await get(url)).body.message).toMatch(/page/);
  });
});

describe('credentials and permissions', () => {
  const ROUTES = [
    ['/events/list', 'events.list', '1000'],
    ['/events', 'events.get', '1000'],
    ['/purchases/product_list', 'purchases.product_list', '1000'],
    ['/events/data_series?event=seen&length=1', 'events.data_series', '250000'],
    ['/purchases/quantity_series?length=1', 'purchases.quantity_series', '250000'],
    ['/purchases/revenue_series?length=1', 'purchases.revenue_series', '250000'],
    ['/kpi/dau/data_series?length=1', 'kpi.dau.data_series', '250000'],
    ['/kpi/new_users/data_series?length=1', 'kpi.new_users.data_series', '250000'],
    ['/kpi/mau/data_series?length=1', 'kpi.mau.data_series', '250000'],
  ] as const;

  it.each(ROUTES)('%s needs a key with %s, and counts in its rate limit', async (url, permission, limit) => {
    const none = await get(url, null);
    expect(none.status).toBe(401);
    const bare = await get(url, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain(permission);
    const ok = await get(url);
    expect(ok.status).toBe(200);
    expect(ok.headers['x-ratelimit-limit']).toBe(limit);
  });
});
