import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import {
  ERROR_SCHEMA,
  EXTENSION_SCHEMA,
  PATCH_SCHEMA,
  scimCall,
  seedScimCompanies,
  userBody,
  type ScimCall,
  type ScimCompany,
} from '../helpers/scim.js';

/*
 * PATCH /scim/v2/Users/{id} (RFC 7644 3.5.2), `active`, the filters and attribute selection identity providers use.
 * The flows of Okta and Entra ID with their documented bodies are in scim-idp-flows.test.ts.
 */

const env = useTestEnv();
let a: ScimCompany;
let b: ScimCompany;
beforeAll(async () => ({ a, b } = await seedScimCompanies(env)));

async function createUser(userName: string, over: Record<string, unknown> = {}): Promise<string> {
  const res = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody(userName, over));
  expect(res.status, res.raw).toBe(201);
  return res.body.id as string;
}

const patch = (id: string, operations: unknown[], token = a.token, headers: Record<string, string> = {}) =>
  scimCall(env, 'PATCH', `/scim/v2/Users/${id}`, token, { schemas: [PATCH_SCHEMA], Operations: operations }, headers);

function expectScimError(res: ScimCall, status: number, scimType?: string): void {
  expect(res.status, res.raw).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/scim\+json/);
  expect(res.body.schemas).toEqual([ERROR_SCHEMA]);
  if (scimType) expect(res.body.scimType).toBe(scimType);
}

/** The stored row and its audit trail: what "nothing changed" is checked against. */
async function stateOf(id: string) {
  const row = await env.ctx.pool.query(`SELECT * FROM dashboard_users WHERE id = $1`, [id]);
  const audit = await env.ctx.pool.query(
    `SELECT action, changes FROM dashboard_user_audit WHERE dashboard_user_id = $1 ORDER BY id`,
    [id],
  );
  return { row: row.rows[0], audit: audit.rows };
}

