import { beforeAll, describe, expect, it } from 'vitest';
import { signPageLink } from '../../src/features/preference-centers/links.js';
import { createTestEnv, useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi, statusAndBody } from '../helpers/http.js';
import { createKey, seedWorkspace } from '../helpers/seed.js';

/**
 * POST /preference_center/v1, PUT /preference_center/v1/{id} and GET /preference_center/v1/{id}/url/{userID}, with
 * the bodies of Braze's reference pages (newest English versions) as fixtures, and the signed page behind the URL as
 * a browser-less client sees it (the Chromium run: test/http/preference-center-page.test.ts). Every refusal is checked
 * to change nothing.
 */

// Braze's 10 writes a minute would stop this file's own calls: the limit is proven with a small env of its own below.
const env = useTestEnv({
  config: { RATE_LIMIT_PREFERENCE_CENTER_WRITE_PER_MINUTE: '1000' },
  workspaces: ['ws', 'other'],
});
const GROUP = '3d2ae07a-f2ff-4318-bdff-e394f2d3a4ec';

/** Braze's create body, its placeholders filled in. */
const BRAZE_CREATE = {
  name: 'MyPreferenceCenter2022-09-22',
  preference_center_title: 'Example Preference Center Title',
  preference_center_page_html: '<html><body><form action="{{ preference_center_submit_url }}"></form></body></html>',
  confirmation_page_html: '<p>Thanks, {{${first_name}}}</p>',
  state: 'active',
  options: {
    'meta-viewport-content': 'width=device-width, initial-scale=1',
    'links-tags': [{ rel: 'icon', type: 'image/png', sizes: '32x32', href: 'https://example.com/favicon.png' }],
  },
};
/** Braze's update example. */
const BRAZE_UPDATE = {
  name: 'Example',
  preference_center_title: 'Example Preference Center Title',
  preference_center_page_html: 'HTML for preference center here',
  confirmation_page_html: 'HTML here with a message to users here',
  state: 'active',
};

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO subscription_groups (id, workspace_id, name, channel) VALUES ($1, $2, 'Sub Group 1', 'email')`,
    [GROUP, env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, email, first_name) VALUES
       ($1, 's1', 'user-1', 1, 'one@example.com', '<b>Ann</b>'), ($2, 's2', 'theirs', 2, 'two@example.com', NULL)`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
});

const call = (method: 'POST' | 'PUT' | 'GET', url: string, body?: unknown, key: string | null = env.ws.apiKey) =>
  callApi(env.app, method, url, { key, ...(body === undefined ? {} : bodyOrRaw(body)) }).then(statusAndBody);
const create = (body: unknown, key?: string | null) => call('POST', '/preference_center/v1', body, key);

/** Every center of the workspace, each as stored: what a refused request must leave as it was. */
async function centers(workspaceId = env.ws.workspaceId) {
  const { rows } = await env.ctx.pool.query(
    `SELECT api_id, name, title, page_html, confirmation_page_html, options, state, updated_at
       FROM preference_centers WHERE workspace_id = $1 ORDER BY created_at, id`,
    [workspaceId],
  );
  return rows;
}

