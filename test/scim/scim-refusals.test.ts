import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import {
  ERROR_SCHEMA,
  ORIGIN,
  USER_SCHEMA,
  scimCall,
  seedScimCompanies,
  userBody,
  userCount,
  type ScimCall,
  type ScimCompany,
} from '../helpers/scim.js';
import { bearer } from '../helpers/seed.js';

const env = useTestEnv();
let a: ScimCompany;
let b: ScimCompany;
let existingId: string;

beforeAll(async () => {
  ({ a, b } = await seedScimCompanies(env));
  // B alone has a "Finance" workspace: A must not reach it by name.
  await env.ctx.pool.query(`INSERT INTO workspaces (company_id, name) VALUES ($1, 'Finance')`, [b.companyId]);
  const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('existing@example.com'));
  expect(created.status, created.raw).toBe(201);
  existingId = created.body.id;
});

const long = (n: number) => 'x'.repeat(n);

/** A refusal in the SCIM error shape, served as SCIM JSON. */
function expectScimError(res: ScimCall, status: number, scimType?: string): void {
  expect(res.status, res.raw).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/scim\+json/);
  expect(res.body.schemas).toEqual([ERROR_SCHEMA]);
  expect(res.body.status).toBe(status);
  expect(typeof res.body.detail).toBe('string');
  if (scimType) expect(res.body.scimType).toBe(scimType);
}

async function snapshot() {
  const { rows } = await env.ctx.pool.query(
    `SELECT id, user_name, given_name, family_name, department, permissions, updated_at FROM dashboard_users ORDER BY id`,
  );
  const audit = await env.ctx.pool.query(`SELECT count(*)::int AS n FROM dashboard_user_audit`);
  return { rows, audit: audit.rows[0].n };
}

function without(obj: Record<string, unknown>, key: string): Record<string, unknown> {
  const copy = { ...obj };
  delete copy[key];
  return copy;
}

const validPerms = (userBody('x@example.com').permissions as { appGroup: Record<string, unknown>[] }).appGroup;

