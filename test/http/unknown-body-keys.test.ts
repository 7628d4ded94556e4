import { beforeAll, describe, expect, it } from 'vitest';
import type { RouteEntry } from '../../src/platform/http/route-config.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment } from '../helpers/export-fixtures.js';
import { callApi, type Answer } from '../helpers/http.js';
import { ORIGIN, USER_SCHEMA } from '../helpers/scim.js';
import { bearer, createScimToken } from '../helpers/seed.js';

/**
 * A misspelt top-level key of a JSON body is refused with a 400 naming it, in the route's error format, and the
 * request changes nothing: `"purchase"` on /users/track used to answer 201 and lose the purchases, and
 * `"output_fromat"` on an export ran it as zip. `api_key`, the public API's legacy body credential, is ignored
 * everywhere. SCIM bodies keep RFC 7644's rule (attributes the service does not store are ignored).
 */

const env = useTestEnv({ workspaces: ['ws'] });
const TIME = '2026-01-01T00:00:00Z';

beforeAll(async () => {
  const pool = env.ctx.pool;
  await createSegment(pool, env.ws.workspaceId, 'seg-a');
  await pool.query(
    `INSERT INTO canvases (workspace_id, api_id, name, status, api_triggered) VALUES ($1, 'welcome', 'Welcome', 'active', true)`,
    [env.ws.workspaceId],
  );
  await pool.query(
    `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, 'dishes', '[{"name": "Name", "type": "string"}]')`,
    [env.ws.workspaceId],
  );
  await pool.query(`INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'ios-app', 'Sports')`, [
    env.ws.workspaceId,
  ]);
});

