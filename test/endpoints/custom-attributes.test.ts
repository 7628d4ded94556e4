import { beforeAll, describe, expect, it } from 'vitest';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { utcDay } from '../../src/platform/lib/iso-time.js';
import { refreshCustomAttributeNames } from '../../src/profiles/custom-attribute-names.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

const env = useTestEnv({ workspaces: ['ws', 'other', 'empty'] });
const today = utcDay(new Date());

async function addProfile(workspaceId: string, id: string, attributes: Record<string, unknown>) {
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, custom_attributes)
     VALUES ($1, $2, $2, 0, $3)`,
    [workspaceId, id, JSON.stringify(attributes)],
  );
}

async function list(query = '', key: string | null = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/custom_attributes${query}`,
    headers: { ...(key ? bearer(key) : {}), 'content-type': 'application/json' },
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

const entry = (name: string, dataType: string) => ({
  name,
  data_type: dataType,
  array_length: null,
  description: null,
  status: 'Active',
  tag_names: [],
});

beforeAll(async () => {
  const ws = env.ws.workspaceId;
  await addProfile(ws, 'u1', {
    plan: 'pro',
    score: 12.5,
    vip: true,
    signup: '2024-01-05T10:00:00.000Z',
    birthday: '1990-04-01',
    tags: ['a', 'b'],
    pets: [{ name: 'Rex' }],
    address: { city: 'Paris' },
    mixed: 1,
    Zeta: 'upper case sorts first',
    gone: null,
  });
  await addProfile(ws, 'u2', { mixed: 2, plan: 'free' });
  await addProfile(ws, 'u3', { mixed: 'three' });
  // 110 more names, for pages: 10 above (not `gone`, null only) + 110 = 120 names, pages of 50, 50 and 20.
  const many = Object.fromEntries(Array.from({ length: 110 }, (_, i) => [`attr_${String(i).padStart(3, '0')}`, i]));
  await addProfile(ws, 'u4', many);
  await addProfile(env.other.workspaceId, 'o1', { foreign_only: 'x' });
  await refreshCustomAttributeNames(env.ctx.pool, ws, today);
  await refreshCustomAttributeNames(env.ctx.pool, env.other.workspaceId, today);
});