/** Bodies a create refuses with 400: [label, body, scimType, text the detail must contain]. */
const badCreates: [string, unknown, string, string][] = [
  ['body is an array', [userBody('arr@example.com')], 'invalidSyntax', 'JSON object'],
  ['body is a string', '"just a string"', 'invalidSyntax', 'JSON object'],
  ['body is empty', '', 'invalidSyntax', 'JSON object'],
  ['missing schemas', without(userBody('m1@example.com'), 'schemas'), 'invalidValue', 'body.schemas'],
  ['missing userName', without(userBody('m2@example.com'), 'userName'), 'invalidValue', 'body.userName'],
  ['missing name', without(userBody('m3@example.com'), 'name'), 'invalidValue', 'body.name'],
  [
    'two primary emails',
    userBody('m4@example.com', {
      emails: [
        { value: 'a@example.com', primary: true },
        { value: 'b@example.com', primary: true },
      ],
    }),
    'invalidValue',
    'emails may have at most one entry with primary true',
  ],
  [
    'userName in two spellings',
    userBody('m5@example.com', { username: 'm5b@example.com' }),
    'invalidSyntax',
    'userName is given twice ("userName" and "username")',
  ],
  [
    'missing familyName',
    userBody('m6@example.com', { name: { givenName: 'Ada' } }),
    'invalidValue',
    'body.name.familyName',
  ],
  [
    'schemas without the User URN',
    userBody('s1@example.com', { schemas: ['urn:ietf:params:scim:schemas:core:2.0:Group'] }),
    'invalidValue',
    USER_SCHEMA,
  ],
  ['schemas not an array', userBody('s2@example.com', { schemas: USER_SCHEMA }), 'invalidValue', 'body.schemas'],
  ['userName a number', userBody('t1@example.com', { userName: 42 }), 'invalidValue', 'body.userName'],
  ['userName not an email', userBody('not-an-email'), 'invalidValue', 'userName must be an email address'],
  ['userName too long', userBody(`${long(250)}@example.com`), 'invalidValue', 'body.userName'],
  ['name a string', userBody('t2@example.com', { name: 'Ada Lovelace' }), 'invalidValue', 'body.name'],
  [
    'givenName a number',
    userBody('t3@example.com', { name: { givenName: 1, familyName: 'L' } }),
    'invalidValue',
    'body.name.givenName',
  ],
  [
    'givenName empty',
    userBody('t4@example.com', { name: { givenName: '', familyName: 'L' } }),
    'invalidValue',
    'body.name.givenName',
  ],
  [
    'givenName too long',
    userBody('t5@example.com', { name: { givenName: long(256), familyName: 'L' } }),
    'invalidValue',
    'at most 255',
  ],
  [
    'department an array',
    userBody('t6@example.com', { department: ['engineering'] }),
    'invalidValue',
    'body.department',
  ],
  ['department too long', userBody('t7@example.com', { department: long(256) }), 'invalidValue', 'body.department'],
  [
    'department not allowed',
    userBody('d1@example.com', { department: 'astrology' }),
    'invalidValue',
    'department: "astrology" is not an allowed department',
  ],
  ['permissions an array', userBody('p1@example.com', { permissions: [] }), 'invalidValue', 'body.permissions'],
  [
    'companyPermissions a string',
    userBody('p2@example.com', { permissions: { companyPermissions: 'admin', appGroup: [] } }),
    'invalidValue',
    'body.permissions.companyPermissions',
  ],
  [
    'too many companyPermissions',
    userBody('p3@example.com', {
      permissions: { companyPermissions: Array.from({ length: 101 }, () => 'admin'), appGroup: [] },
    }),
    'invalidValue',
    'at most 100',
  ],
  [
    'appGroup an object',
    userBody('p4@example.com', { permissions: { appGroup: validPerms[0] } }),
    'invalidValue',
    'body.permissions.appGroup',
  ],
  [
    'too many appGroup entries',
    userBody('p5@example.com', { permissions: { appGroup: Array.from({ length: 501 }, () => validPerms[0]) } }),
    'invalidValue',
    'at most 500',
  ],
  [
    'unknown company permission',
    userBody('p6@example.com', { permissions: { companyPermissions: ['rule_the_world'], appGroup: [] } }),
    'invalidValue',
    'permissions.companyPermissions: "rule_the_world" is not an allowed company permission',
  ],
  [
    'workspace permission given as a company permission',
    userBody('p7@example.com', { permissions: { companyPermissions: ['edit_segments'], appGroup: [] } }),
    'invalidValue',
    '"edit_segments" is not an allowed company permission',
  ],
  [
    'unknown workspace permission',
    userBody('p8@example.com', {
      permissions: { appGroup: [{ appGroupName: 'Marketing', appGroupPermissions: ['fly'] }] },
    }),
    'invalidValue',
    'permissions.appGroup[0].appGroupPermissions: "fly" is not an allowed workspace permission',
  ],
  [
    'unknown team permission',
    userBody('p9@example.com', {
      permissions: {
        appGroup: [
          {
            appGroupName: 'Marketing',
            appGroupPermissions: [],
            team: [{ teamName: 'Growth', teamPermissions: ['view_billing_details'] }],
          },
        ],
      },
    }),
    'invalidValue',
    'permissions.appGroup[0].team[0].teamPermissions: "view_billing_details" is not an allowed team permission',
  ],
  [
    'unknown workspace',
    userBody('w1@example.com', {
      permissions: { appGroup: [{ appGroupName: 'Nowhere', appGroupPermissions: ['admin'] }] },
    }),
    'invalidValue',
    'permissions.appGroup[0].appGroupName: no workspace named "Nowhere"',
  ],
  [
    "another company's workspace",
    userBody('w2@example.com', {
      permissions: { appGroup: [{ appGroupName: 'Finance', appGroupPermissions: ['admin'] }] },
    }),
    'invalidValue',
    'no workspace named "Finance"',
  ],
  [
    'workspace neither named nor identified',
    userBody('w3@example.com', { permissions: { appGroup: [{ appGroupPermissions: ['admin'] }] } }),
    'invalidValue',
    'body.permissions.appGroup.0.appGroupName: appGroupName is required',
  ],
  [
    'workspace listed twice',
    userBody('w4@example.com', {
      permissions: {
        appGroup: [
          { appGroupName: 'Marketing', appGroupPermissions: ['admin'] },
          { appGroupName: 'Marketing', appGroupPermissions: [] },
        ],
      },
    }),
    'invalidValue',
    'permissions.appGroup[1]: workspace "Marketing" is listed more than once',
  ],
  [
    'unknown team',
    userBody('w5@example.com', {
      permissions: {
        appGroup: [
          { appGroupName: 'Marketing', appGroupPermissions: [], team: [{ teamName: 'Ghosts', teamPermissions: [] }] },
        ],
      },
    }),
    'invalidValue',
    'permissions.appGroup[0].team[0].teamName: no team named "Ghosts" in workspace "Marketing"',
  ],
  [
    'team of another workspace',
    userBody('w6@example.com', {
      permissions: {
        appGroup: [
          { appGroupName: 'Product', appGroupPermissions: [], team: [{ teamName: 'Growth', teamPermissions: [] }] },
        ],
      },
    }),
    'invalidValue',
    'no team named "Growth" in workspace "Product"',
  ],
  [
    'unknown permission set',
    userBody('w7@example.com', {
      permissions: {
        appGroup: [{ appGroupName: 'Product', appGroupPermissionSets: [{ appGroupPermissionSetName: 'Gods' }] }],
      },
    }),
    'invalidValue',
    'appGroupPermissionSets[0].appGroupPermissionSetName: no permission set named "Gods"',
  ],
  [
    'both permissions and a permission set',
    userBody('w8@example.com', {
      permissions: {
        appGroup: [
          {
            appGroupName: 'Product',
            appGroupPermissions: ['admin'],
            appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }],
          },
        ],
      },
    }),
    'invalidValue',
    'either appGroupPermissions (with team) or appGroupPermissionSets, not both',
  ],
  [
    'teams with a permission set',
    userBody('w9@example.com', {
      permissions: {
        appGroup: [
          {
            appGroupName: 'Marketing',
            team: [{ teamName: 'Growth', teamPermissions: [] }],
            appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }],
          },
        ],
      },
    }),
    'invalidValue',
    'not both',
  ],
  [
    'neither permissions nor a permission set',
    userBody('w10@example.com', { permissions: { appGroup: [{ appGroupName: 'Product' }] } }),
    'invalidValue',
    'appGroupPermissions or appGroupPermissionSets is required',
  ],
  [
    'two permission sets for one workspace',
    userBody('w11@example.com', {
      permissions: {
        appGroup: [
          {
            appGroupName: 'Product',
            appGroupPermissionSets: [
              { appGroupPermissionSetName: 'Editors' },
              { appGroupPermissionSetName: 'Editors' },
            ],
          },
        ],
      },
    }),
    'invalidValue',
    'exactly one permission set',
  ],
  [
    'team name too long',
    userBody('w12@example.com', {
      permissions: {
        appGroup: [
          { appGroupName: 'Marketing', appGroupPermissions: [], team: [{ teamName: long(256), teamPermissions: [] }] },
        ],
      },
    }),
    'invalidValue',
    'body.permissions.appGroup.0.team.0.teamName',
  ],
];

