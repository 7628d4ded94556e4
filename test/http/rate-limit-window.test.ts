import { randomUUID } from 'node:crypto';
import { afterAll, afterEach, beforeAll, describe, expect, inject, it } from 'vitest';
import { RateLimiter, type RateLimitResult, type RateLimitRule } from '../../src/platform/auth/rate-limit.js';
import { loadConfig } from '../../src/platform/config.js';
import { createRedis, scanTargets, type Redis } from '../../src/platform/redis.js';
import { createTestEnv } from '../helpers/context.js';
import { bearer, seedWorkspace } from '../helpers/seed.js';

let redis: Redis;
const prefixes: string[] = [];
const config = loadConfig({});

beforeAll(async () => {
  // The run's Redis Cluster under `npm run test:cluster`, else the shared Redis.
  redis = createRedis({
    REDIS_URL: process.env.REDIS_URL ?? 'redis://127.0.0.1:6379',
    REDIS_CLUSTER_NODES: inject('redisClusterNodes'),
  });
  // A producer connection fails fast instead of queueing: wait until it is up.
  if (redis.status !== 'ready') await new Promise((resolve) => redis.once('ready', resolve));
});
afterEach(async () => {
  for (const prefix of prefixes.splice(0)) {
    for (const node of scanTargets(redis)) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', `${prefix}:*`, 'COUNT', 1000);
        cursor = next;
        // One key at a time: on a cluster the keys of a prefix without a hash tag lie in different slots.
        for (const key of keys) await node.unlink(key);
      } while (cursor !== '0');
    }
  }
});
afterAll(() => redis?.disconnect());

/** A limiter with a key prefix of its own, whose keys are deleted after the test. */
function limiter(): RateLimiter {
  const prefix = `test-rl-${randomUUID()}`;
  prefixes.push(prefix);
  return new RateLimiter(redis, prefix, config);
}

const rule = (limit: number, windowSeconds = 60): RateLimitRule => ({
  bucket: 'b',
  scope: 'workspace',
  windowSeconds,
  limit: () => limit,
});
const ROUTE = 'GET /things';
const SCOPE = 'ws-1';

/** The start of a 60 s (and 3600 s) window of the old fixed-window counter, in the recent past. */
const T0 = Math.floor(Date.now() / 3_600_000) * 3_600_000;

async function hits(rl: RateLimiter, r: RateLimitRule, n: number, nowMs: number): Promise<RateLimitResult[]> {
  const out: RateLimitResult[] = [];
  for (let i = 0; i < n; i++) out.push(await rl.hit(r, SCOPE, ROUTE, nowMs));
  return out;
}
const allowedOf = (results: RateLimitResult[]) => results.filter((r) => r.allowed).length;

/** Seeded, so that a failure can be replayed. */
function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