describe('PATCH /scim/v2/Users/{id}: the operation forms', () => {
  it('replaces simple and sub-attributes by path, in any letter case of op and attribute', async () => {
    const id = await createUser('forms@example.com');
    const res = await patch(id, [
      { op: 'Replace', path: 'name.givenName', value: 'Augusta' },
      { op: 'REPLACE', path: 'NAME.familyName', value: 'King' },
      { op: 'replace', path: 'department', value: 'finance' },
      { op: 'add', path: 'externalId', value: 'okta-00u1' },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/scim\+json/);
    expect(res.body).toMatchObject({
      id,
      userName: 'forms@example.com',
      name: { givenName: 'Augusta', familyName: 'King' },
      department: 'finance',
      externalId: 'okta-00u1',
      active: true,
      [EXTENSION_SCHEMA]: { department: 'finance' },
    });
    const { row, audit } = await stateOf(id);
    expect(row).toMatchObject({
      given_name: 'Augusta',
      family_name: 'King',
      department: 'finance',
      external_id: 'okta-00u1',
    });
    expect(audit.map((r) => r.action)).toEqual(['create', 'update']);
    expect(audit[1].changes).toMatchObject({
      department: { from: 'engineering', to: 'finance' },
      externalId: { from: null, to: 'okta-00u1' },
    });
  });

  it('applies a partial resource without a path (Okta), URN-qualified names and both extensions', async () => {
    const id = await createUser('nopath@example.com');
    const res = await patch(id, [
      {
        op: 'replace',
        value: { name: { familyName: 'Byron' }, 'urn:ietf:params:scim:schemas:core:2.0:User:externalId': 'x-1' },
      },
      { op: 'replace', value: { [EXTENSION_SCHEMA]: { department: 'bi' } } },
      { op: 'Add', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:department', value: 'marketing' },
      { op: 'Replace', path: 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User:employeeNumber', value: '42' },
    ]);
    expect(res.status, res.raw).toBe(200);
    // A sub-attribute not given is left as it was (RFC 7644 3.5.2.3).
    expect(res.body.name).toEqual({ givenName: 'Ada', familyName: 'Byron' });
    expect(res.body).toMatchObject({ externalId: 'x-1', department: 'marketing' });
  });

  it('adds to, replaces and removes from multi-valued attributes: emails and permissions', async () => {
    const id = await createUser('multi@example.com', {
      emails: [{ value: 'multi@example.com', type: 'work', primary: true }],
    });
    let res = await patch(id, [
      { op: 'add', path: 'emails', value: [{ value: 'home@example.org', type: 'home' }] },
      { op: 'replace', path: 'emails[type eq "work"].value', value: 'new.work@example.com' },
      { op: 'add', path: 'permissions.companyPermissions', value: ['admin'] },
      { op: 'add', path: 'permissions.appGroup', value: [] },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.emails).toEqual([
      { value: 'new.work@example.com', type: 'work', primary: true },
      { value: 'home@example.org', type: 'home' },
    ]);
    expect(res.body.permissions.companyPermissions).toEqual(['manage_company_settings', 'admin']);

    res = await patch(id, [
      { op: 'remove', path: 'emails[type eq "home"]' },
      { op: 'remove', path: 'permissions.companyPermissions', value: ['manage_company_settings'] },
      { op: 'remove', path: 'permissions.appGroup', value: [{ appGroupName: 'Product' }] },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.emails).toEqual([{ value: 'new.work@example.com', type: 'work', primary: true }]);
    expect(res.body.permissions.companyPermissions).toEqual(['admin']);
    expect(res.body.permissions.appGroup.map((g: { appGroupName: string }) => g.appGroupName)).toEqual(['Marketing']);

    res = await patch(id, [
      {
        op: 'replace',
        path: 'permissions',
        value: {
          appGroup: [{ appGroupName: 'Product', appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }] }],
        },
      },
      { op: 'remove', path: 'externalId' },
      { op: 'remove', path: 'emails' },
    ]);
    expect(res.status, res.raw).toBe(200);
    // replace of a complex attribute replaces the sub-attributes given and keeps the others.
    expect(res.body.permissions).toEqual({
      companyPermissions: ['admin'],
      appGroup: [
        {
          appGroupId: a.productId,
          appGroupName: 'Product',
          appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }],
        },
      ],
    });
    // RFC 7643 2.5: an empty multi-valued attribute is unassigned, and left out.
    expect(res.body).not.toHaveProperty('emails');
    expect(res.body).not.toHaveProperty('externalId');
  });

  it('creates the entry an emails filter names when there is none (Entra ID sets a work address that way)', async () => {
    const id = await createUser('nowork@example.com');
    const res = await patch(id, [{ op: 'Add', path: 'emails[type eq "work"].value', value: 'first.work@example.com' }]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.emails).toEqual([{ type: 'work', value: 'first.work@example.com' }]);
  });

  it('ignores attributes of the core schema it does not store, as POST and PUT do', async () => {
    const id = await createUser('ignored@example.com');
    const before = await stateOf(id);
    const res = await patch(id, [
      { op: 'add', path: 'nickName', value: 'Ada' },
      { op: 'replace', path: 'name.formatted', value: 'Ada Lovelace' },
      { op: 'replace', value: { password: 'secret', title: 'Countess' } },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body).not.toHaveProperty('nickName');
    expect(res.body).not.toHaveProperty('title');
    // Nothing stored changed: no audit row and lastModified kept.
    expect(await stateOf(id)).toEqual(before);
  });

  it('answers 204 with no body when the client asks for Prefer: return=minimal', async () => {
    const id = await createUser('minimal@example.com');
    const res = await patch(id, [{ op: 'replace', path: 'name.givenName', value: 'Min' }], a.token, {
      prefer: 'return=minimal',
    });
    expect(res.status).toBe(204);
    expect(res.raw).toBe('');
    expect((await stateOf(id)).row.given_name).toBe('Min');
  });

  it('two PATCHes racing on one user both land: each applies to what the other wrote', async () => {
    const id = await createUser('race.patch@example.com');
    const results = await Promise.all(
      ['admin', 'add_remove_app_groups'].map((p) =>
        patch(id, [{ op: 'add', path: 'permissions.companyPermissions', value: [p] }]),
      ),
    );
    expect(results.map((r) => r.status)).toEqual([200, 200]);
    const { row } = await stateOf(id);
    expect([...row.permissions.companyPermissions].sort()).toEqual([
      'add_remove_app_groups',
      'admin',
      'manage_company_settings',
    ]);
  });
});

describe('PATCH: what the RFC 7644 conformance suites check', () => {
  const EXTENSION_PATH = EXTENSION_SCHEMA;
  const marketing = {
    appGroupName: 'Marketing',
    appGroupPermissions: ['basic_access', 'edit_segments'],
    team: [{ teamName: 'Growth', teamPermissions: ['admin'] }],
  };

  it('add of a workspace the user already has, as the identity provider sent it at creation, changes nothing and succeeds', async () => {
    const id = await createUser('again@example.com');
    const before = await stateOf(id);
    for (const operation of [
      { op: 'add', path: 'permissions.appGroup', value: [marketing] },
      { op: 'add', path: `${EXTENSION_PATH}:permissions.appGroup`, value: [marketing] },
      {
        op: 'add',
        value: {
          permissions: {
            appGroup: [
              marketing,
              { appGroupName: 'Product', appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }] },
            ],
          },
        },
      },
      // What a GET returned, server-filled ids included.
      {
        op: 'add',
        path: 'permissions.appGroup',
        value: [
          {
            ...marketing,
            appGroupId: a.marketingId,
            team: [{ teamId: a.growthTeamId, teamName: 'Growth', teamPermissions: ['admin'] }],
          },
        ],
      },
    ]) {
      const res = await patch(id, [operation]);
      expect(res.status, res.raw).toBe(200);
    }
    expect(await stateOf(id)).toEqual(before);
  });

  it('add to a workspace the user has joins the new permissions and teams to it', async () => {
    const id = await createUser('more@example.com');
    const res = await patch(id, [
      {
        op: 'add',
        path: 'permissions.appGroup',
        value: [
          {
            appGroupName: 'Marketing',
            appGroupPermissions: ['view_pii', 'basic_access'],
            team: [{ teamName: 'Growth', teamPermissions: ['basic_access'] }],
          },
        ],
      },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.permissions.appGroup[0]).toEqual({
      appGroupId: a.marketingId,
      appGroupName: 'Marketing',
      appGroupPermissions: ['basic_access', 'edit_segments', 'view_pii'],
      team: [{ teamId: a.growthTeamId, teamName: 'Growth', teamPermissions: ['admin', 'basic_access'] }],
    });
  });

  it('add of an email the user has updates it rather than repeating it, and a new primary takes primary from the others', async () => {
    const id = await createUser('mails@example.com', {
      emails: [{ value: 'mails@example.com', type: 'work', primary: true }],
    });
    let res = await patch(id, [
      { op: 'add', path: 'emails', value: [{ value: 'MAILS@example.com', type: 'work', primary: true }] },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.emails).toEqual([{ value: 'MAILS@example.com', type: 'work', primary: true }]);
    res = await patch(id, [
      { op: 'add', path: 'emails', value: [{ value: 'home@example.org', type: 'home', primary: true }] },
    ]);
    expect(res.body.emails).toEqual([
      { value: 'MAILS@example.com', type: 'work', primary: false },
      { value: 'home@example.org', type: 'home', primary: true },
    ]);
    res = await patch(id, [{ op: 'replace', path: 'emails[type eq "work"].primary', value: true }]);
    expect(res.body.emails.map((e: { primary: boolean }) => e.primary)).toEqual([true, false]);
  });

  it('a path naming our extension by its URN adds, replaces and removes its attributes', async () => {
    const id = await createUser('urn.path@example.com');
    let res = await patch(id, [
      {
        op: 'replace',
        path: EXTENSION_PATH,
        value: { department: 'finance', permissions: { companyPermissions: ['admin'] } },
      },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toMatchObject({ department: 'finance', [EXTENSION_SCHEMA]: { department: 'finance' } });
    expect(res.body.permissions.companyPermissions).toEqual(['admin']);
    res = await patch(id, [{ op: 'remove', path: EXTENSION_PATH }]);
    expect(res.status, res.raw).toBe(200);
    for (const attribute of ['department', 'permissions', EXTENSION_SCHEMA])
      expect(res.body).not.toHaveProperty(attribute);
    const { row } = await stateOf(id);
    expect(row).toMatchObject({ department: null, permissions: null });
    res = await patch(id, [{ op: 'add', path: EXTENSION_PATH, value: { department: 'bi' } }]);
    expect(res.body).toMatchObject({ department: 'bi', [EXTENSION_SCHEMA]: { department: 'bi' } });
  });

  it('removes department, permissions and displayName (they are optional); active, userName and name stay required', async () => {
    const id = await createUser('optional@example.com', { displayName: 'Ada L.' });
    let res = await patch(id, [
      { op: 'remove', path: 'department' },
      { op: 'remove', path: 'permissions' },
      { op: 'remove', path: 'displayName' },
    ]);
    expect(res.status, res.raw).toBe(200);
    for (const attribute of ['department', 'permissions', 'displayName', EXTENSION_SCHEMA])
      expect(res.body).not.toHaveProperty(attribute);
    res = await scimCall(env, 'GET', `/scim/v2/Users/${id}`, a.token);
    for (const attribute of ['department', 'permissions', 'displayName'])
      expect(res.body).not.toHaveProperty(attribute);
    const { audit } = await stateOf(id);
    expect(audit.at(-1).changes).toMatchObject({
      department: { from: 'engineering', to: null },
      displayName: { from: 'Ada L.', to: null },
    });
    for (const path of ['active', 'userName', 'name']) {
      res = await patch(id, [{ op: 'remove', path }]);
      expectScimError(res, 400, 'mutability');
    }
    // A remove inside permissions the user no longer has changes nothing.
    res = await patch(id, [{ op: 'remove', path: 'permissions.companyPermissions', value: ['admin'] }]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body).not.toHaveProperty('permissions');
  });

  it('an unknown URN in a path is named as such, with the schemas the User has', async () => {
    const id = await createUser('bad.urn@example.com');
    const res = await patch(id, [{ op: 'replace', path: 'urn:example:custom:2.0:User:thing', value: 'x' }]);
    expectScimError(res, 400, 'invalidPath');
    expect(res.body.detail).toContain(
      'names no schema of the User resource; its schemas are urn:ietf:params:scim:schemas:core:2.0:User, urn:ietf:params:scim:schemas:extension:ces:2.0:User',
    );
    const inExtension = await patch(id, [{ op: 'replace', path: `${EXTENSION_PATH}:nothing`, value: 'x' }]);
    expect(inExtension.body.detail).toContain(
      `the path must name an attribute of ${EXTENSION_SCHEMA}: department or permissions`,
    );
  });
});

describe('PATCH refusals: all or nothing', () => {
  it('one invalid operation among valid ones refuses the whole request: no row changed, no audit row', async () => {
    const id = await createUser('atomic@example.com');
    const before = await stateOf(id);
    const cases: [unknown[], string][] = [
      [
        [
          { op: 'replace', path: 'name.givenName', value: 'Changed' },
          { op: 'replace', path: 'department', value: 'not-a-department' },
        ],
        'invalidValue',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'active', value: 'maybe' },
        ],
        'invalidValue',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'nosuchattribute', value: 1 },
        ],
        'invalidPath',
      ],
      [[{ op: 'replace', path: 'active', value: false }, { op: 'remove' }], 'noTarget'],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'id', value: '00000000-0000-4000-8000-000000000000' },
        ],
        'mutability',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'userName', value: 'someone.else@example.com' },
        ],
        'mutability',
      ],
      [[{ op: 'replace', value: { active: false, userName: 'other@example.com' } }], 'mutability'],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'remove', path: 'name.givenName' },
        ],
        'mutability',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'remove', path: 'userName' },
        ],
        'mutability',
      ],
      [
        [
          {
            op: 'add',
            path: 'permissions.appGroup',
            value: [{ appGroupName: 'Product', appGroupPermissions: ['basic_access'] }],
          },
        ],
        'invalidValue',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'urn:ietf:params:scim:schemas:extension:ces:2.0:User', value: 'x' },
        ],
        'invalidValue',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'urn:ietf:params:scim:schemas:extension:ces:2.0:User:nothing', value: 'x' },
        ],
        'invalidPath',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'remove', path: 'active' },
        ],
        'mutability',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'emails', value: [{ value: 'not an email' }] },
        ],
        'invalidValue',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'add', path: 'permissions.appGroup', value: [{ appGroupName: 'Nowhere', appGroupPermissions: [] }] },
        ],
        'invalidValue',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'name.givenName' },
        ],
        'invalidValue',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'name[givenName eq "Ada"]', value: 'x' },
        ],
        'invalidPath',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'urn:example:custom:2.0:User:thing', value: 'x' },
        ],
        'invalidPath',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'replace', path: 'lastSignInAt', value: '2024-01-01T00:00:00Z' },
        ],
        'mutability',
      ],
      [
        [
          { op: 'replace', path: 'active', value: false },
          { op: 'move', path: 'active', value: true },
        ],
        'invalidValue',
      ],
    ];
    for (const [operations, scimType] of cases) {
      const res = await patch(id, operations);
      expectScimError(res, 400, scimType);
      expect(res.body.detail, JSON.stringify(operations)).toMatch(/\S/);
    }
    expect(await stateOf(id)).toEqual(before);
  });

  it('refuses malformed bodies: not JSON, no PatchOp schema, no or too many operations', async () => {
    const id = await createUser('malformed.patch@example.com');
    const before = await stateOf(id);
    const url = `/scim/v2/Users/${id}`;
    expectScimError(await scimCall(env, 'PATCH', url, a.token, '{"schemas": ['), 400, 'invalidSyntax');
    expectScimError(await scimCall(env, 'PATCH', url, a.token, [{ op: 'replace' }]), 400, 'invalidSyntax');
    expectScimError(
      await scimCall(env, 'PATCH', url, a.token, { Operations: [{ op: 'replace', path: 'active', value: false }] }),
      400,
      'invalidValue',
    );
    expectScimError(
      await scimCall(env, 'PATCH', url, a.token, { schemas: [PATCH_SCHEMA], Operations: [] }),
      400,
      'invalidValue',
    );
    expectScimError(
      await scimCall(env, 'PATCH', url, a.token, { schemas: [PATCH_SCHEMA], Operations: 'replace' }),
      400,
      'invalidValue',
    );
    const many = Array.from({ length: 101 }, () => ({ op: 'replace', path: 'active', value: false }));
    expectScimError(await patch(id, many), 400, 'invalidValue');
    expectScimError(await patch(id, [{ op: 'replace', path: 'x'.repeat(600), value: 1 }]), 400, 'invalidValue');
    // Text PostgreSQL cannot store is refused before anything is read or written.
    expectScimError(await patch(id, [{ op: 'replace', path: 'externalId', value: 'a\u0000b' }]), 400);
    expectScimError(
      await patch(id, [{ op: 'add', path: 'emails[type eq "wo\u0000rk"].value', value: 'x@example.com' }]),
      400,
    );
    expectScimError(
      await scimCall(env, 'GET', `/scim/v2/Users?filter=${encodeURIComponent('externalId eq "a\u0000b"')}`, a.token),
      400,
    );
    expect(await stateOf(id)).toEqual(before);
  });

  it('unknown ids, other companies and missing credentials: 404 and 401, nothing changed', async () => {
    const id = await createUser('guarded.patch@example.com');
    const before = await stateOf(id);
    const op = [{ op: 'replace', path: 'active', value: false }];
    expectScimError(await patch('00000000-0000-4000-8000-000000000000', op), 404);
    expectScimError(await patch('not-a-uuid', op), 404);
    expectScimError(await patch(id, op, b.token), 404);
    expectScimError(await patch(id, op, 'ces_scim_wrong_token_000000000000000000000'), 401);
    expectScimError(await patch(id, op, a.apiKey), 401);
    const noOrigin = await env.app.inject({
      method: 'PATCH',
      url: `/scim/v2/Users/${id}`,
      headers: { authorization: `Bearer ${a.token}`, 'content-type': 'application/scim+json' },
      payload: JSON.stringify({ schemas: [PATCH_SCHEMA], Operations: op }),
    });
    expect(noOrigin.statusCode).toBe(401);
    expect(await stateOf(id)).toEqual(before);
  });
});