describe('POST /preference_center/v1', () => {
  it("creates Braze's example and answers as Braze's page shows", async () => {
    const { status, body } = await create(BRAZE_CREATE);
    expect(status).toBe(201);
    expect(body).toEqual({
      preference_center_api_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
      liquid_tag: '{{preference_center.${MyPreferenceCenter2022-09-22}}}',
      created_at: expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/),
      message: 'success',
    });
    const detail = await call('GET', `/preference_center/v1/${body.preference_center_api_id}`);
    expect(detail.body).toMatchObject({
      name: 'MyPreferenceCenter2022-09-22',
      preference_center_title: 'Example Preference Center Title',
      preference_center_page_html: BRAZE_CREATE.preference_center_page_html,
      confirmation_page_html: BRAZE_CREATE.confirmation_page_html,
      preference_center_options: BRAZE_CREATE.options,
      state: 'active',
      created_at: body.created_at,
    });
    const list = await call('GET', '/preference_center/v1/list');
    expect(list.body.preference_centers.map((c: { name: string }) => c.name)).toContain('MyPreferenceCenter2022-09-22');
  });

  it("takes the first page's minimal body: title 'Preference Center', state active", async () => {
    const { status, body } = await create({
      name: 'minimal_1',
      preference_center_page_html: 'string',
      confirmation_page_html: 'string',
    });
    expect(status).toBe(201);
    const detail = await call('GET', `/preference_center/v1/${body.preference_center_api_id}`);
    expect(detail.body).toMatchObject({ preference_center_title: 'Preference Center', state: 'active' });
  });

  const valid = { name: 'valid', preference_center_page_html: 'p', confirmation_page_html: 'c' };
  it.each([
    [
      'a name with a space',
      { ...valid, name: 'My Center' },
      'name can only contain letters, numbers, hyphens, and underscores, and cannot have spaces',
    ],
    ['a name with a dot', { ...valid, name: 'a.b' }, 'name can only contain letters'],
    ['an empty name', { ...valid, name: '' }, 'name is required'],
    ['no name', { preference_center_page_html: 'p', confirmation_page_html: 'c' }, 'name is required'],
    ['a name of 256 characters', { ...valid, name: 'n'.repeat(256) }, 'name must be at most 255 characters'],
    ['a numeric name', { ...valid, name: 12 }, 'name can only contain letters'],
    ['no page HTML', { name: 'x', confirmation_page_html: 'c' }, 'preference_center_page_html is required: a string'],
    [
      'no confirmation HTML',
      { name: 'x', preference_center_page_html: 'p' },
      'confirmation_page_html is required: a string',
    ],
    ['page HTML as a number', { ...valid, preference_center_page_html: 1 }, 'preference_center_page_html is required'],
    [
      'page HTML over 500,000 characters',
      { ...valid, preference_center_page_html: 'x'.repeat(500_001) },
      'HTML may be at most 500,000 characters',
    ],
    [
      'a title over 1,000 characters',
      { ...valid, preference_center_title: 't'.repeat(1001) },
      'preference_center_title must be a string',
    ],
    ['an unknown state', { ...valid, state: 'archived' }, 'state must be either active or draft'],
    ['options as a string', { ...valid, options: 'x' }, 'options must be an object'],
    ['an unknown option', { ...valid, options: { 'meta-viewport': 'x' } }, 'Unknown options field: meta-viewport'],
    [
      'a link tag without rel',
      { ...valid, options: { 'links-tags': [{ href: 'https://e.com/i.png' }] } },
      'links-tags rel is required',
    ],
    [
      'a javascript: link',
      { ...valid, options: { 'links-tags': [{ rel: 'icon', href: 'javascript:alert(1)' }] } },
      'links-tags href is required',
    ],
    ['an array body', [valid], 'Request body must be a JSON object'],
  ])('refuses %s with 400, creating nothing', async (_what, body, message) => {
    const before = await centers();
    const { status, body: answer } = await create(body);
    expect(status).toBe(400);
    expect(answer.message).toContain(message);
    expect(await centers()).toEqual(before);
  });

  it('refuses malformed JSON, an unknown field and a name already used, creating nothing', async () => {
    const before = await centers();
    expect(await create('{"name": "x",')).toMatchObject({
      status: 400,
      body: { message: expect.stringMatching(/Malformed JSON/) },
    });
    expect((await create({ ...valid, name: 'unknown_field', colour: 'red' })).status).toBe(400);
    expect(await centers()).toEqual(before);
    expect((await create({ ...valid, name: 'taken' })).status).toBe(201);
    const again = await create({ ...valid, name: 'taken', preference_center_page_html: 'other' });
    expect(again).toEqual({ status: 400, body: { message: 'A preference center with this name already exists' } });
    expect((await centers()).filter((c) => c.name === 'taken')).toHaveLength(1);
  });

  it('of concurrent creates with one name, one wins and the others are refused', async () => {
    const answers = await Promise.all(Array.from({ length: 5 }, () => create({ ...valid, name: 'raced' })));
    expect(answers.map((a) => a.status).sort()).toEqual([201, 400, 400, 400, 400]);
    expect((await centers()).filter((c) => c.name === 'raced')).toHaveLength(1);
  });

  it("a name is the workspace's: another workspace may use it", async () => {
    const { status } = await create({ ...valid, name: 'taken' }, (await seedWorkspace(env.ctx.pool)).apiKey);
    expect(status).toBe(201);
  });
});

