import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { SegmentListResponse } from '../../src/routes/segments.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer, seedWorkspace } from '../helpers/seed.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

type Segment = z.infer<typeof SegmentListResponse>['segments'][number];

beforeAll(async () => {
  // 250 segments with a shared creation time every ten, to prove ties never repeat or skip across pages.
  await env.ctx.pool.query(
    `INSERT INTO segments (workspace_id, api_id, name, tags, archived, created_at)
     SELECT $1, 'seg-' || lpad(g::text, 4, '0'), 'Segment ' || g, ARRAY['t' || (g % 3)], g % 50 = 0,
            timestamptz '2026-01-01' + ((g / 10) || ' minutes')::interval
       FROM generate_series(1, 250) g`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO segments (workspace_id, api_id, name) VALUES ($1, 'foreign', 'Other workspace')`,
    [env.other.workspaceId],
  );
});

async function page(query: string) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/segments/list${query}`,
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

describe('GET /segments/list', () => {
  it('pages 100 at a time over unarchived segments, never repeating or skipping ties', async () => {
    const seen: string[] = [];
    for (let p = 0; p < 4; p++) {
      const { status, body } = await page(`?page=${p}`);
      expect(status).toBe(200);
      expect(body.message).toBe('success');
      seen.push(...body.segments.map((s: Segment) => s.id));
      if (p < 2) expect(body.segments).toHaveLength(100);
    }
    expect(seen).toHaveLength(245);
    expect(new Set(seen).size).toBe(245);
    expect(seen).not.toContain('seg-0050');
    expect(seen).not.toContain('foreign');
  });

  it('returns the spec entry shape and sorts descending on request', async () => {
    const { body } = await page('?sort_direction=desc');
    expect(body.segments[0]).toEqual({
      id: 'seg-0249',
      name: 'Segment 249',
      analytics_tracking_enabled: false,
      tags: ['t0'],
    });
    const asc = await page('?');
    expect(asc.body.segments[0].id).toBe('seg-0001');
  });

  it('handles exactly 100 and 101 segments at the page boundary', async () => {
    const sizes: Record<number, number[]> = {};
    for (const n of [100, 101]) {
      const w = await seedWorkspace(env.ctx.pool);
      await env.ctx.pool.query(
        `INSERT INTO segments (workspace_id, api_id, name, created_at) SELECT $1, 's' || g, 'S' || g, timestamptz '2026-01-01' FROM generate_series(1, $2::int) g`,
        [w.workspaceId, n],
      );
      const ids: string[] = [];
      sizes[n] = [];
      for (const p of [0, 1]) {
        const res = await env.app.inject({ method: 'GET', url: `/segments/list?page=${p}`, headers: bearer(w.apiKey) });
        const list = res.json().segments.map((x: Segment) => x.id);
        sizes[n]!.push(list.length);
        ids.push(...list);
      }
      expect(new Set(ids).size).toBe(n);
    }
    expect(sizes).toEqual({ 100: [100, 0], 101: [100, 1] });
  });

  it('never lists archived segments, whatever include_archived says', async () => {
    const seen: string[] = [];
    for (let p = 0; p < 3; p++)
      seen.push(...(await page(`?page=${p}&include_archived=true`)).body.segments.map((s: Segment) => s.id));
    expect(seen).toHaveLength(245);
    expect(seen).not.toContain('seg-0100');
  });

  it('sorts descending as the exact reverse of ascending', async () => {
    const walk = async (dir: string) => {
      const ids: string[] = [];
      for (let p = 0; p < 3; p++)
        ids.push(...(await page(`?page=${p}&sort_direction=${dir}`)).body.segments.map((s: Segment) => s.id));
      return ids;
    };
    expect(await walk('desc')).toEqual((await walk('asc')).reverse());
  });

  it('refuses bad parameters with a clear 400', async () => {
    for (const q of ['?page=-1', '?page=1.5', '?page=abc', '?page=', '?page=1e2', '?sort_direction=up']) {
      const { status, body } = await page(q);
      expect(status, q).toBe(400);
      expect(body.message, q).toMatch(/page|sort_direction/);
    }
  });

  it('sends rate-limit headers', async () => {
    const { headers } = await page('');
    expect(Number(headers['x-ratelimit-limit'])).toBe(250000);
    expect(Number(headers['x-ratelimit-remaining'])).toBeLessThan(250000);
    expect(Number(headers['x-ratelimit-reset'])).toBeGreaterThan(Date.now() / 1000);
  });
});