describe('the sliding window', () => {
  it('lets no more than the limit through across a window boundary (50 at 59.5 s, 50 at 60.3 s)', async () => {
    const rl = limiter();
    const r = rule(50);
    const before = await hits(rl, r, 50, T0 + 59_500);
    const after = await hits(rl, r, 50, T0 + 60_300);
    expect(allowedOf(before)).toBe(50);
    expect(allowedOf(after)).toBe(0);
  });

  it.each([
    [60, 20, 1],
    [60, 20, 2],
    [60, 7, 3],
    [3600, 20, 4],
    [3600, 13, 5],
  ])(
    'over random bursts, no rolling %i s window holds more than %i allowed requests (seed %i)',
    async (windowSeconds, limit, seed) => {
      const rl = limiter();
      const r = rule(limit, windowSeconds);
      const W = windowSeconds * 1000;
      const g = W / 60;
      const random = mulberry32(seed);
      const times: number[] = [];
      for (let burst = 0; burst < 60; burst++) {
        const start = T0 + Math.floor(random() * 6 * W);
        const spread = Math.floor(random() * 3 * g);
        const size = 1 + Math.floor(random() * 15);
        for (let i = 0; i < size; i++) times.push(start + Math.floor(random() * spread));
      }
      times.sort((a, b) => a - b);
      const seen: { t: number; allowed: boolean }[] = [];
      for (const t of times) {
        const res = await rl.hit(r, SCOPE, ROUTE, t);
        seen.push({ t, allowed: res.allowed });
        expect(res.limit).toBe(limit);
        expect(res.remaining).toBeGreaterThanOrEqual(0);
        expect(res.remaining).toBeLessThanOrEqual(limit);
        expect(Number.isInteger(res.reset)).toBe(true);
        expect(res.reset).toBeGreaterThan(t / 1000);
        expect(res.reset).toBeLessThanOrEqual(Math.ceil((t + W + g) / 1000));
        if (!res.allowed) expect(res.retryAfter).toBeGreaterThanOrEqual(1);
      }
      const allowed = seen.filter((s) => s.allowed).map((s) => s.t);
      expect(allowed.length).toBeGreaterThan(limit);
      // The busiest rolling window (closed at both ends) starts at an allowed request.
      for (let i = 0, j = 0; i < allowed.length; i++) {
        while (j < allowed.length && allowed[j]! <= allowed[i]! + W) j++;
        expect(j - i, `rolling window from ${allowed[i]! - T0} ms`).toBeLessThanOrEqual(limit);
      }
      // Not stricter than it says: a refusal means the limit was reached within the last W + g.
      for (const s of seen.filter((x) => !x.allowed)) {
        expect(allowed.filter((t) => t > s.t - W - g && t <= s.t).length).toBeGreaterThanOrEqual(limit);
      }
    },
  );

  it('allows requests again once the old ones leave the window, at t + W + g and not at the next fixed window', async () => {
    const rl = limiter();
    const r = rule(50);
    expect(allowedOf(await hits(rl, r, 50, T0 + 30_000))).toBe(50);
    expect((await rl.hit(r, SCOPE, ROUTE, T0 + 61_000)).allowed).toBe(false);
    expect((await rl.hit(r, SCOPE, ROUTE, T0 + 90_999)).allowed).toBe(false);
    const again = await hits(rl, r, 51, T0 + 30_000 + 60_000 + 1_000);
    expect(again.map((x) => x.allowed)).toEqual([...Array<boolean>(50).fill(true), false]);
  });

  it('does not count refused requests: a client retrying every second gets through once the window has moved on', async () => {
    const rl = limiter();
    const r = rule(5);
    expect(allowedOf(await hits(rl, r, 5, T0 + 500))).toBe(5);
    for (let t = T0 + 1_000; t <= T0 + 60_000; t += 1_000) {
      expect((await rl.hit(r, SCOPE, ROUTE, t)).allowed, `retry at ${t - T0} ms`).toBe(false);
    }
    const later = await hits(rl, r, 6, T0 + 61_000);
    expect(later.map((x) => x.allowed)).toEqual([true, true, true, true, true, false]);
    expect(later[0]!.remaining).toBe(4);
  });
});