/** Every table of the test's schema: its row count and a hash of its rows. */
async function snapshot(): Promise<Record<string, string>> {
  const schema = env.config.DATABASE_SCHEMA;
  const { rows } = await env.ctx.pool.query<{ name: string }>(
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 ORDER BY 1`,
    [schema],
  );
  const out: Record<string, string> = {};
  for (const { name } of rows) {
    const r = await env.ctx.pool.query<{ n: number; h: string }>(
      `SELECT count(*)::int AS n, md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS h FROM "${schema}"."${name}" t`,
    );
    out[name] = `${r.rows[0]!.n} rows, ${r.rows[0]!.h}`;
  }
  return out;
}

const call = (method: 'POST' | 'PUT' | 'DELETE', url: string, body: unknown): Promise<Answer> =>
  callApi(env.app, method, url, { key: env.ws.apiKey, body });

/** What a refusal says, whatever the route's error format. */
const refusalText = (a: Answer): string =>
  String(a.body?.message === 'Invalid Request' ? a.body.errors?.[0]?.message : (a.body?.message ?? a.body?.error));

/**
 * A valid request of each route family, and the misspelling a newcomer makes in it. Each valid body is accepted
 * (and changes state) without the misspelt key, so a refusal can only come from the key.
 */
const CASES: Array<{ name: string; method: 'POST' | 'PUT'; url: string; valid: object; typo: string }> = [
  {
    name: 'track: purchase for purchases',
    method: 'POST',
    url: '/users/track',
    valid: { events: [{ external_id: 'u-1', name: 'opened', time: TIME }] },
    typo: 'purchase',
  },
  {
    name: 'export segment: output_fromat',
    method: 'POST',
    url: '/users/export/segment',
    valid: { segment_id: 'seg-a', fields_to_export: ['external_id'] },
    typo: 'output_fromat',
  },
  {
    name: 'export by ids: braze_id (service_id here)',
    method: 'POST',
    url: '/users/export/ids',
    valid: { external_ids: ['u-1'] },
    typo: 'braze_id',
  },
  {
    name: 'delete: user_alias for user_aliases',
    method: 'POST',
    url: '/users/delete',
    valid: { external_ids: ['u-9'] },
    typo: 'user_alias',
  },
  {
    name: 'alias new: aliases',
    method: 'POST',
    url: '/users/alias/new',
    valid: { user_aliases: [{ external_id: 'u-1', alias_name: 'a-1', alias_label: 'crm' }] },
    typo: 'aliases',
  },
  {
    name: 'email status: subscription',
    method: 'POST',
    url: '/email/status',
    valid: { email: 'someone@example.com', subscription_state: 'unsubscribed' },
    typo: 'subscription',
  },
  {
    name: 'template create: plain_text_body',
    method: 'POST',
    url: '/templates/email/create',
    valid: { template_name: 'Welcome', subject: 'Hi', body: '<p>Hi</p>' },
    typo: 'plain_text_body',
  },
  {
    name: 'canvas schedule create: recipient',
    method: 'POST',
    url: '/canvas/trigger/schedule/create',
    valid: {
      canvas_id: 'welcome',
      broadcast: true,
      schedule: { time: new Date(Date.now() + 30 * 86_400_000).toISOString() },
    },
    typo: 'recipient',
  },
  {
    name: 'catalog batch: item',
    method: 'PUT',
    url: '/catalogs/dishes/items',
    valid: { items: [{ id: 'soup', Name: 'Soup' }] },
    typo: 'item',
  },
  {
    name: 'live activity register: pushToken',
    method: 'POST',
    url: '/messages/live_activity/register',
    valid: {
      app_id: 'ios-app',
      activity_id: 'match-1',
      push_token: 'a'.repeat(64),
      content_state_shape: { score: 'number' },
    },
    typo: 'pushToken',
  },
  {
    name: 'internal records: record',
    method: 'POST',
    url: '/internal/records/hard_bounces',
    valid: { records: [{ email: 'bounced@example.com', time: TIME }] },
    typo: 'record',
  },
];

describe('an unknown top-level key', () => {
  for (const c of CASES) {
    it(`${c.name}: 400 naming the key, nothing changed`, async () => {
      const before = await snapshot();
      const res = await call(c.method, c.url, { ...c.valid, [c.typo]: [] });
      expect(res.status, JSON.stringify(res.body)).toBe(400);
      expect(refusalText(res)).toContain(`"${c.typo}"`);
      expect(await snapshot()).toEqual(before);
    });
  }

  it('is named in the body format of the route family', async () => {
    const track = await call('POST', '/users/track', { purchase: [{ external_id: 'u-1' }] });
    expect(track.body).toEqual({
      message: 'Invalid body: unknown key "purchase" (this endpoint takes attributes, events, purchases)',
    });
    const catalog = await call('PUT', '/catalogs/dishes/items', { items: [{ id: 'x' }], itmes: [] });
    expect(catalog.body).toEqual({
      errors: [
        {
          id: 'invalid-request',
          message: 'Invalid body: unknown key "itmes" (this endpoint takes items)',
          parameters: [],
          parameter_values: [],
        },
      ],
      message: 'Invalid Request',
    });
    const live = await call('POST', '/messages/live_activity/register', { app_id: 'ios-app', appId: 'x' });
    expect(live.status).toBe(400);
    expect(live.body.error).toMatch(/^Invalid body: unknown key "appId" \(this endpoint takes /);
    const several = await call('POST', '/users/export/segment', { segment_id: 'seg-a', a: 1, b: 2 });
    expect(several.body.message).toMatch(/^Invalid body: unknown keys "a", "b" \(this endpoint takes /);
  });

  it('on every route that takes a JSON body but SCIM: 400 naming the key', async () => {
    const doc = env.app.swagger() as { paths?: Record<string, Record<string, { requestBody?: unknown }>> };
    const withBody = env.app.routeCatalog.filter(
      (r: RouteEntry) =>
        r.config.errorFormat !== 'scim' &&
        doc.paths?.[r.url.replace(/:([A-Za-z_]+)/g, '{$1}')]?.[r.method.toLowerCase()]?.requestBody !== undefined,
    );
    expect(withBody.length).toBeGreaterThan(20);
    const before = await snapshot();
    const failures: string[] = [];
    for (const route of withBody) {
      const url = route.url.replace(/:([A-Za-z_]+)/g, 'x');
      const res = await callApi(env.app, route.method as 'POST', url, {
        key: env.ws.apiKey,
        body: { misspelt_key: 1 },
      });
      if (res.status !== 400 || !refusalText(res).includes('"misspelt_key"'))
        failures.push(`${route.method} ${route.url}: ${res.status} ${JSON.stringify(res.body).slice(0, 200)}`);
    }
    expect(failures).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });
});

describe('the legacy api_key body key', () => {
  it('is ignored on every family: the request is taken as without it', async () => {
    for (const c of CASES) {
      const valid =
        c.url === '/templates/email/create' ? { ...c.valid, template_name: `With api_key ${c.method}` } : c.valid;
      const res = await call(c.method, c.url, { ...valid, api_key: 'ces_key_legacy_body_key_000000000000000' });
      expect(res.status, `${c.url}: ${JSON.stringify(res.body)}`).toBeLessThan(300);
    }
  });

  it('is not read as a credential: a request without Authorization is refused', async () => {
    const res = await env.app.inject({
      method: 'POST',
      url: '/users/track',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify({ api_key: env.ws.apiKey, events: [{ external_id: 'u-1', name: 'e', time: TIME }] }),
    });
    expect(res.statusCode).toBe(401);
  });

  it('SCIM bodies keep ignoring attributes the service does not store', async () => {
    const token = await createScimToken(env.ctx.pool, env.ws.companyId, 'idp-keys');
    const res = await env.app.inject({
      method: 'POST',
      url: '/scim/v2/Users',
      headers: { ...bearer(token), 'x-request-origin': ORIGIN, 'content-type': 'application/scim+json' },
      payload: JSON.stringify({
        schemas: [USER_SCHEMA],
        userName: 'keys@example.com',
        name: { givenName: 'K', familyName: 'Eys' },
        displayName: 'Not stored',
        active: true,
        phoneNumbers: [{ value: '+15555550123' }],
      }),
    });
    expect(res.statusCode, res.body).toBe(201);
  });
});