describe('POST /scim/v2/Users refusals', () => {
  it.each(badCreates)('%s: 400 naming the field, nothing stored', async (_label, body, scimType, detail) => {
    const before = await snapshot();
    const res = await scimCall(env, 'POST', '/scim/v2/Users', a.token, body);
    expectScimError(res, 400, scimType);
    expect(res.body.detail).toContain(detail);
    expect(await snapshot()).toEqual(before);
  });

  it('malformed JSON: 400 in the SCIM shape, nothing stored', async () => {
    const before = await snapshot();
    const res = await scimCall(
      env,
      'POST',
      '/scim/v2/Users',
      a.token,
      '{"schemas": ["urn:ietf:params:scim:schemas:core:2.0:User"], "userName": ',
    );
    expectScimError(res, 400);
    expect(res.body.detail).toMatch(/JSON/);
    expect(await snapshot()).toEqual(before);
  });

  it('reports every problem of a body at once', async () => {
    const res = await scimCall(
      env,
      'POST',
      '/scim/v2/Users',
      a.token,
      userBody('many@example.com', {
        department: 'astrology',
        permissions: {
          companyPermissions: ['fly'],
          appGroup: [{ appGroupName: 'Nowhere', appGroupPermissions: ['swim'] }],
        },
      }),
    );
    expectScimError(res, 400, 'invalidValue');
    for (const part of [
      'department',
      'permissions.companyPermissions',
      'permissions.appGroup[0].appGroupName',
      'permissions.appGroup[0].appGroupPermissions',
    ]) {
      expect(res.body.detail).toContain(`${part}:`);
    }
  });

  it('duplicate userName (any letter case): 409 with the spec body and RFC 7644 scimType uniqueness', async () => {
    const before = await snapshot();
    const res = await scimCall(
      env,
      'POST',
      '/scim/v2/Users',
      a.token,
      userBody('EXISTING@Example.com', { department: 'finance' }),
    );
    expect(res.status).toBe(409);
    expect(res.headers['content-type']).toMatch(/^application\/scim\+json/);
    expect(res.body).toEqual({
      schemas: [ERROR_SCHEMA],
      detail: 'User already exists in the database.',
      status: 409,
      scimType: 'uniqueness',
    });
    expect(await snapshot()).toEqual(before);
  });

  it('two identity providers racing on one address: exactly one 201, the others 409', async () => {
    const results = await Promise.all(
      ['race@example.com', 'RACE@example.com', 'Race@Example.com', 'race@EXAMPLE.com'].map((u) =>
        scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody(u)),
      ),
    );
    expect(results.map((r) => r.status).sort()).toEqual([201, 409, 409, 409]);
    const { rows } = await env.ctx.pool.query(
      `SELECT id::text FROM dashboard_users WHERE company_id = $1 AND lower(user_name) = 'race@example.com'`,
      [a.companyId],
    );
    expect(rows).toHaveLength(1);
    const audit = await env.ctx.pool.query(`SELECT action FROM dashboard_user_audit WHERE dashboard_user_id = $1`, [
      rows[0].id,
    ]);
    expect(audit.rows).toEqual([{ action: 'create' }]);
    await env.ctx.pool.query(`DELETE FROM dashboard_users WHERE id = $1`, [rows[0].id]);
  });

  it('refuses a body of another media type, text included, with 415 naming what it sent and what it takes', async () => {
    const before = await snapshot();
    const payload = JSON.stringify(userBody('plain@example.com'));
    expectScimError(
      await scimCall(env, 'POST', '/scim/v2/Users', a.token, payload, { 'content-type': 'application/xml' }),
      415,
    );
    const text = await scimCall(env, 'POST', '/scim/v2/Users', a.token, payload, { 'content-type': 'text/plain' });
    expectScimError(text, 415);
    expect(text.body.detail).toBe(
      'Unsupported media type: this endpoint takes application/scim+json or application/json, and the request sent Content-Type "text/plain"',
    );
    expect(await userCount(env, a.companyId)).toBe(1);
    expect(await snapshot()).toEqual(before);
  });

  it('accepts application/json as well as application/scim+json', async () => {
    const res = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('json@example.com'), {
      'content-type': 'application/json',
    });
    expect(res.status, res.raw).toBe(201);
    await env.ctx.pool.query(`DELETE FROM dashboard_users WHERE id = $1`, [res.body.id]);
  });

  it('keeps active, externalId, emails and displayName; ignores attributes it does not store (phoneNumbers) rather than refusing them', async () => {
    const res = await scimCall(
      env,
      'POST',
      '/scim/v2/Users',
      a.token,
      userBody('extra@example.com', {
        active: true,
        externalId: '00u1',
        emails: [{ value: 'extra@example.com', primary: true }],
        displayName: 'Ada L.',
        phoneNumbers: [{ value: '+15550100', type: 'work' }],
      }),
    );
    expect(res.status, res.raw).toBe(201);
    expect(res.body).toMatchObject({
      active: true,
      externalId: '00u1',
      emails: [{ value: 'extra@example.com', primary: true }],
      displayName: 'Ada L.',
    });
    expect(res.body).not.toHaveProperty('phoneNumbers');
    await env.ctx.pool.query(`DELETE FROM dashboard_users WHERE id = $1`, [res.body.id]);
  });
});