describe('the headers it feeds', () => {
  it('Remaining falls by one per allowed request, across a fixed-window boundary too, and is 0 at the limit', async () => {
    const rl = limiter();
    const r = rule(5);
    const seen = [
      ...(await hits(rl, r, 3, T0 + 10_000)),
      await rl.hit(r, SCOPE, ROUTE, T0 + 59_000),
      await rl.hit(r, SCOPE, ROUTE, T0 + 60_500),
    ];
    expect(seen.map((x) => [x.allowed, x.limit, x.remaining])).toEqual([
      [true, 5, 4],
      [true, 5, 3],
      [true, 5, 2],
      [true, 5, 1],
      [true, 5, 0],
    ]);
  });

  it('Reset is when Remaining next grows (the oldest counted sub-window leaving), within now + W + g', async () => {
    const rl = limiter();
    const r = rule(5);
    const first = await rl.hit(r, SCOPE, ROUTE, T0 + 10_400);
    // The sub-window [10 s, 11 s) stops being counted at 11 s + W.
    expect(first.reset).toBe(T0 / 1000 + 71);
    const second = await rl.hit(r, SCOPE, ROUTE, T0 + 50_000);
    expect(second.reset).toBe(T0 / 1000 + 71);
    expect(second.remaining).toBe(3);
    // Just before Reset nothing has left the window; at Reset the first request has.
    expect((await rl.hit(r, SCOPE, ROUTE, T0 + 70_999)).remaining).toBe(2);
    const atReset = await rl.hit(r, SCOPE, ROUTE, T0 + 71_000);
    expect(atReset.remaining).toBe(2);
    expect(atReset.reset).toBe(T0 / 1000 + 111);
  });

  it('Retry-After on refusal is at least 1 s and a request then fits; one second earlier it does not', async () => {
    const rl = limiter();
    const r = rule(5);
    await hits(rl, r, 2, T0 + 10_000);
    await hits(rl, r, 3, T0 + 40_000);
    const refused = await rl.hit(r, SCOPE, ROUTE, T0 + 61_000);
    expect(refused.allowed).toBe(false);
    expect(refused.remaining).toBe(0);
    expect(refused.retryAfter).toBe(10);
    expect(refused.reset).toBe(T0 / 1000 + 71);
    const now = T0 + 61_000;
    expect((await rl.hit(r, SCOPE, ROUTE, now + (refused.retryAfter - 1) * 1000)).allowed).toBe(false);
    const retried = await hits(rl, r, 3, now + refused.retryAfter * 1000);
    // The two requests of 10 s left together: two fit, not three.
    expect(retried.map((x) => x.allowed)).toEqual([true, true, false]);
    expect(retried[2]!.retryAfter).toBe(30);
  });
});

describe('through the app', () => {
  it('answers 429 with Retry-After and the three X-RateLimit headers after the limit, resetting a window after the first request', async () => {
    const env = await createTestEnv({ RATE_LIMIT_PREFERENCE_CENTER_PER_MINUTE: '3' });
    try {
      const ws = await seedWorkspace(env.ctx.pool);
      const get = () =>
        env.app.inject({ method: 'GET', url: '/preference_center/v1/list', headers: bearer(ws.apiKey) });
      const started = Date.now();
      const ok = [await get(), await get(), await get()];
      expect(ok.map((r) => [r.statusCode, r.headers['x-ratelimit-limit'], r.headers['x-ratelimit-remaining']])).toEqual(
        [
          [200, '3', '2'],
          [200, '3', '1'],
          [200, '3', '0'],
        ],
      );
      const over = await get();
      const ended = Date.now();
      expect(over.statusCode).toBe(429);
      expect(over.json().message).toMatch(/Rate limit of 3 requests per minute exceeded/);
      expect(over.headers['x-ratelimit-limit']).toBe('3');
      expect(over.headers['x-ratelimit-remaining']).toBe('0');
      const retryAfter = Number(over.headers['retry-after']);
      const reset = Number(over.headers['x-ratelimit-reset']);
      expect(Number.isInteger(retryAfter)).toBe(true);
      // The first request leaves the window 60 to 61 s after it was made (1 s sub-windows), not at the minute's end.
      expect(reset).toBeGreaterThanOrEqual(Math.floor(started / 1000) + 60);
      expect(reset).toBeLessThanOrEqual(Math.ceil(ended / 1000) + 61);
      expect(retryAfter).toBeGreaterThanOrEqual(59);
      expect(retryAfter).toBeLessThanOrEqual(61);
      expect(Math.abs(reset - (ended / 1000 + retryAfter))).toBeLessThanOrEqual(2);
    } finally {
      await env.close();
    }
  });
});
