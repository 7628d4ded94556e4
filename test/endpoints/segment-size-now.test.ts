import { beforeAll, describe, expect, it } from 'vitest';
import { SizeNow } from '../../src/profiles/segments/sizes.js';
import type { SegmentFilter } from '../../src/profiles/segments/filter.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

// Today's point of /segments/data_series counts the workspace's profiles: at most once in
// SEGMENT_SIZE_NOW_MAX_AGE_SECONDS per segment and API process, callers meanwhile sharing the count.
const env = useTestEnv({ workspaces: ['ws'] });
const vip: SegmentFilter = { custom_attribute: 'vip', op: 'eq', value: true };
let segmentId = '';

async function addVips(prefix: string, n: number) {
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, custom_attributes)
     SELECT $1, $2 || g, $2 || g, g, '{"vip": true}' FROM generate_series(1, $3::int) g`,
    [env.ws.workspaceId, prefix, n],
  );
}

async function todaySize(): Promise<number> {
  const res = await env.app.inject({
    method: 'GET',
    url: '/segments/data_series?segment_id=vips&length=1',
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
  });
  expect(res.statusCode).toBe(200);
  return (res.json() as { data: { size: number }[] }).data[0]!.size;
}

beforeAll(async () => {
  const { rows } = await env.ctx.pool.query<{ id: string }>(
    `INSERT INTO segments (workspace_id, api_id, name, filter) VALUES ($1, 'vips', 'VIPs', $2) RETURNING id`,
    [env.ws.workspaceId, JSON.stringify(vip)],
  );
  segmentId = rows[0]!.id;
  await addVips('a', 2);
});

describe("today's segment size", () => {
  it('is counted once in the window, shared by callers at once and after, and counted afresh after it', async () => {
    const sizes = new SizeNow(60);
    const t0 = Date.now();
    const at = (s: number) => t0 + s * 1000;
    const first = await Promise.all(
      [1, 2, 3].map(() => sizes.get(env.ctx.pool, env.ws.workspaceId, segmentId, vip, at(0))),
    );
    expect(first).toEqual([2, 2, 2]);
    await addVips('b', 3);
    expect(await sizes.get(env.ctx.pool, env.ws.workspaceId, segmentId, vip, at(59))).toBe(2);
    expect(await sizes.get(env.ctx.pool, env.ws.workspaceId, segmentId, vip, at(60))).toBe(5);
    // An edited filter is counted at once.
    const nobody: SegmentFilter = { custom_attribute: 'vip', op: 'eq', value: false };
    expect(await sizes.get(env.ctx.pool, env.ws.workspaceId, segmentId, nobody, at(61))).toBe(0);
  });

  it('with a window of 0, is counted on every call', async () => {
    const sizes = new SizeNow(0);
    const before = await sizes.get(env.ctx.pool, env.ws.workspaceId, segmentId, vip);
    await addVips('c', 1);
    expect(await sizes.get(env.ctx.pool, env.ws.workspaceId, segmentId, vip)).toBe(before + 1);
  });

  it('through the API, answers the count of the window (the default 60 s) until it ends', async () => {
    const size = await todaySize();
    await addVips('d', 4);
    expect(await todaySize()).toBe(size);
  });
});