describe('PUT /preference_center/v1/{preferenceCenterExternalID}', () => {
  it("updates with Braze's example and answers as Braze's page shows; what it leaves out is kept", async () => {
    const made = await create({ ...BRAZE_CREATE, name: 'Example', state: 'draft' });
    const id = made.body.preference_center_api_id;
    const { status, body } = await call('PUT', `/preference_center/v1/${id}`, {
      ...BRAZE_UPDATE,
      state: undefined,
      preference_center_title: undefined,
    });
    expect(status).toBe(200);
    expect(body).toEqual({
      preference_center_api_id: id,
      created_at: made.body.created_at,
      updated_at: expect.stringMatching(/Z$/),
      message: 'success',
    });
    const detail = (await call('GET', `/preference_center/v1/${id}`)).body;
    expect(detail).toMatchObject({
      preference_center_page_html: 'HTML for preference center here',
      confirmation_page_html: 'HTML here with a message to users here',
      preference_center_title: 'Example Preference Center Title',
      state: 'draft',
      preference_center_options: BRAZE_CREATE.options,
      updated_at: body.updated_at,
    });
    expect((await call('PUT', `/preference_center/v1/${id}`, BRAZE_UPDATE)).status).toBe(200);
    expect((await call('GET', `/preference_center/v1/${id}`)).body.state).toBe('active');
  });

  it('refuses a rename, a missing page, an unknown or foreign id, changing nothing', async () => {
    const id = (await create({ ...valid(), name: 'fixed' })).body.preference_center_api_id;
    const before = await centers();
    const rename = await call('PUT', `/preference_center/v1/${id}`, { ...BRAZE_UPDATE, name: 'renamed' });
    expect(rename).toEqual({
      status: 400,
      body: { message: "The preference center name can't be edited after it's created" },
    });
    const missing = await call('PUT', `/preference_center/v1/${id}`, { preference_center_page_html: 'p' });
    expect(missing.body.message).toBe('confirmation_page_html is required: a string');
    const foreign = (await create(valid(), env.other.apiKey)).body.preference_center_api_id;
    for (const other of ['nope', foreign]) {
      const r = await call('PUT', `/preference_center/v1/${other}`, BRAZE_UPDATE);
      expect(r).toEqual({ status: 404, body: { message: `Preference center not found: ${JSON.stringify(other)}` } });
    }
    expect((await call('PUT', `/preference_center/v1/${id}`, '{')).status).toBe(400);
    expect(await centers()).toEqual(before);
    expect((await centers(env.other.workspaceId))[0].page_html).toBe('p');
  });

  function valid() {
    return { name: 'v', preference_center_page_html: 'p', confirmation_page_html: 'c' };
  }
});

describe('GET /preference_center/v1/{preferenceCenterExternalID}/url/{userID}', () => {
  it("answers a signed URL of this service for the user's external id", async () => {
    const id = (await create({ ...BRAZE_CREATE, name: 'url_center' })).body.preference_center_api_id;
    const { status, body } = await call('GET', `/preference_center/v1/${id}/url/user-1`);
    expect(status).toBe(200);
    expect(body).toEqual({
      preference_center_url: expect.stringMatching(
        /^http:\/\/127\.0\.0\.1:\d+\/pages\/preference_center\/[\w-]+\.[\w-]{43}$/,
      ),
    });
    expect(body.preference_center_url).not.toContain('user-1');
  });

  it('404s an unknown center, an unknown user, and those of another workspace', async () => {
    const id = (await create({ ...BRAZE_CREATE, name: 'url_404' })).body.preference_center_api_id;
    const theirs = (await create({ ...BRAZE_CREATE, name: 'url_404' }, env.other.apiKey)).body.preference_center_api_id;
    expect(await call('GET', `/preference_center/v1/nope/url/user-1`)).toEqual({
      status: 404,
      body: { message: 'Preference center not found: "nope"' },
    });
    expect(await call('GET', `/preference_center/v1/${theirs}/url/user-1`)).toMatchObject({ status: 404 });
    for (const user of ['ghost', 'theirs'])
      expect(await call('GET', `/preference_center/v1/${id}/url/${user}`)).toEqual({
        status: 404,
        body: { message: `User not found: no user has the external_id ${JSON.stringify(user)}` },
      });
  });
});