describe('PUT /scim/v2/Users/{id} refusals', () => {
  const put = (id: string, body: unknown, token = a.token) => scimCall(env, 'PUT', `/scim/v2/Users/${id}`, token, body);
  const replacement = () => without(userBody('existing@example.com', { department: 'finance' }), 'userName');

  it('unknown id: 404 with the spec body, nothing stored', async () => {
    const before = await snapshot();
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid']) {
      const res = await put(id, replacement());
      expect(res.status).toBe(404);
      expect(res.headers['content-type']).toMatch(/^application\/scim\+json/);
      expect(res.body).toEqual({ schemas: [ERROR_SCHEMA], detail: 'User not found', status: 404 });
    }
    expect(await snapshot()).toEqual(before);
  });

  it('a different userName: 400 mutability, nothing changed', async () => {
    const before = await snapshot();
    const res = await put(existingId, { ...replacement(), userName: 'someone.else@example.com' });
    expectScimError(res, 400, 'mutability');
    expect(res.body.detail).toContain('userName');
    expect(await snapshot()).toEqual(before);
  });

  it.each([
    ['missing name', without(replacement(), 'name'), 'body.name'],
    ['department a number', { ...replacement(), department: 42 }, 'body.department'],
    ['missing schemas', without(replacement(), 'schemas'), 'body.schemas'],
    ['department not allowed', { ...replacement(), department: 'astrology' }, 'department'],
    [
      'unknown workspace',
      { ...replacement(), permissions: { appGroup: [{ appGroupName: 'Nowhere', appGroupPermissions: [] }] } },
      'appGroupName',
    ],
    [
      'familyName too long',
      { ...replacement(), name: { givenName: 'A', familyName: long(300) } },
      'body.name.familyName',
    ],
  ])('%s: 400, nothing changed', async (_label, body, detail) => {
    const before = await snapshot();
    const res = await put(existingId, body);
    expectScimError(res, 400, 'invalidValue');
    expect(res.body.detail).toContain(detail);
    expect(await snapshot()).toEqual(before);
  });

  it('malformed JSON: 400, nothing changed', async () => {
    const before = await snapshot();
    const res = await put(existingId, '{"name": {');
    expectScimError(res, 400);
    expect(await snapshot()).toEqual(before);
  });
});

