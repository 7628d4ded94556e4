import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { CanvasListResponse } from '../../src/routes/canvas-list.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

const env = useTestEnv({ workspaces: ['ws', 'exactly100', 'exactly101'] });

type Canvas = z.infer<typeof CanvasListResponse>['canvases'][number];

/** n canvases; every 50th archived, every 7th stopped, every 11th a draft; ten share each creation time. */
async function seedCanvases(workspaceId: string, n: number) {
  await env.ctx.pool.query(
    `INSERT INTO canvases (workspace_id, api_id, name, tags, status, archived, created_at, last_edited)
     SELECT $1, 'cv-' || lpad(g::text, 4, '0'), 'Canvas ' || g, ARRAY['t' || (g % 3)],
            CASE WHEN g % 7 = 0 THEN 'stopped' WHEN g % 11 = 0 THEN 'draft' ELSE 'active' END,
            g % 50 = 0,
            timestamptz '2026-01-01' + ((g / 10) || ' minutes')::interval,
            timestamptz '2026-02-01' + (g || ' hours')::interval
       FROM generate_series(1, $2::int) g`,
    [workspaceId, n],
  );
}

beforeAll(async () => {
  await seedCanvases(env.ws.workspaceId, 250);
  // All unarchived in the small workspaces: 100 and 101 are about the page boundary.
  await env.ctx.pool.query(
    `INSERT INTO canvases (workspace_id, api_id, name, created_at)
     SELECT w, 'c' || g, 'C' || g, timestamptz '2026-01-01' FROM unnest($1::uuid[], $2::int[]) AS x(w, n), generate_series(1, x.n) g`,
    [
      [env.exactly100.workspaceId, env.exactly101.workspaceId],
      [100, 101],
    ],
  );
});

async function list(query: string, key: string | null = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/canvas/list${query}`,
    headers: { ...(key ? bearer(key) : {}), 'content-type': 'application/json' },
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

async function walk(query: string, key = env.ws.apiKey) {
  const ids: string[] = [];
  const sizes: number[] = [];
  for (let page = 0; page < 10; page++) {
    const { status, body } = await list(`?page=${page}${query}`, key);
    expect(status).toBe(200);
    sizes.push(body.canvases.length);
    ids.push(...body.canvases.map((c: Canvas) => c.id));
    if (body.canvases.length < 100) break;
  }
  return { ids, sizes };
}

describe('GET /canvas/list', () => {
  it('pages 100 at a time over unarchived canvases (stopped and drafts included), never repeating or skipping ties', async () => {
    const { ids, sizes } = await walk('');
    expect(sizes).toEqual([100, 100, 45]);
    expect(new Set(ids).size).toBe(245);
    expect(ids).not.toContain('cv-0050');
    expect(ids).toContain('cv-0007'); // stopped
    expect(ids).toContain('cv-0011'); // draft
  });

  it('lists archived canvases with include_archived=true', async () => {
    const { ids, sizes } = await walk('&include_archived=true');
    expect(sizes).toEqual([100, 100, 50]);
    expect(new Set(ids).size).toBe(250);
    const explicit = await walk('&include_archived=false');
    expect(explicit.sizes).toEqual([100, 100, 45]);
  });

  it('handles exactly 100 and 101 entries at the page boundary', async () => {
    expect((await walk('', env.exactly100.apiKey)).sizes).toEqual([100, 0]);
    const over = await walk('', env.exactly101.apiKey);
    expect(over.sizes).toEqual([100, 1]);
    expect(new Set(over.ids).size).toBe(101);
  });

  it('sorts by creation time both ways, descending being the exact reverse', async () => {
    const asc = await walk('&sort_direction=asc&include_archived=true');
    const desc = await walk('&sort_direction=desc&include_archived=true');
    expect(desc.ids).toEqual([...asc.ids].reverse());
    const numbers = asc.ids.map((id) => Math.floor(Number(id.slice(3)) / 10));
    expect([...numbers].sort((a, b) => a - b)).toEqual(numbers);
    expect(asc.ids[0]).toMatch(/^cv-000[1-9]$/);
    expect(desc.ids[0]).toBe('cv-0250');
  });

  it('returns the spec entry shape', async () => {
    const { body } = await list('?sort_direction=desc');
    expect(body.message).toBe('success');
    // The newest creation time holds cv-0240..cv-0249 (cv-0250 is archived); their order is the tiebreak's.
    expect(
      body.canvases
        .slice(0, 10)
        .map((c: Canvas) => c.id)
        .sort(),
    ).toEqual(Array.from({ length: 10 }, (_, i) => `cv-0${240 + i}`));
    expect(body.canvases.find((c: Canvas) => c.id === 'cv-0249')).toEqual({
      id: 'cv-0249',
      last_edited: '2026-02-11T09:00:00.000Z',
      name: 'Canvas 249',
      tags: ['t0'],
    });
  });

  it('keeps canvases edited after last_edit.time[gt], read as UTC without a zone', async () => {
    // cv-0240 was last edited at 2026-02-11T00:00:00Z; strictly after it leaves 241..249 (250 is archived).
    const { body } = await list('?last_edit.time[gt]=2026-02-11T00:00:00');
    expect(body.canvases.map((c: Canvas) => c.id).sort()).toEqual(
      Array.from({ length: 9 }, (_, i) => `cv-0${241 + i}`),
    );
    const zoned = await list(`?last_edit.time[gt]=${encodeURIComponent('2026-02-11T01:00:00+01:00')}`);
    expect(zoned.body.canvases).toEqual(body.canvases);
    const none = await list('?last_edit.time[gt]=2030-01-01T00:00:00');
    expect(none.body.canvases).toEqual([]);
  });

  it("never shows another workspace's canvases", async () => {
    const { ids } = await walk('', env.exactly100.apiKey);
    expect(ids.some((id) => id.startsWith('cv-'))).toBe(false);
  });

  it.each([
    ['page=-1', /page must be an integer of 0 or more/],
    ['page=1.5', /page/],
    ['page=abc', /page/],
    ['page=', /page/],
    ['page=1&page=2', /page/],
    ['sort_direction=up', /sort_direction must be 'asc' or 'desc'/],
    ['include_archived=yes', /include_archived: must be 'true' or 'false'/],
    ['last_edit.time[gt]=2026-13-01T00:00:00', /last_edit\.time\[gt\] must be an ISO 8601 time/],
    ['last_edit.time[gt]=last-week', /last_edit\.time\[gt\]/],
  ])('refuses %s', async (query, message) => {
    const { status, body } = await list(`?${query}`);
    expect(status).toBe(400);
    expect(body.message).toMatch(message);
  });

  it('ignores a body sent with the GET (clients send Content-Type: application/json everywhere), even a malformed one', async () => {
    const res = await env.app.inject({
      method: 'GET',
      url: '/canvas/list?page=2',
      headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
      payload: '{"page": ',
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().canvases).toHaveLength(45);
  });

  it('needs a key with canvas.list and counts against the default limit', async () => {
    expect((await list('', null)).status).toBe(401);
    const bare = await list('', env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('canvas.list');
    const ok = await list('');
    expect(Number(ok.headers['x-ratelimit-limit'])).toBe(250000);
    expect(Number(ok.headers['x-ratelimit-remaining'])).toBeLessThan(250000);
  });
});