describe('active: deactivate, still readable and filterable, reactivate', () => {
  it('a deactivated user keeps being returned by GET and every filter, and the trail says deactivate and reactivate', async () => {
    const id = await createUser('leaver@example.com', {
      externalId: 'ext-leaver',
      emails: [{ value: 'leaver.work@example.com', type: 'work' }],
    });
    const off = await patch(id, [{ op: 'replace', path: 'active', value: false }]);
    expect(off.status, off.raw).toBe(200);
    expect(off.body.active).toBe(false);

    const got = await scimCall(env, 'GET', `/scim/v2/Users/${id}`, a.token);
    expect(got.status).toBe(200);
    expect(got.body.active).toBe(false);
    for (const filter of [
      'userName eq "LEAVER@example.com"',
      'externalId eq "ext-leaver"',
      `id eq "${id}"`,
      'emails[type eq "work"].value eq "leaver.work@example.com"',
      'active eq false and userName eq "leaver@example.com"',
    ]) {
      const found = await scimCall(env, 'GET', `/scim/v2/Users?filter=${encodeURIComponent(filter)}`, a.token);
      expect(found.status, `${filter}: ${found.raw}`).toBe(200);
      expect(found.body.totalResults, filter).toBe(1);
      expect(found.body.Resources[0]).toMatchObject({ id, active: false });
    }
    const on = await patch(id, [{ op: 'Replace', path: 'active', value: 'True' }]);
    expect(on.status, on.raw).toBe(200);
    expect(on.body.active).toBe(true);
    const { audit } = await stateOf(id);
    expect(audit.map((r) => r.action)).toEqual(['create', 'deactivate', 'reactivate']);
    expect(audit[1].changes).toEqual({ active: { from: true, to: false } });
  });

  it('PUT sets active (the defect: it used to answer 200 and change nothing); a PUT without active keeps it', async () => {
    const id = await createUser('putter@example.com');
    const replacement = (over: Record<string, unknown> = {}) => {
      const body = userBody('putter@example.com', over);
      return body;
    };
    let res = await scimCall(env, 'PUT', `/scim/v2/Users/${id}`, a.token, replacement({ active: false }));
    expect(res.status, res.raw).toBe(200);
    expect(res.body.active).toBe(false);
    expect((await stateOf(id)).row.active).toBe(false);
    // A client of the spec, whose bodies have no active, does not reactivate the user by replacing it.
    res = await scimCall(env, 'PUT', `/scim/v2/Users/${id}`, a.token, replacement({ department: 'finance' }));
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toMatchObject({ active: false, department: 'finance' });
    res = await scimCall(env, 'PUT', `/scim/v2/Users/${id}`, a.token, replacement({ active: 'true' }));
    expect(res.body.active).toBe(true);
    expect((await stateOf(id)).audit.map((r) => r.action)).toEqual(['create', 'deactivate', 'update', 'reactivate']);
  });

  it('POST may create a user inactive; active defaults to true', async () => {
    const id = await createUser('born.inactive@example.com', { active: false });
    expect((await stateOf(id)).row.active).toBe(false);
    const other = await createUser('born.active@example.com');
    expect((await stateOf(other)).row.active).toBe(true);
  });
});

