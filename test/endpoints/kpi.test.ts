import { beforeAll, describe, expect, it } from 'vitest';
import { utcDay } from '../../src/platform/lib/iso-time.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'ios', 'iOS'), ($1, 'android', 'Android'), ($2, 'foreign', 'Foreign')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
  const at = (app: string, time: string, n = 1) => Array.from({ length: n }, () => ({ app_id: app, time }));
  await record(env.ws.apiKey, [
    ...at('ios', '2024-01-03T23:59:59.999Z', 5), // the day before a 7-day series ending 2024-01-10
    ...at('ios', '2024-01-04T00:00:00.000Z', 2),
    ...at('android', '2024-01-06T12:00:00Z', 3),
    ...at('ios', '2024-01-09T23:59:59.999Z', 1),
    ...at('ios', '2024-01-10T00:00:00.000Z', 4),
    ...at('android', '2024-01-10T12:00:00.000Z', 1),
    ...at('android', '2024-01-10T12:00:00.001Z', 6), // after an ending_at of 12:00:00.000
    ...at('ios', new Date().toISOString(), 2),
  ]);
  await record(env.other.apiKey, [{ app_id: 'foreign', time: '2024-01-08T00:00:00Z' }]);
});

async function record(key: string, records: unknown[]) {
  const res = await env.app.inject({
    method: 'POST',
    url: '/internal/records/uninstalls',
    headers: bearer(key),
    payload: { records },
  });
  expect(res.statusCode, res.body).toBe(201);
}

async function series(query: string, key: string | null = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/kpi/uninstalls/data_series?${query}`,
    headers: { ...(key ? bearer(key) : {}), 'content-type': 'application/json' },
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

const asMap = (data: { time: string; uninstalls: number }[]) =>
  Object.fromEntries(data.map((d) => [d.time, d.uninstalls]));

describe('GET /kpi/uninstalls/data_series', () => {
  it('gives one entry a UTC day, oldest first, zero-filled, counted up to ending_at', async () => {
    const { status, body } = await series('length=7&ending_at=2024-01-10T12:00:00Z');
    expect(status).toBe(200);
    expect(body).toEqual({
      message: 'success',
      data: [
        { time: '2024-01-04', uninstalls: 2 },
        { time: '2024-01-05', uninstalls: 0 },
        { time: '2024-01-06', uninstalls: 3 },
        { time: '2024-01-07', uninstalls: 0 },
        { time: '2024-01-08', uninstalls: 0 },
        { time: '2024-01-09', uninstalls: 1 },
        { time: '2024-01-10', uninstalls: 5 },
      ],
    });
  });

  it('reads a date alone as the whole day, and a zone-less time as UTC', async () => {
    const dateOnly = await series('length=2&ending_at=2024-01-10');
    expect(asMap(dateOnly.body.data)).toEqual({ '2024-01-09': 1, '2024-01-10': 11 });
    const zoneless = await series('length=1&ending_at=2024-01-10T00:00:00');
    expect(zoneless.body.data).toEqual([{ time: '2024-01-10', uninstalls: 4 }]);
  });

  it('places ending_at with an offset on its UTC day (+ encoded, unencoded, and the -5:00 form)', async () => {
    // 04:59:59.999 at +05:00 is the last millisecond of the 9th in UTC; 05:00 at +05:00 is midnight of the 10th.
    const encoded = await series(`length=2&ending_at=${encodeURIComponent('2024-01-10T04:59:59.999+05:00')}`);
    expect(asMap(encoded.body.data)).toEqual({ '2024-01-08': 0, '2024-01-09': 1 });
    const unencoded = await series('length=2&ending_at=2024-01-10T04:59:59.999+05:00');
    expect(unencoded.body).toEqual(encoded.body);
    const midnight = await series('length=2&ending_at=2024-01-10T05:00:00%2B0500');
    expect(asMap(midnight.body.data)).toEqual({ '2024-01-09': 1, '2024-01-10': 4 });
    // 06:59 at -5:00 is 11:59 UTC on the 10th: before the 12:00 android uninstall.
    const negative = await series('length=1&ending_at=2024-01-10T06:59:59-5:00');
    expect(negative.body.data).toEqual([{ time: '2024-01-10', uninstalls: 4 }]);
  });

  it('filters by app_id', async () => {
    const ios = await series('length=7&ending_at=2024-01-10T23:59:59Z&app_id=ios');
    expect(asMap(ios.body.data)).toEqual({
      '2024-01-04': 2,
      '2024-01-05': 0,
      '2024-01-06': 0,
      '2024-01-07': 0,
      '2024-01-08': 0,
      '2024-01-09': 1,
      '2024-01-10': 4,
    });
    const android = await series('length=7&ending_at=2024-01-10T23:59:59Z&app_id=android');
    expect(android.body.data.reduce((n: number, d: { uninstalls: number }) => n + d.uninstalls, 0)).toBe(10);
  });

  it('ends today by default, and takes 100 days', async () => {
    const today = await series('length=1');
    expect(today.body.data).toEqual([{ time: utcDay(new Date()), uninstalls: 2 }]);
    const long = await series('length=100&ending_at=2024-01-10T23:59:59Z');
    expect(long.body.data).toHaveLength(100);
    expect(long.body.data[0].time).toBe('2023-10-03');
    expect(long.body.data.at(-1).time).toBe('2024-01-10');
    expect(long.body.data.reduce((n: number, d: { uninstalls: number }) => n + d.uninstalls, 0)).toBe(22);
  });

  it("refuses an app_id the workspace does not have (unknown or another workspace's) with a 400", async () => {
    for (const appId of ['nope', 'foreign']) {
      const { status, body } = await series(`length=7&app_id=${appId}`);
      expect(status).toBe(400);
      expect(body.message).toBe(`Invalid app_id: no app ${JSON.stringify(appId)} in this workspace`);
    }
  });

  it.each([
    ['', /length is required/],
    ['length=0', /length must be an integer from 1 to 100/],
    ['length=101', /length must be an integer from 1 to 100/],
    ['length=1.5', /length/],
    ['length=seven', /length/],
    ['length=7&length=8', /length/],
    ['length=7&ending_at=yesterday', /ending_at must be an ISO 8601 time/],
    ['length=7&ending_at=2024-02-30T00:00:00Z', /ending_at/],
    ['length=7&ending_at=2024-01-10T24:00:00Z', /ending_at/],
    ['length=7&app_id=', /app_id must not be empty/],
    [`length=7&app_id=${'a'.repeat(256)}`, /255/],
  ])('refuses %s', async (query, message) => {
    const { status, body } = await series(query);
    expect(status).toBe(400);
    expect(body.message).toMatch(message);
  });

  it('needs a key with kpi.uninstalls.data_series', async () => {
    const missing = await series('length=7', null);
    expect(missing.status).toBe(401);
    const bare = await series('length=7', env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('kpi.uninstalls.data_series');
    const ok = await series('length=7');
    expect(Number(ok.headers['x-ratelimit-limit'])).toBe(250000);
  });
});