describe('GET and DELETE refusals', () => {
  it('unknown id: 404 User not found on GET and DELETE', async () => {
    for (const method of ['GET', 'DELETE'] as const) {
      for (const id of ['00000000-0000-4000-8000-000000000000', 'nope']) {
        const res = await scimCall(env, method, `/scim/v2/Users/${id}`, a.token);
        expectScimError(res, 404);
        expect(res.body.detail).toBe('User not found');
      }
    }
  });

  it.each([
    'userName co "existing"',
    'userName sw "e"',
    'emails eq "existing@example.com"',
    'externalId ne "00u1"',
    'userName eq existing@example.com',
    'userName eq "existing@example.com" and active eq "yes"',
    'userName eq "existing@example.com" or userName eq "x@example.com"',
    'userName eq "existing@example.com" and',
    'name.givenName eq "Ada"',
    'emails[type eq "work"] eq "existing@example.com"',
    'active eq true userName eq "existing@example.com"',
    'urn:example:other:userName eq "existing@example.com"',
    '',
    'userName eq "' + long(1100) + '"',
  ])('unsupported filter %#: 400 invalidFilter', async (filter) => {
    const res = await scimCall(env, 'GET', `/scim/v2/Users?filter=${encodeURIComponent(filter)}`, a.token);
    expectScimError(res, 400, 'invalidFilter');
  });

  it('accepts the filter in any letter case of attribute and operator, and with the schema URN', async () => {
    for (const filter of [
      'USERNAME EQ "existing@example.com"',
      `${USER_SCHEMA}:userName eq "existing@example.com"`,
      'userName  eq  "existing@example.com" ',
    ]) {
      const res = await scimCall(env, 'GET', `/scim/v2/Users?filter=${encodeURIComponent(filter)}`, a.token);
      expect(res.status, filter).toBe(200);
      expect(res.body.totalResults, filter).toBe(1);
    }
  });

  it.each(['startIndex=abc', 'count=1.5', 'count=ten', 'filter=a&filter=b'])(
    'bad list parameter %s: 400 invalidValue',
    async (query) => {
      const res = await scimCall(env, 'GET', `/scim/v2/Users?${query}`, a.token);
      expectScimError(res, 400, 'invalidValue');
    },
  );
});