describe('filters and attribute selection', () => {
  let id: string;
  beforeAll(async () => {
    id = await createUser('filtered@example.com', {
      externalId: 'Ext-Filtered',
      emails: [
        { value: 'filtered.work@example.com', type: 'work', primary: true },
        { value: 'filtered.home@example.org', type: 'home' },
      ],
    });
  });
  const list = (query: string) => scimCall(env, 'GET', `/scim/v2/Users?${query}`, a.token);
  const byFilter = async (filter: string) => {
    const res = await list(`filter=${encodeURIComponent(filter)}`);
    expect(res.status, `${filter}: ${res.raw}`).toBe(200);
    return (res.body.Resources as { id: string }[]).map((r) => r.id);
  };

  it('finds by externalId (exact case), id, email value (any type or one type), and their and', async () => {
    expect(await byFilter('externalId eq "Ext-Filtered"')).toEqual([id]);
    expect(await byFilter('externalId eq "ext-filtered"')).toEqual([]);
    expect(await byFilter(`id eq "${id}"`)).toEqual([id]);
    expect(await byFilter(`id eq "${id.toUpperCase()}"`)).toEqual([id]);
    expect(await byFilter('id eq "not-a-uuid"')).toEqual([]);
    expect(await byFilter('emails[type eq "work"].value eq "FILTERED.work@example.com"')).toEqual([id]);
    expect(await byFilter('emails[type eq "work"].value eq "filtered.home@example.org"')).toEqual([]);
    expect(await byFilter('emails.value eq "filtered.home@example.org"')).toEqual([id]);
    expect(
      await byFilter(
        'urn:ietf:params:scim:schemas:core:2.0:User:userName eq "filtered@example.com" AND externalId eq "Ext-Filtered"',
      ),
    ).toEqual([id]);
    expect(await byFilter('userName eq "filtered@example.com" and externalId eq "other"')).toEqual([]);
  });

  it('a filter never reaches another company', async () => {
    const res = await scimCall(
      env,
      'GET',
      `/scim/v2/Users?filter=${encodeURIComponent('externalId eq "Ext-Filtered"')}`,
      b.token,
    );
    expect(res.body.totalResults).toBe(0);
  });

  it('attributes returns only what is named (with id and schemas); excludedAttributes all but that', async () => {
    let res = await scimCall(
      env,
      'GET',
      `/scim/v2/Users/${id}?attributes=userName,name.givenName,EMAILS.value`,
      a.token,
    );
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toEqual({
      schemas: expect.any(Array),
      id,
      userName: 'filtered@example.com',
      name: { givenName: 'Ada' },
      emails: [{ value: 'filtered.work@example.com' }, { value: 'filtered.home@example.org' }],
    });
    res = await scimCall(
      env,
      'GET',
      `/scim/v2/Users/${id}?attributes=${encodeURIComponent(`${EXTENSION_SCHEMA}:department,active`)}`,
      a.token,
    );
    expect(res.body).toEqual({
      schemas: expect.any(Array),
      id,
      active: true,
      [EXTENSION_SCHEMA]: { department: 'engineering' },
    });
    res = await scimCall(
      env,
      'GET',
      `/scim/v2/Users/${id}?excludedAttributes=permissions,${EXTENSION_SCHEMA},meta,id,emails.primary`,
      a.token,
    );
    expect(res.body.id).toBe(id);
    expect(res.body).not.toHaveProperty('permissions');
    expect(res.body).not.toHaveProperty('meta');
    expect(res.body).not.toHaveProperty(EXTENSION_SCHEMA);
    expect(res.body.emails).toEqual([
      { value: 'filtered.work@example.com', type: 'work' },
      { value: 'filtered.home@example.org', type: 'home' },
    ]);
    const listed = await list(`filter=${encodeURIComponent('externalId eq "Ext-Filtered"')}&attributes=userName`);
    expect(listed.body.Resources).toEqual([{ schemas: expect.any(Array), id, userName: 'filtered@example.com' }]);
  });
});