describe('the page behind the URL, without a browser', () => {
  const page = async (method: 'GET' | 'POST', url: string, form?: string) =>
    env.app.inject({
      method,
      url: new URL(url).pathname,
      ...(form === undefined
        ? {}
        : { payload: form, headers: { 'content-type': 'application/x-www-form-urlencoded' } }),
    });
  const states = async () =>
    (
      await env.ctx.pool.query(
        `SELECT p.email_subscribe, (SELECT state FROM subscription_group_states s WHERE s.profile_id = p.id) AS grp
           FROM profiles p WHERE p.workspace_id = $1 AND p.external_id = 'user-1'`,
        [env.ws.workspaceId],
      )
    ).rows[0];
  const PAGE = `<html><head><title>Mine</title></head><body>{{\${first_name}}} {{subscribed_state.\${email_global}}}
    {{subscribed_state.\${${GROUP}}}} <form method="post" action="{{preference_center_submit_url}}">
    <input name="{% form_field_name :subscription_group ${GROUP} %}"><input name="{% form_field_name :email_global_state %}">
    {{ unknown.thing }}</form></body></html>`;
  let url: string;
  beforeAll(async () => {
    const id = (
      await create({
        name: 'page_center',
        preference_center_page_html: PAGE,
        confirmation_page_html: 'Saved {{subscribed_state.${email_global}}}',
        options: { 'meta-viewport-content': 'width=500' },
      })
    ).body.preference_center_api_id;
    url = (await call('GET', `/preference_center/v1/${id}/url/user-1`)).body.preference_center_url;
  });

  it("renders the center's Liquid for the user, escaping the profile's values", async () => {
    const res = await page('GET', url);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    // Someone else's HTML on the API's origin: sandboxed, never framed or cached, its address never sent as Referer.
    expect(res.headers['content-security-policy']).toBe(
      "sandbox allow-scripts allow-forms allow-popups; frame-ancestors 'none'",
    );
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toContain('&lt;b&gt;Ann&lt;/b&gt; subscribed');
    expect(res.body).not.toContain('<b>Ann</b>');
    expect(res.body).toContain(`name="subscription_group[${GROUP}]"`);
    expect(res.body).toContain('name="email_global_state"');
    expect(res.body).toContain(`action="${url}"`);
    expect(res.body).toContain('<meta name="viewport" content="width=500">');
    expect(res.body).not.toContain('unknown.thing');
  });

  it('records a submitted form through the domain functions and answers the confirmation page', async () => {
    const res = await page('POST', url, `subscription_group%5B${GROUP}%5D=subscribed&email_global_state=unsubscribed`);
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('Saved unsubscribed');
    expect(await states()).toEqual({ email_subscribe: 'unsubscribed', grp: 'subscribed' });
    const events = await env.ctx.pool.query<{ type: string }>(
      `SELECT type FROM event_log WHERE workspace_id = $1 ORDER BY type`,
      [env.ws.workspaceId],
    );
    expect(events.rows.map((r) => r.type)).toEqual([
      'users.behaviors.subscription.GlobalStateChange',
      'users.behaviors.subscriptiongroup.StateChange',
    ]);
  });

  it('refuses a tampered, cut or expired link, and a bad form, with a page and no change', async () => {
    const before = await states();
    const token = new URL(url).pathname.split('/').pop()!;
    const [payload, sig] = token.split('.');
    const flipped = `${payload}.${sig!.startsWith('A') ? 'B' : 'A'}${sig!.slice(1)}`;
    // The last character carries two spare bits: one that decodes to the same bytes is refused all the same.
    const last = 'AEIMQUYcgkosw048'.indexOf(sig!.at(-1)!);
    const spareBits = `${payload}.${sig!.slice(0, -1)}${'BFJNRVZdhlptx159'[last] ?? 'A'}`;
    const expired = signPageLink(
      env.config,
      JSON.parse(Buffer.from(payload!, 'base64url').toString()),
      new Date(Date.now() - (env.config.PREFERENCE_CENTER_URL_TTL_SECONDS + 1) * 1000),
    );
    const form = `email_global_state=opted_in&subscription_group%5B${GROUP}%5D=unsubscribed`;
    for (const bad of [flipped, spareBits, payload!, `${payload}x.${sig}`, expired]) {
      for (const method of ['GET', 'POST'] as const) {
        const res = await page(method, `http://h/pages/preference_center/${bad}`, method === 'POST' ? form : undefined);
        expect(res.statusCode, `${method} ${bad}`).toBe(403);
        expect(res.headers['content-type']).toMatch(/^text\/html/);
        expect(res.body).toMatch(bad === expired ? /expired/ : /invalid/);
      }
    }
    const wrong = await page('POST', url, 'email_global_state=maybe');
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toContain('Your choices were not saved');
    const unknownGroup = await page(
      'POST',
      url,
      `subscription_group%5B${'0'.repeat(8)}-0000-0000-0000-${'0'.repeat(12)}%5D=subscribed&email_global_state=opted_in`,
    );
    expect(unknownGroup.statusCode).toBe(400);
    expect(await states()).toEqual(before);
  });
});