describe('credentials', () => {
  it('refuses a valid API key without a SCIM token on every verb, changing nothing', async () => {
    const before = await snapshot();
    const headers = { ...bearer(a.apiKey), 'x-request-origin': ORIGIN, 'content-type': 'application/scim+json' };
    const calls = [
      { method: 'POST' as const, url: '/scim/v2/Users', payload: JSON.stringify(userBody('bykey@example.com')) },
      { method: 'GET' as const, url: '/scim/v2/Users' },
      { method: 'GET' as const, url: `/scim/v2/Users/${existingId}` },
      {
        method: 'PUT' as const,
        url: `/scim/v2/Users/${existingId}`,
        payload: JSON.stringify(userBody('existing@example.com', { department: 'finance' })),
      },
      { method: 'DELETE' as const, url: `/scim/v2/Users/${existingId}` },
    ];
    for (const call of calls) {
      const res = await env.app.inject({ ...call, headers });
      expect(res.statusCode, `${call.method} ${call.url}`).toBe(401);
      expect(res.json()).toEqual({
        schemas: [ERROR_SCHEMA],
        detail: 'An API key cannot be used for SCIM: send a SCIM token',
        status: 401,
      });
    }
    expect(await snapshot()).toEqual(before);
  });

  it('refuses a missing token, an unknown token, a revoked token and a missing X-Request-Origin', async () => {
    const before = await snapshot();
    const url = `/scim/v2/Users/${existingId}`;
    const none = await env.app.inject({ method: 'DELETE', url, headers: { 'x-request-origin': ORIGIN } });
    expect(none.statusCode).toBe(401);
    expect(none.json().detail).toMatch(/Missing SCIM token/);
    const unknown = await env.app.inject({
      method: 'DELETE',
      url,
      headers: { ...bearer('ces_scim_unknownTokenValue000000000000000'), 'x-request-origin': ORIGIN },
    });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.body).not.toContain('unknownTokenValue000000000000000');
    const noOrigin = await env.app.inject({ method: 'DELETE', url, headers: bearer(a.token) });
    expect(noOrigin.statusCode).toBe(401);
    expect(noOrigin.json().detail).toMatch(/X-Request-Origin/);
    expect(await snapshot()).toEqual(before);

    await env.ctx.pool.query(`UPDATE scim_tokens SET revoked_at = now() WHERE company_id = $1`, [b.companyId]);
    env.ctx.principals.clear();
    const revoked = await scimCall(env, 'GET', '/scim/v2/Users', b.token);
    expect(revoked.status).toBe(401);
  });
});
