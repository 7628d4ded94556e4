import { beforeAll, describe, expect, it } from 'vitest';
import { workspaceStatsJob } from '../../jobs/workspace-stats.js';
import { DAY_MS, utcDay } from '../../src/platform/lib/iso-time.js';
import { WORKSPACE_STATS_QUEUE } from '../../src/platform/queues/workspace-stats.js';
import { snapshotSegmentSizes } from '../../src/profiles/segments/sizes.js';
import { waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

// The days are taken when the set-up runs (not when the module loads, which a slow set-up may leave on the day before),
// and all from one instant: the recorded sizes, the service's "today" and every expectation fall on the same UTC day.
let setUpAt = 0;
const day = (offset: number) => utcDay(new Date(setUpAt + offset * DAY_MS));
let today = '';
let yesterday = '';
let threeDaysAgo = '';

/** Waits until UTC midnight has passed when less than `marginMs` is left of the day: the file's tests run in a day. */
async function clearOfMidnight(marginMs: number): Promise<void> {
  const left = DAY_MS - (Date.now() % DAY_MS);
  if (left < marginMs) await new Promise((r) => setTimeout(r, left + 1_000));
}

async function addProfiles(workspaceId: string, prefix: string, n: number, vip: boolean) {
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, custom_attributes)
     SELECT $1, $2 || g, $2 || g, g, jsonb_build_object('vip', $4::boolean) FROM generate_series(1, $3::int) g`,
    [workspaceId, prefix, n, vip],
  );
}

async function series(query: string, key: string | null = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/segments/data_series?${query}`,
    headers: { ...(key ? bearer(key) : {}), 'content-type': 'application/json' },
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

beforeAll(async () => {
  await clearOfMidnight(60_000);
  setUpAt = Date.now();
  [today, yesterday, threeDaysAgo] = [day(0), day(-1), day(-3)];
  const vip = '{"custom_attribute": "vip", "op": "eq", "value": true}';
  await env.ctx.pool.query(
    `INSERT INTO segments (workspace_id, api_id, name, filter, archived)
     VALUES ($1, 'vip', 'VIPs', $3, false), ($1, 'old-vip', 'Archived VIPs', $3, true), ($2, 'foreign', 'VIPs', $3, false)`,
    [env.ws.workspaceId, env.other.workspaceId, vip],
  );
  await addProfiles(env.other.workspaceId, 'o', 7, true);
  // Three days ago: 2 members. Yesterday: 3, then 4 (a later pass of the same day replaces the earlier one).
  await addProfiles(env.ws.workspaceId, 'a', 2, true);
  await addProfiles(env.ws.workspaceId, 'n', 2, false);
  expect(await snapshotSegmentSizes(env.ctx.pool, env.ws.workspaceId, threeDaysAgo)).toBe(1);
  await addProfiles(env.ws.workspaceId, 'b', 1, true);
  await snapshotSegmentSizes(env.ctx.pool, env.ws.workspaceId, yesterday);
  await addProfiles(env.ws.workspaceId, 'c', 1, true);
  await snapshotSegmentSizes(env.ctx.pool, env.ws.workspaceId, yesterday);
  // Across the day change, membership changes: two members leave, one profile joins.
  await env.ctx.pool.query(
    `UPDATE profiles SET custom_attributes = '{"vip": false}' WHERE workspace_id = $1 AND external_id IN ('a1', 'b1')`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `UPDATE profiles SET custom_attributes = '{"vip": true}' WHERE workspace_id = $1 AND external_id = 'n1'`,
    [env.ws.workspaceId],
  );
});

describe('GET /segments/data_series', () => {
  it('gives the recorded size of past days and the size now for today, leaving out days never counted', async () => {
    const { status, body } = await series('segment_id=vip&length=5');
    expect(status).toBe(200);
    expect(body).toEqual({
      message: 'success',
      data: [
        { time: threeDaysAgo, size: 2 },
        { time: yesterday, size: 4 },
        { time: today, size: 3 },
      ],
    });
  });

  it('ends on the UTC day of ending_at: a date, a time, and a time whose offset puts it on the day before', async () => {
    const expected = [
      { time: threeDaysAgo, size: 2 },
      { time: yesterday, size: 4 },
    ];
    expect((await series(`segment_id=vip&length=4&ending_at=${yesterday}`)).body.data).toEqual(expected);
    expect((await series(`segment_id=vip&length=4&ending_at=${yesterday}T23:59:59Z`)).body.data).toEqual(expected);
    // 00:30 at +01:00 is 23:30 UTC of the day before.
    const offset = await series(`segment_id=vip&length=4&ending_at=${encodeURIComponent(`${today}T00:30:00+01:00`)}`);
    expect(offset.body.data).toEqual(expected);
    expect((await series(`segment_id=vip&length=1&ending_at=${today}T00:00:00Z`)).body.data).toEqual([
      { time: today, size: 3 },
    ]);
  });

  it('answers the days in range only, and nothing for days still to come', async () => {
    expect((await series('segment_id=vip&length=2')).body.data).toEqual([
      { time: yesterday, size: 4 },
      { time: today, size: 3 },
    ]);
    expect((await series(`segment_id=vip&length=3&ending_at=${day(2)}`)).body.data).toEqual([{ time: today, size: 3 }]);
    expect((await series(`segment_id=vip&length=2&ending_at=${day(-4)}`)).body.data).toEqual([]);
    expect((await series('segment_id=vip&length=100')).body.data).toHaveLength(3);
  });

  it("records no size for archived segments, and another workspace's segment is its own", async () => {
    expect((await series('segment_id=old-vip&length=5')).body.data).toEqual([{ time: today, size: 3 }]);
    const foreign = await series('segment_id=foreign&length=1', env.other.apiKey);
    expect(foreign.body.data).toEqual([{ time: today, size: 7 }]);
  });

  it("is a 404 for an unknown segment or another workspace's", async () => {
    for (const id of ['nope', 'foreign']) {
      const { status, body } = await series(`segment_id=${id}&length=7`);
      expect(status).toBe(404);
      expect(body).toEqual({ message: `segment_id "${id}" does not name a segment of this workspace` });
    }
  });

  it.each([
    ['length=7', /segment_id is required/],
    ['segment_id=&length=7', /segment_id must not be empty/],
    ['segment_id=vip', /length is required/],
    ['segment_id=vip&length=0', /length must be an integer from 1 to 100/],
    ['segment_id=vip&length=101', /length must be an integer from 1 to 100/],
    ['segment_id=vip&length=1.5', /length/],
    ['segment_id=vip&length=7&length=8', /length/],
    ['segment_id=vip&length=7&ending_at=yesterday', /ending_at must be an ISO 8601 time/],
    ['segment_id=vip&length=7&ending_at=2024-02-30', /ending_at/],
    ['segment_id=nope&length=0', /length/],
  ])('refuses %s with a 400 naming the parameter', async (query, message) => {
    const { status, body } = await series(query);
    expect(status).toBe(400);
    expect(body.message).toMatch(message);
  });

  it('needs a key with segments.data_series', async () => {
    expect((await series('segment_id=vip&length=1', null)).status).toBe(401);
    const bare = await series('segment_id=vip&length=1', env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('segments.data_series');
    expect(Number((await series('segment_id=vip&length=1')).headers['x-ratelimit-limit'])).toBe(250000);
  });
});

describe('the workers take the sizes of the day', () => {
  it("a sweep queues a pass per workspace, which records today's size of each unarchived segment", async () => {
    env.startWorkers([workspaceStatsJob]);
    await env.ctx.queues.get(WORKSPACE_STATS_QUEUE).add('sweep', { sweep: true });
    const sizes = async () =>
      (
        await env.ctx.pool.query<{ api_id: string; size: number }>(
          `SELECT s.api_id, z.size FROM segment_sizes z JOIN segments s ON s.id = z.segment_id
            WHERE z.day = $1 ORDER BY s.api_id`,
          [today],
        )
      ).rows;
    await waitFor(async () => (await sizes()).length === 2);
    expect(await sizes()).toEqual([
      { api_id: 'foreign', size: 7 },
      { api_id: 'vip', size: 3 },
    ]);
  });
});