describe('credentials and limits', () => {
  it.each([
    ['POST', '/preference_center/v1', 'preference_center.update'],
    ['PUT', '/preference_center/v1/x', 'preference_center.update'],
    ['GET', '/preference_center/v1/x/url/user-1', 'preference_center.user.get'],
  ] as const)(
    '%s %s needs a key with %s, and refuses without one before reading the body',
    async (method, url, permission) => {
      const before = await centers();
      const body = { name: 'creds', preference_center_page_html: 'p', confirmation_page_html: 'c' };
      expect(await call(method, url, method === 'GET' ? undefined : body, null)).toMatchObject({ status: 401 });
      const bare = await call(method, url, method === 'GET' ? undefined : body, env.ws.bareKey);
      expect(bare.status).toBe(401);
      expect(bare.body.message).toContain(permission);
      const list = await createKey(env.ctx.pool, env.ws.workspaceId, `list-${method}`, ['preference_center.list']);
      expect((await call(method, url, method === 'GET' ? undefined : body, list)).status).toBe(401);
      expect(await centers()).toEqual(before);
    },
  );

  it('create and update each have their own budget a minute per workspace (10 by default); the URL 1,000', async () => {
    const small = await createTestEnv({ RATE_LIMIT_PREFERENCE_CENTER_WRITE_PER_MINUTE: '2' });
    try {
      const a = await seedWorkspace(small.ctx.pool);
      const b = await seedWorkspace(small.ctx.pool);
      const send = (method: 'POST' | 'PUT', url: string, name: string, key = a.apiKey) =>
        callApi(small.app, method, url, {
          key,
          body: { name, preference_center_page_html: 'p', confirmation_page_html: 'c' },
        });
      const first = await send('POST', '/preference_center/v1', 'one');
      expect(first.status).toBe(201);
      expect(first.headers['x-ratelimit-limit']).toBe('2');
      expect((await send('POST', '/preference_center/v1', 'two')).status).toBe(201);
      const limited = await send('POST', '/preference_center/v1', 'three');
      expect(limited.status).toBe(429);
      expect(limited.body.message).toMatch(/Rate limit of 2 requests per minute/);
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      // The update counts on its own, and so does another workspace.
      const id = first.body.preference_center_api_id;
      expect((await send('PUT', `/preference_center/v1/${id}`, 'one')).status).toBe(200);
      expect((await send('POST', '/preference_center/v1', 'one', b.apiKey)).status).toBe(201);
      const names = await small.ctx.pool.query(
        `SELECT name FROM preference_centers WHERE workspace_id = $1 ORDER BY name`,
        [a.workspaceId],
      );
      expect(names.rows.map((r) => r.name)).toEqual(['one', 'two']);
    } finally {
      await small.close();
    }
    const url = await callApi(env.app, 'GET', '/preference_center/v1/x/url/user-1', { key: env.ws.apiKey });
    expect(url.status).toBe(404);
    expect(url.headers['x-ratelimit-limit']).toBe('1000');
  });
});
