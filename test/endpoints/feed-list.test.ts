import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { FeedListResponse } from '../../src/routes/feed.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

const env = useTestEnv({ workspaces: ['ws', 'exactly100', 'exactly101'] });

type Card = z.infer<typeof FeedListResponse>['cards'][number];

beforeAll(async () => {
  // 250 cards of the three types; every 25th archived; ten share each creation time.
  await env.ctx.pool.query(
    `INSERT INTO feed_cards (workspace_id, api_id, type, title, tags, archived, created_at)
     SELECT $1, 'card-' || lpad(g::text, 4, '0'), (ARRAY['NewsItem', 'CaptionedImage', 'Banner'])[g % 3 + 1], 'Card ' || g,
            CASE WHEN g % 2 = 0 THEN ARRAY['even'] ELSE '{}'::text[] END, g % 25 = 0,
            timestamptz '2026-01-01' + ((g / 10) || ' seconds')::interval
       FROM generate_series(1, 250) g`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO feed_cards (workspace_id, api_id, type, title, created_at)
     SELECT w, 'k' || g, 'Banner', 'K' || g, timestamptz '2026-01-01' FROM unnest($1::uuid[], $2::int[]) AS x(w, n), generate_series(1, x.n) g`,
    [
      [env.exactly100.workspaceId, env.exactly101.workspaceId],
      [100, 101],
    ],
  );
});

async function list(query: string, key: string | null = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/feed/list${query}`,
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
    sizes.push(body.cards.length);
    ids.push(...body.cards.map((c: Card) => c.id));
    if (body.cards.length < 100) break;
  }
  return { ids, sizes };
}

describe('GET /feed/list', () => {
  it('pages 100 at a time over unarchived cards, never repeating or skipping ties', async () => {
    const { ids, sizes } = await walk('');
    expect(sizes).toEqual([100, 100, 40]);
    expect(new Set(ids).size).toBe(240);
    expect(ids).not.toContain('card-0025');
  });

  it('lists archived cards with include_archived=true', async () => {
    const { ids, sizes } = await walk('&include_archived=true');
    expect(sizes).toEqual([100, 100, 50]);
    expect(ids).toContain('card-0025');
  });

  it('handles exactly 100 and 101 entries at the page boundary', async () => {
    expect((await walk('', env.exactly100.apiKey)).sizes).toEqual([100, 0]);
    const over = await walk('', env.exactly101.apiKey);
    expect(over.sizes).toEqual([100, 1]);
    expect(new Set(over.ids).size).toBe(101);
  });

  it('sorts by creation time both ways, descending being the exact reverse', async () => {
    const asc = await walk('&include_archived=true');
    const desc = await walk('&include_archived=true&sort_direction=desc');
    expect(desc.ids).toEqual([...asc.ids].reverse());
    const groups = asc.ids.map((id) => Math.floor(Number(id.slice(5)) / 10));
    expect([...groups].sort((a, b) => a - b)).toEqual(groups);
  });

  it('returns the spec entry shape', async () => {
    const { body } = await list('?sort_direction=desc');
    expect(body.message).toBe('success');
    const byId = new Map(body.cards.map((c: Card) => [c.id, c]));
    expect(byId.get('card-0249')).toEqual({ id: 'card-0249', type: 'NewsItem', title: 'Card 249', tags: [] });
    expect(byId.get('card-0248')).toEqual({ id: 'card-0248', type: 'Banner', title: 'Card 248', tags: ['even'] });
    expect(byId.get('card-0247')).toEqual({ id: 'card-0247', type: 'CaptionedImage', title: 'Card 247', tags: [] });
  });

  it.each([
    ['page=-1', /page must be an integer of 0 or more/],
    ['page=2.5', /page/],
    ['page=x', /page/],
    ['sort_direction=ascending', /sort_direction/],
    ['include_archived=1', /include_archived/],
  ])('refuses %s', async (query, message) => {
    const { status, body } = await list(`?${query}`);
    expect(status).toBe(400);
    expect(body.message).toMatch(message);
  });

  it('needs a key with feed.list', async () => {
    expect((await list('', null)).status).toBe(401);
    const bare = await list('', env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('feed.list');
    expect(Number((await list('')).headers['x-ratelimit-limit'])).toBe(250000);
  });
});
