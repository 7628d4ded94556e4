import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi, statusAndBody } from '../helpers/http.js';
import { liquidIsWellFormed } from '../../src/features/templates/liquid.js';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';

/** POST /content_blocks/create and /update, GET /content_blocks/info and /list, and the templates that include them. */

const env = useTestEnv({ workspaces: ['ws', 'other'] });

const post = (url: string, body: unknown, key: string | null = env.ws.apiKey) =>
  callApi(env.app, 'POST', url, { key, ...bodyOrRaw(body) }).then(statusAndBody);
const get = (url: string, key: string | null = env.ws.apiKey) =>
  callApi(env.app, 'GET', url, { key }).then(statusAndBody);
const blocks = async () =>
  (
    await env.ctx.pool.query(
      `SELECT workspace_id, name, content, description, state, tags, updated_at FROM content_blocks ORDER BY workspace_id, name`,
    )
  ).rows;

// Braze's example bodies (the newest English pages).
const createExample = {
  name: 'content_block',
  description: 'This is my Content Block',
  content: 'HTML content within block',
  state: 'draft',
  tags: ['marketing'],
};
const updateExample = (id: string) => ({
  content_block_id: id,
  name: 'content_block',
  description: 'This is my Content Block',
  content: 'HTML or text content within block',
  state: 'draft',
  tags: ['marketing'],
});
const ISO = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;

let exampleId = '';

beforeAll(async () => {
  await env.ctx.pool.query(`INSERT INTO tags (workspace_id, name) VALUES ($1, 'marketing'), ($2, 'other-tag')`, [
    env.ws.workspaceId,
    env.other.workspaceId,
  ]);
});

