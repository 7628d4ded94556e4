import { beforeAll, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv, useTestEnv } from '../helpers/context.js';
import { seedWorkspace } from '../helpers/seed.js';
import { callApi } from '../helpers/http.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO preference_centers (workspace_id, api_id, name, title, page_html, confirmation_page_html, redirect_page_html, options, created_at, updated_at)
     VALUES ($1, 'pc-news', 'Newsletter', 'Your emails', '<html>prefs</html>', '<html>thanks</html>', NULL,
             '{"meta-viewport-content": "width=device-width, initial-scale=2"}', '2026-01-02T00:00:00Z', '2026-01-05T10:30:00Z'),
            ($1, 'pc-plain', 'Plain', 'Plain title', '<p>p</p>', '<p>c</p>', '<p>redirect</p>', '{}', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z'),
            ($2, 'pc-foreign', 'Foreign', '', '', '', NULL, '{}', '2026-01-01T00:00:00Z', '2026-01-01T00:00:00Z')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
});

const get = (app: TestEnv['app'], url: string, key: string | null = env.ws.apiKey) =>
  callApi(app, 'GET', url, { key: key || null });

describe('GET /preference_center/v1/list', () => {
  it("lists the workspace's centers, oldest first, with the list fields only", async () => {
    const { status, body } = await get(env.app, '/preference_center/v1/list?');
    expect(status).toBe(200);
    expect(body).toEqual({
      preference_centers: [
        {
          name: 'Plain',
          preference_center_api_id: 'pc-plain',
          created_at: '2026-01-01T00:00:00.000Z',
          updated_at: '2026-01-01T00:00:00.000Z',
        },
        {
          name: 'Newsletter',
          preference_center_api_id: 'pc-news',
          created_at: '2026-01-02T00:00:00.000Z',
          updated_at: '2026-01-05T10:30:00.000Z',
        },
      ],
    });
  });

  it('is empty for a workspace without centers', async () => {
    const empty = await seedWorkspace(env.ctx.pool);
    expect((await get(env.app, '/preference_center/v1/list', empty.apiKey)).body).toEqual({ preference_centers: [] });
  });
});

describe('GET /preference_center/v1/{preferenceCenterExternalID}', () => {
  it('returns every detail field', async () => {
    const { status, body } = await get(env.app, '/preference_center/v1/pc-news');
    expect(status).toBe(200);
    expect(body).toEqual({
      name: 'Newsletter',
      preference_center_api_id: 'pc-news',
      created_at: '2026-01-02T00:00:00.000Z',
      updated_at: '2026-01-05T10:30:00.000Z',
      preference_center_title: 'Your emails',
      preference_center_page_html: '<html>prefs</html>',
      confirmation_page_html: '<html>thanks</html>',
      redirect_page_html: null,
      preference_center_options: { 'meta-viewport-content': 'width=device-width, initial-scale=2' },
      state: 'active',
    });
  });

  it('always gives meta-viewport-content, defaulting it when the center has none', async () => {
    const { body } = await get(env.app, '/preference_center/v1/pc-plain');
    expect(body.redirect_page_html).toBe('<p>redirect</p>');
    expect(body.preference_center_options).toEqual({ 'meta-viewport-content': 'width=device-width, initial-scale=1' });
  });

  it("answers 404 for an unknown id and for another workspace's", async () => {
    for (const id of ['nope', 'pc-foreign']) {
      const { status, body } = await get(env.app, `/preference_center/v1/${id}`);
      expect(status).toBe(404);
      expect(body).toEqual({ message: `Preference center not found: ${JSON.stringify(id)}` });
    }
  });

  it('refuses an id over 255 characters', async () => {
    const { status, body } = await get(env.app, `/preference_center/v1/${'p'.repeat(256)}`);
    expect(status).toBe(400);
    expect(body.message).toMatch(/255/);
  });
});

describe('credentials and limits', () => {
  it.each([
    ['/preference_center/v1/list', 'preference_center.list'],
    ['/preference_center/v1/pc-news', 'preference_center.get'],
  ])('%s needs a key with %s', async (url, permission) => {
    expect((await get(env.app, url, null)).status).toBe(401);
    const bare = await get(env.app, url, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain(permission);
    const ok = await get(env.app, url);
    expect(Number(ok.headers['x-ratelimit-limit'])).toBe(1000);
  });

  it('list and detail share one per-workspace budget a minute; over it, 429 with Retry-After and a JSON body', async () => {
    const small = await createTestEnv({ RATE_LIMIT_PREFERENCE_CENTER_PER_MINUTE: '3' });
    try {
      const a = await seedWorkspace(small.ctx.pool);
      const b = await seedWorkspace(small.ctx.pool);
      const statuses = [];
      for (const url of [
        '/preference_center/v1/list',
        '/preference_center/v1/x',
        '/preference_center/v1/list',
        '/preference_center/v1/x',
      ]) {
        statuses.push((await get(small.app, url, a.apiKey)).status);
      }
      // Refused requests count too: the 404 is the second of three allowed.
      expect(statuses.slice(0, 3)).toEqual([200, 404, 200]);
      const limited = await get(small.app, '/preference_center/v1/list', a.apiKey);
      expect(limited.status).toBe(429);
      expect(limited.body.message).toMatch(/Rate limit of 3 requests per minute/);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect(limited.headers['x-ratelimit-remaining']).toBe('0');
      // Another workspace has its own budget.
      expect((await get(small.app, '/preference_center/v1/list', b.apiKey)).status).toBe(200);
    } finally {
      await small.close();
    }
  });
});
