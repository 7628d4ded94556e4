import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { bearer, createKey, seedWorkspace } from '../helpers/seed.js';
import { callApi, statusAndBody } from '../helpers/http.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO tags (workspace_id, name) VALUES ($1, 'promo'), ($1, 'weekly'), ($2, 'foreign-tag')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO content_blocks (workspace_id, name, content) VALUES ($1, 'footer', '<p>bye</p>'), ($2, 'foreign_block', 'x')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
});

type Json = Record<string, unknown>;
const post = (path: string, payload: unknown, key = env.ws.apiKey, raw = false) =>
  callApi(env.app, 'POST', path, { key, ...(raw ? { raw: payload as string } : { body: payload }) });
const get = (url: string, key = env.ws.apiKey) => callApi(env.app, 'GET', url, { key }).then(statusAndBody);
const count = async () =>
  (await env.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM email_templates`)).rows[0]!.n;
const snapshot = async () => (await env.ctx.pool.query(`SELECT * FROM email_templates ORDER BY id`)).rows;

const valid = {
  template_name: 'Welcome',
  subject: 'Hello {{first_name}}',
  body: '<p>Hi</p>{{content_blocks.${footer}}}',
};

describe('POST /templates/email/create', () => {
  it('creates a template and answers {message: success, email_template_id}', async () => {
    const { status, body } = await post('/templates/email/create', {
      ...valid,
      plaintext_body: 'Hi',
      preheader: 'A warm welcome',
      tags: ['promo', 'weekly'],
      should_inline_css: false,
    });
    expect(status).toBe(201);
    expect(body).toEqual({ message: 'success', email_template_id: expect.any(String) });
    const { rows } = await env.ctx.pool.query(`SELECT * FROM email_templates WHERE api_id = $1`, [
      body.email_template_id,
    ]);
    expect(rows).toHaveLength(1);
    expect(rows[0]).toMatchObject({
      workspace_id: env.ws.workspaceId,
      template_name: 'Welcome',
      subject: 'Hello {{first_name}}',
      body: valid.body,
      plaintext_body: 'Hi',
      preheader: 'A warm welcome',
      tags: ['promo', 'weekly'],
      should_inline_css: false,
    });
  });

  it('applies the workspace default of should_inline_css when it is omitted', async () => {
    const a = await post('/templates/email/create', valid);
    expect(a.status).toBe(201);
    expect(
      (await get(`/templates/email/info?email_template_id=${a.body.email_template_id}`)).body.should_inline_css,
    ).toBe(true);
    await env.ctx.pool.query(
      `UPDATE workspaces SET settings = settings || '{"should_inline_css": false}' WHERE id = $1`,
      [env.ws.workspaceId],
    );
    try {
      expect(
        (await get(`/templates/email/info?email_template_id=${a.body.email_template_id}`)).body.should_inline_css,
      ).toBe(false);
    } finally {
      await env.ctx.pool.query(`UPDATE workspaces SET settings = settings - 'should_inline_css' WHERE id = $1`, [
        env.ws.workspaceId,
      ]);
    }
  });

  const refusals: [string, unknown, string][] = [
    ['template_name missing', { subject: 's', body: 'b' }, 'Template name is required'],
    ['template_name empty', { ...valid, template_name: '' }, 'Template name is required'],
    ['template_name null', { ...valid, template_name: null }, 'Template name is required'],
    ['template_name a number', { ...valid, template_name: 42 }, 'template_name must be a string'],
    ['an empty object', {}, 'Template name is required'],
    ['tags a string', { ...valid, tags: 'promo' }, 'Tags must be an array'],
    ['tags an object', { ...valid, tags: { a: 'promo' } }, 'Tags must be an array'],
    ['a tag not a string', { ...valid, tags: ['promo', 7] }, 'All tags must be strings'],
    ['a tag that does not exist', { ...valid, tags: ['promo', 'nope'] }, 'Some tags could not be found'],
    ["another workspace's tag", { ...valid, tags: ['foreign-tag'] }, 'Some tags could not be found'],
    [
      'an unknown content block in the body',
      { ...valid, body: '{{content_blocks.${nope}}}' },
      'Email must have valid content block names',
    ],
    [
      'an unknown content block in the plaintext body',
      { ...valid, plaintext_body: '{{ content_blocks.${ missing } }}' },
      'Email must have valid content block names',
    ],
    [
      "another workspace's content block",
      { ...valid, body: '{{content_blocks.${foreign_block}}}' },
      'Email must have valid content block names',
    ],
    [
      'should_inline_css quoted',
      { ...valid, should_inline_css: 'true' },
      'Invalid value for should_inline_css; expected true or false',
    ],
    [
      'should_inline_css a number',
      { ...valid, should_inline_css: 1 },
      'Invalid value for should_inline_css; expected true or false',
    ],
    [
      'should_inline_css null',
      { ...valid, should_inline_css: null },
      'Invalid value for should_inline_css; expected true or false',
    ],
    ['subject missing', { template_name: 'x', body: 'b' }, 'Subject is required'],
    ['body missing', { template_name: 'x', subject: 's' }, 'Body is required'],
    ['body a number', { ...valid, body: 5 }, 'body must be a string'],
    ['preheader an array', { ...valid, preheader: ['x'] }, 'preheader must be a string'],
    [
      'template_name too long',
      { ...valid, template_name: 'n'.repeat(256) },
      'template_name must be at most 255 characters',
    ],
    ['too many tags', { ...valid, tags: Array.from({ length: 101 }, () => 'promo') }, 'At most 100 tags'],
    ['a tag too long', { ...valid, tags: ['t'.repeat(256)] }, 'A tag is at most 255 characters'],
    [
      'an unknown field',
      { ...valid, descriptoin: 'typo' },
      'Invalid body: unknown key "descriptoin" (this endpoint takes body, plaintext_body, preheader, should_inline_css, subject, tags, template_name)',
    ],
    ['an array body', [valid], 'Request body must be a JSON object'],
  ];
  it.each(refusals)('refuses %s with the exact message and stores nothing', async (_name, payload, message) => {
    const before = await snapshot();
    const { status, body } = await post('/templates/email/create', payload);
    expect(status).toBe(400);
    expect(body).toEqual({ message });
    expect(await snapshot()).toEqual(before);
  });

  it('accepts known content blocks with spaces inside the braces', async () => {
    const { status } = await post('/templates/email/create', {
      ...valid,
      preheader: '{{ content_blocks.${ footer } }}',
    });
    expect(status).toBe(201);
  });

  it('refuses a body with no content and malformed JSON', async () => {
    const before = await count();
    const empty = await env.app.inject({
      method: 'POST',
      url: '/templates/email/create',
      headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
    });
    expect(empty.statusCode).toBe(400);
    expect(empty.json()).toEqual({ message: 'Template name is required' });
    const bad = await post('/templates/email/create', '{"template_name": "x",', env.ws.apiKey, true);
    expect(bad.status).toBe(400);
    expect(String(bad.body.message)).toMatch(/^Malformed JSON body/);
    expect(await count()).toBe(before);
  });

  it('refuses missing credentials and a key without the permission', async () => {
    const before = await count();
    const none = await env.app.inject({
      method: 'POST',
      url: '/templates/email/create',
      headers: { 'content-type': 'application/json' },
      payload: JSON.stringify(valid),
    });
    expect(none.statusCode).toBe(401);
    expect(none.json().message).toMatch(/API key/);
    const bare = await post('/templates/email/create', valid, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toMatch(/templates\.email\.create/);
    const updateOnly = await createKey(env.ctx.pool, env.ws.workspaceId, 'update-only', ['templates.email.update']);
    expect((await post('/templates/email/create', valid, updateOnly)).status).toBe(401);
    expect(await count()).toBe(before);
  });

  it('sends the default rate-limit headers', async () => {
    const { headers } = await post('/templates/email/create', valid);
    expect(Number(headers['x-ratelimit-limit'])).toBe(250000);
  });
});

describe('POST /templates/email/update', () => {
  async function create(extra: Json = {}) {
    const { body } = await post('/templates/email/create', {
      ...valid,
      tags: ['promo'],
      plaintext_body: 'plain',
      ...extra,
    });
    return String(body.email_template_id);
  }

  it('changes only the fields sent and answers {message: success, email_template_id}', async () => {
    const id = await create();
    const before = (await env.ctx.pool.query(`SELECT updated_at FROM email_templates WHERE api_id = $1`, [id])).rows[0]!
      .updated_at as Date;
    const { status, body } = await post('/templates/email/update', {
      email_template_id: id,
      subject: 'New subject',
      tags: ['weekly'],
      should_inline_css: true,
    });
    expect(status).toBe(200);
    expect(body).toEqual({ message: 'success', email_template_id: id });
    const info = await get(`/templates/email/info?email_template_id=${id}`);
    expect(info.body).toMatchObject({
      email_template_id: id,
      template_name: 'Welcome',
      subject: 'New subject',
      body: valid.body,
      plaintext_body: 'plain',
      tags: ['weekly'],
      should_inline_css: true,
    });
    expect(new Date(String(info.body.updated_at)).getTime()).toBeGreaterThanOrEqual(before.getTime());
  });

  it('refuses an unknown or foreign id with 404 and changes nothing', async () => {
    const before = await snapshot();
    const unknown = await post('/templates/email/update', { email_template_id: 'no-such-template', subject: 'x' });
    expect(unknown.status).toBe(404);
    expect(unknown.body.message).toMatch(/no-such-template/);
    const foreignId = String((await post('/templates/email/create', valid, env.other.apiKey)).body.email_template_id);
    const foreign = await post('/templates/email/update', { email_template_id: foreignId, subject: 'x' });
    expect(foreign.status).toBe(404);
    const after = await snapshot();
    expect(after.filter((r) => r.api_id !== foreignId)).toEqual(before);
  });

  it('refuses every bad body with the spec messages and changes nothing', async () => {
    const id = await create();
    const cases: [unknown, number, string][] = [
      [{ subject: 'x' }, 400, 'email_template_id is required'],
      [{ email_template_id: 5, subject: 'x' }, 400, 'email_template_id must be a string'],
      [{ email_template_id: id }, 400, 'At least one field other than email_template_id must be given'],
      [{ email_template_id: id, template_name: '' }, 400, 'Template name is required'],
      [{ email_template_id: id, tags: 'promo' }, 400, 'Tags must be an array'],
      [{ email_template_id: id, tags: [true] }, 400, 'All tags must be strings'],
      [{ email_template_id: id, tags: ['missing-tag'] }, 400, 'Some tags could not be found'],
      [{ email_template_id: id, body: '{{content_blocks.${gone}}}' }, 400, 'Email must have valid content block names'],
      [
        { email_template_id: id, should_inline_css: 'false' },
        400,
        'Invalid value for should_inline_css; expected true or false',
      ],
      [{ email_template_id: id, subject: 's'.repeat(1001) }, 400, 'subject must be at most 1,000 characters'],
    ];
    const before = await snapshot();
    for (const [payload, status, message] of cases) {
      const res = await post('/templates/email/update', payload);
      expect(res.status, JSON.stringify(payload)).toBe(status);
      expect(res.body, JSON.stringify(payload)).toEqual({ message });
    }
    expect(await snapshot()).toEqual(before);
  });

  it('refuses without the update permission', async () => {
    const id = await create();
    const createOnly = await createKey(env.ctx.pool, env.ws.workspaceId, 'create-only', ['templates.email.create']);
    const res = await post('/templates/email/update', { email_template_id: id, subject: 'x' }, createOnly);
    expect(res.status).toBe(401);
    expect(res.body.message).toMatch(/templates\.email\.update/);
  });
});

describe('GET /templates/email/info and /templates/email/list', () => {
  it('reads one template and refuses an unknown or missing id', async () => {
    expect((await get('/templates/email/info?email_template_id=nope')).status).toBe(404);
    const missing = await get('/templates/email/info');
    expect(missing.status).toBe(400);
    expect(missing.body.message).toMatch(/email_template_id is required/);
    expect((await get('/templates/email/info?email_template_id=x', env.ws.bareKey)).status).toBe(401);
  });

  it('lists by modification time with limit, offset and modified_after', async () => {
    const fresh = await seedWorkspace(env.ctx.pool);
    await env.ctx.pool.query(
      `INSERT INTO email_templates (workspace_id, api_id, template_name, subject, body, updated_at, created_at)
       SELECT $1, 'tpl-' || g, 'T' || g, 's', 'b', timestamptz '2026-01-01' + (g || ' hours')::interval, timestamptz '2026-01-01'
         FROM generate_series(1, 25) g`,
      [fresh.workspaceId],
    );
    const first = await get('/templates/email/list?limit=10', fresh.apiKey);
    expect(first.status).toBe(200);
    expect(first.body.count).toBe(10);
    const templates = first.body.templates as Json[];
    expect(templates[0]).toEqual({
      email_template_id: 'tpl-1',
      template_name: 'T1',
      created_at: '2026-01-01T00:00:00.000Z',
      updated_at: '2026-01-01T01:00:00.000Z',
      tags: [],
    });
    const third = await get('/templates/email/list?limit=10&offset=20', fresh.apiKey);
    expect((third.body.templates as Json[]).map((t) => t.email_template_id)).toEqual([
      'tpl-21',
      'tpl-22',
      'tpl-23',
      'tpl-24',
      'tpl-25',
    ]);
    const after = await get('/templates/email/list?modified_after=2026-01-01T22:00:00Z', fresh.apiKey);
    expect((after.body.templates as Json[]).map((t) => t.email_template_id)).toEqual(['tpl-23', 'tpl-24', 'tpl-25']);
    const between = await get(
      '/templates/email/list?modified_after=2026-01-01T01:00:00Z&modified_before=2026-01-01T04:00:00Z',
      fresh.apiKey,
    );
    expect((between.body.templates as Json[]).map((t) => t.email_template_id)).toEqual(['tpl-2', 'tpl-3']);
  });

  it('refuses bad list parameters', async () => {
    for (const q of [
      'limit=0',
      'limit=1001',
      'limit=abc',
      'offset=-1',
      'modified_after=yesterday',
      'modified_after=2026-02-30T00:00:00Z',
    ]) {
      const res = await get(`/templates/email/list?${q}`);
      expect(res.status, q).toBe(400);
      expect(String(res.body.message), q).toMatch(/limit|offset|modified_after/);
    }
    expect((await get('/templates/email/list', env.ws.bareKey)).status).toBe(401);
  });
});