describe('POST /content_blocks/create', () => {
  it("creates Braze's example and answers its id, liquid tag and creation time", async () => {
    const r = await post('/content_blocks/create', createExample);
    expect(r).toEqual({
      status: 201,
      body: {
        content_block_id: expect.stringMatching(/^[0-9a-f-]{36}$/),
        liquid_tag: '{{content_blocks.${content_block}}}',
        created_at: expect.stringMatching(ISO),
        message: 'success',
      },
    });
    exampleId = r.body.content_block_id;
  });

  it('defaults to active and takes a block of the same name in another workspace', async () => {
    const r = await post('/content_blocks/create', { name: 'footer', content: '<p>Bye {{first_name}}</p>' });
    expect(r.status).toBe(201);
    expect((await post('/content_blocks/create', { name: 'footer', content: 'x' }, env.other.apiKey)).status).toBe(201);
    const info = await get(`/content_blocks/info?content_block_id=${r.body.content_block_id}`);
    expect(info.body).toMatchObject({ name: 'footer', content_type: 'html', description: '', tags: [] });
    const state = await env.ctx.pool.query(`SELECT state FROM content_blocks WHERE id = $1`, [r.body.content_block_id]);
    expect(state.rows[0].state).toBe('active');
  });

  it("refuses with Braze's messages and creates nothing", async () => {
    const before = await blocks();
    const cases: [unknown, string | RegExp][] = [
      ['{"name":', /Malformed JSON/],
      [{ content: 'x' }, 'Content Block name cannot be blank'],
      [{ name: '', content: 'x' }, 'Content Block name cannot be blank'],
      [{ name: 'a'.repeat(100), content: 'x' }, 'Content Block name must be shorter than 100 characters'],
      [{ name: 'no spaces!', content: 'x' }, 'Content Block name can only contain alphanumeric characters'],
      [{ name: 5, content: 'x' }, 'Content Block name can only contain alphanumeric characters'],
      [{ name: 'content_block', content: 'x' }, 'Content Block with this name already exists'],
      [{ name: 'b' }, 'Content cannot be blank'],
      [{ name: 'b', content: '' }, 'Content cannot be blank'],
      [{ name: 'b', content: 42 }, 'Content must be a string'],
      [{ name: 'b', content: 'x'.repeat(50 * 1024) }, 'Content must be smaller than 50kb'],
      [{ name: 'b', content: 'Hi {{first_name' }, 'Content contains malformed liquid'],
      [{ name: 'b', content: '{% if x %}open' }, 'Content contains malformed liquid'],
      [{ name: 'b', content: 'me: {{content_blocks.${b}}}' }, 'Content Block cannot be referenced within itself'],
      [{ name: 'b', content: 'x', description: '' }, 'Content Block description cannot be blank'],
      [{ name: 'b', content: 'x', description: 7 }, 'Content Block description must be a string'],
      [
        { name: 'b', content: 'x', description: 'd'.repeat(250) },
        'Content Block description must be shorter than 250 characters',
      ],
      [{ name: 'b', content: 'x', state: 'live' }, 'Content Block state must be either active or draft'],
      [{ name: 'b', content: 'x', tags: 'marketing' }, 'Tags must be an array'],
      [{ name: 'b', content: 'x', tags: [1] }, 'All tags must be strings'],
      [{ name: 'b', content: 'x', tags: ['marketing', 'nope'] }, 'Some tags could not be found'],
      [{ name: 'b', content: 'x', tags: ['other-tag'] }, 'Some tags could not be found'],
      [{ name: 'b', content: 'x', colour: 'red' }, /unknown key "colour"/],
    ];
    for (const [body, message] of cases) {
      const r = await post('/content_blocks/create', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      if (typeof message === 'string') expect(r.body).toEqual({ message });
      else expect(r.body.message).toMatch(message);
    }
    expect(await blocks()).toEqual(before);
  });

  it('takes content of just under 50 KB and nested Liquid', async () => {
    const content = `{% if a %}{% for x in y %}{{x}}{% endfor %}{% else %}{% raw %}{{ {% {% endraw %}{% endif %}`;
    expect((await post('/content_blocks/create', { name: 'nested', content })).status).toBe(201);
    const big = 'é'.repeat(25_599);
    expect((await post('/content_blocks/create', { name: 'big', content: big })).status).toBe(201);
  });
});

describe('POST /content_blocks/update', () => {
  it("updates Braze's example (a draft) and answers as create does", async () => {
    const r = await post('/content_blocks/update', updateExample(exampleId));
    expect(r).toEqual({
      status: 200,
      body: {
        content_block_id: exampleId,
        liquid_tag: '{{content_blocks.${content_block}}}',
        created_at: expect.stringMatching(ISO),
        message: 'success',
      },
    });
    const info = await get(`/content_blocks/info?content_block_id=${exampleId}`);
    expect(info.body.content).toBe('HTML or text content within block');
  });

  it('renames a draft, activates it, then keeps its name and state', async () => {
    const renamed = await post('/content_blocks/update', { content_block_id: exampleId, name: 'renamed_block' });
    expect(renamed.body.liquid_tag).toBe('{{content_blocks.${renamed_block}}}');
    expect((await post('/content_blocks/update', { content_block_id: exampleId, state: 'active' })).status).toBe(200);
    const before = await blocks();
    const cases: [unknown, string][] = [
      [
        { content_block_id: exampleId, name: 'again' },
        'Content Block name cannot be updated for active Content Blocks',
      ],
      [
        { content_block_id: exampleId, state: 'draft' },
        'Active Content Block can not be updated to Draft. Create a new Content Block.',
      ],
      [
        { content_block_id: exampleId, content: '{{content_blocks.${renamed_block}}}' },
        'Content Block cannot be referenced within itself',
      ],
      [{ name: 'x' }, 'Content Block ID cannot be blank'],
      [{ content_block_id: 'not-a-block' }, 'Content Block ID is invalid for this workspace'],
      [{ content_block_id: '00000000-0000-4000-8000-000000000000' }, 'Content Block ID is invalid for this workspace'],
      [{ content_block_id: exampleId, content: '{%' }, 'Content contains malformed liquid'],
      [{ content_block_id: exampleId, tags: ['nope'] }, 'Some tags could not be found'],
    ];
    for (const [body, message] of cases) {
      const r = await post('/content_blocks/update', body);
      expect(r, JSON.stringify(body)).toEqual({ status: 400, body: { message } });
    }
    expect(await blocks()).toEqual(before);
  });

  it("refuses another workspace's block and a name taken in this workspace", async () => {
    const theirs = await post(
      '/content_blocks/create',
      { name: 'theirs', content: 'x', state: 'draft' },
      env.other.apiKey,
    );
    const before = await blocks();
    const r = await post('/content_blocks/update', { content_block_id: theirs.body.content_block_id, content: 'mine' });
    expect(r).toEqual({ status: 400, body: { message: 'Content Block ID is invalid for this workspace' } });
    const draft = await post('/content_blocks/create', { name: 'draft_one', content: 'x', state: 'draft' });
    const taken = await post('/content_blocks/update', {
      content_block_id: draft.body.content_block_id,
      name: 'footer',
    });
    expect(taken).toEqual({ status: 400, body: { message: 'Content Block with this name already exists' } });
    expect((await blocks()).filter((b) => b.name !== 'draft_one')).toEqual(before);
  });
});

describe('templates that include content blocks', () => {
  it('are checked as before, and counted in inclusion_count and inclusion_data', async () => {
    const missing = await post('/templates/email/create', {
      template_name: 'T',
      subject: 's',
      body: '{{content_blocks.${no_such_block}}}',
    });
    expect(missing).toEqual({ status: 400, body: { message: 'Email must have valid content block names' } });
    // A block of the same name in another workspace does not count.
    const foreign = await post('/templates/email/create', {
      template_name: 'T',
      subject: 's',
      body: '{{content_blocks.${theirs}}}',
    });
    expect(foreign.status).toBe(400);
    const t = await post('/templates/email/create', {
      template_name: 'T',
      subject: 's',
      body: '<p>{{ content_blocks.${footer} }}</p>',
      plaintext_body: '{{content_blocks.${footer}}}',
    });
    expect(t.status).toBe(201);
    const list = await get('/content_blocks/list');
    const footer = list.body.content_blocks.find((b: { name: string }) => b.name === 'footer');
    expect(footer.inclusion_count).toBe(1);
    const info = await get(
      `/content_blocks/info?content_block_id=${footer.content_block_id}&include_inclusion_data=true`,
    );
    expect(info.body.inclusion_data).toEqual([{ email_template_id: t.body.email_template_id }]);
    const without = await get(
      `/content_blocks/info?content_block_id=${footer.content_block_id}&include_inclusion_data=false`,
    );
    expect(without.body).not.toHaveProperty('inclusion_data');
    expect(without.body.inclusion_count).toBe(1);
  });
});

describe('GET /content_blocks/info', () => {
  it("answers Braze's fields", async () => {
    const r = await get(`/content_blocks/info?content_block_id=${exampleId}`);
    expect(r).toEqual({
      status: 200,
      body: {
        content_block_id: exampleId,
        name: 'renamed_block',
        content: 'HTML or text content within block',
        description: 'This is my Content Block',
        content_type: 'text',
        tags: ['marketing'],
        created_at: expect.stringMatching(ISO),
        last_edited: expect.stringMatching(ISO),
        inclusion_count: 0,
        message: 'success',
      },
    });
  });

  it("refuses with Braze's messages, and does not show another workspace's block", async () => {
    const theirs = (await get('/content_blocks/list', env.other.apiKey)).body.content_blocks[0].content_block_id;
    const cases: [string, string][] = [
      ['', 'Content Block ID cannot be blank'],
      ['content_block_id=', 'Content Block ID cannot be blank'],
      ['content_block_id=12345678910', 'Content Block ID is invalid for this workspace'],
      [`content_block_id=${theirs}`, 'Content Block ID is invalid for this workspace'],
      [`content_block_id=${exampleId}&include_inclusion_data=yes`, 'Include Inclusion Data—error'],
    ];
    for (const [q, message] of cases)
      expect(await get(`/content_blocks/info?${q}`), q).toEqual({ status: 400, body: { message } });
  });
});

describe('GET /content_blocks/list', () => {
  it("lists the workspace's blocks by last edit with Braze's fields, paged", async () => {
    const all = await get('/content_blocks/list?');
    expect(all.status).toBe(200);
    const names = all.body.content_blocks.map((b: { name: string }) => b.name);
    expect(names).not.toContain('theirs');
    expect(all.body.count).toBe(names.length);
    expect(all.body.content_blocks[0]).toEqual({
      content_block_id: expect.any(String),
      name: expect.any(String),
      content_type: expect.stringMatching(/^(html|text)$/),
      liquid_tag: expect.stringMatching(/^\{\{content_blocks\.\$\{[\w-]+\}\}\}$/),
      inclusion_count: expect.any(Number),
      created_at: expect.stringMatching(ISO),
      last_edited: expect.stringMatching(ISO),
      tags: expect.any(Array),
    });
    const edits = all.body.content_blocks.map((b: { last_edited: string }) => b.last_edited);
    expect([...edits].sort()).toEqual(edits);
    const pages = [];
    for (let offset = 0; offset < names.length; offset += 2)
      pages.push(...(await get(`/content_blocks/list?limit=2&offset=${offset}`)).body.content_blocks);
    expect(pages.map((b) => b.name)).toEqual(names);
    // Braze's example URL: a range that holds every block, one a page, from offset 1.
    const example = await get(
      '/content_blocks/list?modified_after=2020-01-01T01:01:01.000000&modified_before=2999-03-01T01:01:01.000000&limit=1&offset=1',
    );
    expect(example.body.content_blocks.map((b: { name: string }) => b.name)).toEqual([names[1]]);
    const last = all.body.content_blocks.at(-1).last_edited;
    expect(
      (await get(`/content_blocks/list?modified_after=${last}`)).body.content_blocks.map(
        (b: { name: string }) => b.name,
      ),
    ).toEqual([names.at(-1)]);
    expect((await get('/content_blocks/list?modified_before=2020-01-01T00:00:00Z')).body).toEqual({
      count: 0,
      content_blocks: [],
      message: 'success',
    });
  });

  it("refuses with Braze's messages", async () => {
    const cases: [string, string][] = [
      ['modified_after=yesterday', 'Modified after time is invalid'],
      ['modified_before=2024-02-30', 'Modified before time is invalid'],
      [
        'modified_after=2024-02-02&modified_before=2024-02-01',
        'Modified after time must be earlier than or the same as modified before time.',
      ],
      ['limit=abc', 'Content Block number limit is invalid'],
      ['limit=-1', 'Content Block number limit is invalid'],
      ['limit=0', 'Content Block number limit must be greater than 0'],
      ['limit=1001', 'Content Block number limit exceeds maximum of 1000'],
      ['offset=x', 'Offset is invalid'],
    ];
    for (const [q, message] of cases)
      expect(await get(`/content_blocks/list?${q}`), q).toEqual({ status: 400, body: { message } });
  });
});

describe('credentials and permissions', () => {
  it('401 without a key, with an unknown key, or without the permission; nothing changes', async () => {
    const before = await blocks();
    const calls: ['POST' | 'GET', string, string][] = [
      ['POST', '/content_blocks/create', 'content_blocks.create'],
      ['POST', '/content_blocks/update', 'content_blocks.update'],
      ['GET', `/content_blocks/info?content_block_id=${exampleId}`, 'content_blocks.info'],
      ['GET', '/content_blocks/list', 'content_blocks.list'],
    ];
    for (const [method, url, permission] of calls) {
      const body = method === 'POST' ? { content_block_id: exampleId, name: 'z', content: 'z' } : undefined;
      for (const key of [null, 'ces_key_thisKeyDoesNotExist0000000000000', env.ws.bareKey]) {
        const r = await callApi(env.app, method, url, { key, body });
        expect(r.status, `${url} ${key}`).toBe(401);
        if (key === env.ws.bareKey) expect(r.body.message).toContain(permission);
      }
    }
    expect(await blocks()).toEqual(before);
  });
});

describe('blocks of the workspace file', () => {
  it("are the API's blocks too, and applying the file again keeps what the API set besides their content", async () => {
    const file = (content: string) =>
      parseWorkspaceFile(
        `company: { name: Blocks Co }\nworkspaces:\n  - name: W\n` +
          `    api_keys:\n      - { name: k, permissions: [content_blocks.list, content_blocks.update, content_blocks.create] }\n` +
          `    content_blocks:\n      - { name: header, content: "${content}" }\n`,
      );
    const first = await applyWorkspaceFile(env.ctx.pool, file('v1'));
    const key = first.generatedSecrets.find((g) => g.name === 'k')!.secret;
    const listed = (await get('/content_blocks/list', key)).body.content_blocks;
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({ name: 'header', liquid_tag: '{{content_blocks.${header}}}' });
    const id = listed[0].content_block_id;
    expect(
      (await post('/content_blocks/update', { content_block_id: id, content: 'v2', description: 'd' }, key)).status,
    ).toBe(200);
    expect((await post('/content_blocks/create', { name: 'api_made', content: 'x' }, key)).status).toBe(201);
    await applyWorkspaceFile(env.ctx.pool, file('v1'));
    const { rows } = await env.ctx.pool.query(
      `SELECT b.name, b.content, b.description, b.state FROM content_blocks b JOIN workspaces w ON w.id = b.workspace_id
        WHERE w.name = 'W' ORDER BY b.name`,
    );
    expect(rows).toEqual([
      { name: 'api_made', content: 'x', description: null, state: 'active' },
      { name: 'header', content: 'v1', description: 'd', state: 'active' },
    ]);
  });
});

describe('liquidIsWellFormed', () => {
  it('balances delimiters and block tags', () => {
    expect(liquidIsWellFormed('plain text, { and } alone')).toBe(true);
    expect(liquidIsWellFormed('{{content_blocks.${footer}}}')).toBe(true);
    expect(liquidIsWellFormed('{%- if a -%}x{%- elsif b -%}y{%- endif -%}')).toBe(true);
    expect(liquidIsWellFormed('{% comment %}{% if {% endcomment %}')).toBe(true);
    expect(liquidIsWellFormed('{% for x in y %}{% endif %}')).toBe(false);
    expect(liquidIsWellFormed('{% endif %}')).toBe(false);
    expect(liquidIsWellFormed('{% raw %}never closed')).toBe(false);
    expect(liquidIsWellFormed('{%  %}')).toBe(false);
  });
});