describe('GET /custom_attributes', () => {
  it('lists the names the profiles hold, 50 a page by name, each with its data type', async () => {
    const { status, body, headers } = await list();
    expect(status).toBe(200);
    expect(body.message).toBe('success');
    expect(body.attributes).toHaveLength(50);
    expect(body.attributes.slice(0, 3)).toEqual([
      entry('Zeta', 'String'),
      entry('address', 'Object'),
      entry('attr_000', 'Number'),
    ]);
    expect(headers.link).toMatch(/^<\/custom_attributes\?cursor=[A-Za-z0-9_-]+>; rel="next"$/);
  });

  it('walks every page through the Link header, each name once, in order', async () => {
    const names: string[] = [];
    const sizes: number[] = [];
    let query = '';
    for (let guard = 0; guard < 10; guard++) {
      const { body, headers } = await list(query);
      names.push(...body.attributes.map((a: { name: string }) => a.name));
      sizes.push(body.attributes.length);
      const next = /^<(\/custom_attributes\?cursor=[^>]+)>; rel="next"$/.exec(String(headers.link ?? ''));
      if (!next) break;
      query = next[1]!.slice('/custom_attributes'.length);
    }
    expect(sizes).toEqual([50, 50, 20]);
    expect(new Set(names).size).toBe(120);
    expect(names).toEqual([...names].sort((a, b) => Buffer.compare(Buffer.from(a), Buffer.from(b))));
    expect(names).not.toContain('gone');
    expect(names).not.toContain('foreign_only');
  });

  it('types each name by most of its values: Time for ISO 8601 strings, arrays of objects apart', async () => {
    const all: Array<{ name: string; data_type: string }> = [];
    for (const q of ['', `?cursor=${Buffer.from('attr_109').toString('base64url')}`])
      all.push(...(await list(q)).body.attributes);
    const types = Object.fromEntries(all.map((a) => [a.name, a.data_type]));
    expect(types).toMatchObject({
      plan: 'String',
      score: 'Number',
      vip: 'Boolean',
      signup: 'Time',
      birthday: 'Time',
      tags: 'Array',
      pets: 'Array of objects',
      address: 'Object',
      mixed: 'Number',
    });
  });

  it('keeps a name no profile holds any more, as the public API does', async () => {
    await env.ctx.pool.query(
      `UPDATE profiles SET custom_attributes = custom_attributes - 'plan' WHERE workspace_id = $1`,
      [env.ws.workspaceId],
    );
    await refreshCustomAttributeNames(env.ctx.pool, env.ws.workspaceId, today);
    const last = await list(`?cursor=${Buffer.from('attr_109').toString('base64url')}`);
    expect(last.body.attributes.map((a: { name: string }) => a.name)).toContain('plan');
  });

  it('answers an empty list without a Link for a workspace with none', async () => {
    const { status, body, headers } = await list('', env.empty.apiKey);
    expect(status).toBe(200);
    expect(body).toEqual({ attributes: [], message: 'success' });
    expect(headers.link).toBeUndefined();
  });

  it.each(['?cursor=not-a-cursor!', '?cursor=%3D%3D', '?cursor=a&cursor=b'])(
    'refuses a cursor it did not issue (%s) with a 400',
    async (query) => {
      const { status, body } = await list(query);
      expect(status).toBe(400);
      expect(body.message).toMatch(/cursor/);
    },
  );

  it('needs a key with custom_attributes.get, under the shared custom data list limit (1,000 an hour)', async () => {
    expect((await list('', null)).status).toBe(401);
    const bare = await list('', env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('custom_attributes.get');
    expect(Number((await list()).headers['x-ratelimit-limit'])).toBe(1000);
  });
});

describe('custom attributes declared in the workspace file', () => {
  const KEY = 'ces_key_declared_attributes_0000000000';
  const file = (attributes: string) =>
    parseWorkspaceFile(
      `company: { name: Declaring Co }\nworkspaces:\n  - name: W\n` +
        `    api_keys: [{ name: k, secret: ${KEY}, permissions: [custom_attributes.get] }]\n` +
        `    custom_attributes:\n${attributes}`,
    );

  it('lists a declared name before any profile holds it, with its type, description and tags', async () => {
    await applyWorkspaceFile(
      env.ctx.pool,
      file(
        `      - { name: plan, data_type: String, description: "The paid plan", tags: [billing, core] }\n` +
          `      - { name: renewal, data_type: Time }\n      - { name: seats }\n`,
      ),
    );
    const { status, body } = await list('', KEY);
    expect(status).toBe(200);
    expect(body).toEqual({
      attributes: [
        { ...entry('plan', 'String'), description: 'The paid plan', tag_names: ['billing', 'core'] },
        entry('renewal', 'Time'),
        entry('seats', 'String'),
      ],
      message: 'success',
    });
  });

  it('a declared type wins over the values seen; an undeclared type follows them; a pass keeps the declaration', async () => {
    const workspaceId = (
      await env.ctx.pool.query<{ id: string }>(
        `SELECT w.id FROM workspaces w JOIN companies c ON c.id = w.company_id WHERE c.name = 'Declaring Co'`,
      )
    ).rows[0]!.id;
    await addProfile(workspaceId, 'd1', { plan: 3, renewal: 'soon', seats: 12 });
    await refreshCustomAttributeNames(env.ctx.pool, workspaceId, today);
    const { body } = await list('', KEY);
    expect(body.attributes).toEqual([
      { ...entry('plan', 'String'), description: 'The paid plan', tag_names: ['billing', 'core'] },
      entry('renewal', 'Time'),
      entry('seats', 'Number'),
    ]);
  });

  it('refuses an unknown data type and a name declared twice, naming the path', () => {
    expect(() => file(`      - { name: plan, data_type: Text }\n`)).toThrow(/custom_attributes\[0\]\.data_type/);
    expect(() => file(`      - { name: plan }\n      - { name: plan }\n`)).toThrow(/duplicate custom attribute name/);
  });
});
