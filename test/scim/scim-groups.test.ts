import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import {
  ERROR_SCHEMA,
  EXTENSION_SCHEMA,
  GROUP_EXTENSION_SCHEMA,
  GROUP_SCHEMA,
  LIST_SCHEMA,
  ORIGIN,
  PATCH_SCHEMA,
  groupBody,
  scimCall,
  seedScimCompanies,
  type ScimCall,
  type ScimCompany,
} from '../helpers/scim.js';

/*
 * /scim/v2/Groups: identity providers push groups, and a group carries a role (our Group extension's permissions).
 * A user's effective permissions are its own plus its groups'; every membership change is on the user's trail.
 */

const env = useTestEnv();
let a: ScimCompany;
let b: ScimCompany;
beforeAll(async () => ({ a, b } = await seedScimCompanies(env)));

/** A user of company `c` with no permissions of its own: what its groups grant is all it has. */
async function createUser(userName: string, c: ScimCompany = a): Promise<string> {
  const res = await scimCall(env, 'POST', '/scim/v2/Users', c.token, {
    schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
    userName,
    name: { givenName: 'Grace', familyName: 'Hopper' },
  });
  expect(res.status, res.raw).toBe(201);
  return res.body.id as string;
}

async function createGroup(body: Record<string, unknown>, c: ScimCompany = a): Promise<ScimCall> {
  const res = await scimCall(env, 'POST', '/scim/v2/Groups', c.token, body);
  expect(res.status, res.raw).toBe(201);
  return res;
}

const patchGroup = (id: string, operations: unknown[], token = a.token) =>
  scimCall(env, 'PATCH', `/scim/v2/Groups/${id}`, token, { schemas: [PATCH_SCHEMA], Operations: operations });

const effectiveOf = async (userId: string, c: ScimCompany = a) => {
  const res = await scimCall(
    env,
    'GET',
    `/scim/v2/Users/${userId}?attributes=groups,${EXTENSION_SCHEMA}:effectivePermissions`,
    c.token,
  );
  expect(res.status, res.raw).toBe(200);
  return { groups: res.body.groups, effective: res.body[EXTENSION_SCHEMA]?.effectivePermissions };
};

const userAudit = async (userId: string) =>
  (
    await env.ctx.pool.query(
      `SELECT action, changes, actor FROM dashboard_user_audit WHERE dashboard_user_id = $1 ORDER BY id`,
      [userId],
    )
  ).rows;

function expectScimError(res: ScimCall, status: number, scimType?: string): void {
  expect(res.status, res.raw).toBe(status);
  expect(res.headers['content-type']).toMatch(/^application\/scim\+json/);
  expect(res.body.schemas).toEqual([ERROR_SCHEMA]);
  if (scimType) expect(res.body.scimType).toBe(scimType);
}

const editors = {
  appGroup: [{ appGroupName: 'Product', appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }] }],
};
const marketingAdmin = {
  companyPermissions: ['manage_company_settings'],
  appGroup: [{ appGroupName: 'Marketing', appGroupPermissions: ['admin'] }],
};

describe('Groups: create, read, find, and the role they carry', () => {
  it('creates a group with members and a role; members show it in groups and in their effective permissions', async () => {
    const ada = await createUser('ada.groups@example.com');
    const grace = await createUser('grace.groups@example.com');
    const created = await createGroup(groupBody('Product Editors', [ada, grace], editors));
    const group = created.body;
    expect(created.headers.location).toBe(`http://127.0.0.1:3000/scim/v2/Groups/${group.id}`);
    expect(group).toMatchObject({
      schemas: [GROUP_SCHEMA, GROUP_EXTENSION_SCHEMA],
      displayName: 'Product Editors',
      members: [
        {
          value: expect.any(String),
          display: expect.stringMatching(/groups@example.com$/),
          type: 'User',
          $ref: expect.stringContaining('/scim/v2/Users/'),
        },
        expect.objectContaining({ type: 'User' }),
      ],
      [GROUP_EXTENSION_SCHEMA]: {
        permissions: {
          companyPermissions: [],
          appGroup: [
            {
              appGroupId: a.productId,
              appGroupName: 'Product',
              appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }],
            },
          ],
        },
      },
      meta: { resourceType: 'Group', location: created.headers.location },
    });
    expect(group.members.map((m: { value: string }) => m.value).sort()).toEqual([ada, grace].sort());
    expect((await scimCall(env, 'GET', `/scim/v2/Groups/${group.id}`, a.token)).body).toEqual(group);

    const { groups, effective } = await effectiveOf(ada);
    expect(groups).toEqual([
      {
        value: group.id,
        display: 'Product Editors',
        $ref: `http://127.0.0.1:3000/scim/v2/Groups/${group.id}`,
        type: 'direct',
      },
    ]);
    // The set's strings are listed with the set (seeded Editors holds basic_access).
    expect(effective).toEqual({
      companyPermissions: [],
      appGroup: [
        {
          appGroupId: a.productId,
          appGroupName: 'Product',
          appGroupPermissions: ['basic_access'],
          appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }],
          team: [],
        },
      ],
    });
    // The user's own permissions are untouched: none.
    const user = (await scimCall(env, 'GET', `/scim/v2/Users/${ada}`, a.token)).body;
    expect(user).not.toHaveProperty('permissions');
    expect(user.groups).toHaveLength(1);

    const audit = await userAudit(ada);
    expect(audit.map((r) => r.action)).toEqual(['create', 'join_group']);
    expect(audit[1].actor).toBe(`okta-a (${ORIGIN})`);
    expect(audit[1].changes).toMatchObject({
      groups: { from: [], to: ['Product Editors'] },
      'effectivePermissions.appGroup[Product]': {
        from: null,
        to: {
          appGroupPermissions: ['basic_access'],
          appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }],
          team: [],
        },
      },
    });
    const groupAudit = (
      await env.ctx.pool.query(`SELECT action, changes FROM scim_group_audit WHERE group_id = $1`, [group.id])
    ).rows;
    expect(groupAudit).toEqual([
      {
        action: 'create',
        changes: expect.objectContaining({
          displayName: { from: null, to: 'Product Editors' },
          members: { from: null, to: 2 },
        }),
      },
    ]);
  });

  it('own permissions and every group grant join per workspace and team', async () => {
    const id = (
      await scimCall(env, 'POST', '/scim/v2/Users', a.token, {
        schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'],
        userName: 'joined@example.com',
        name: { givenName: 'J', familyName: 'Oined' },
        permissions: {
          appGroup: [
            {
              appGroupName: 'Marketing',
              appGroupPermissions: ['basic_access'],
              team: [{ teamName: 'Growth', teamPermissions: ['admin'] }],
            },
          ],
        },
      })
    ).body.id as string;
    await createGroup(groupBody('Marketing Admins', [id], marketingAdmin));
    await createGroup(
      groupBody('Growth Viewers', [id], {
        appGroup: [
          {
            appGroupName: 'Marketing',
            appGroupPermissions: [],
            team: [{ teamName: 'Growth', teamPermissions: ['view_user_profile'] }],
          },
        ],
      }),
    );
    const { effective } = await effectiveOf(id);
    expect(effective).toEqual({
      companyPermissions: ['manage_company_settings'],
      appGroup: [
        {
          appGroupId: a.marketingId,
          appGroupName: 'Marketing',
          appGroupPermissions: ['basic_access', 'admin'],
          team: [{ teamId: a.growthTeamId, teamName: 'Growth', teamPermissions: ['admin', 'view_user_profile'] }],
        },
      ],
    });
  });

  it('finds groups by displayName (any letter case), externalId, id and member, paged', async () => {
    const member = await createUser('finder@example.com');
    const g = (await createGroup({ ...groupBody('Finance Team', [member]), externalId: 'okta-grp-1' })).body;
    const find = async (filter: string) =>
      (await scimCall(env, 'GET', `/scim/v2/Groups?filter=${encodeURIComponent(filter)}`, a.token)).body;
    for (const filter of [
      'displayName eq "finance team"',
      'DISPLAYNAME EQ "FINANCE TEAM"',
      'externalId eq "okta-grp-1"',
      `id eq "${g.id}"`,
      `members[value eq "${member}"]`,
      `members.value eq "${member}"`,
      `displayName eq "Finance Team" and members[value eq "${member}"]`,
    ]) {
      const found = await find(filter);
      expect(found, filter).toMatchObject({ schemas: [LIST_SCHEMA], totalResults: 1, startIndex: 1, itemsPerPage: 1 });
      expect(found.Resources[0].id).toBe(g.id);
    }
    expect((await find('displayName eq "Nobody"')).totalResults).toBe(0);
    // Entra ID reads groups without members.
    const lean = await scimCall(
      env,
      'GET',
      `/scim/v2/Groups?filter=${encodeURIComponent('displayName eq "Finance Team"')}&excludedAttributes=members`,
      a.token,
    );
    expect(lean.body.Resources[0]).not.toHaveProperty('members');
    expect(lean.body.Resources[0].displayName).toBe('Finance Team');
    const paged = await scimCall(env, 'GET', '/scim/v2/Groups?startIndex=2&count=1', a.token);
    expect(paged.body).toMatchObject({ startIndex: 2, itemsPerPage: 1 });
    expect(paged.body.totalResults).toBeGreaterThanOrEqual(3);
    const bad = await scimCall(
      env,
      'GET',
      `/scim/v2/Groups?filter=${encodeURIComponent('displayName co "Fin"')}`,
      a.token,
    );
    expectScimError(bad, 400, 'invalidFilter');
  });
});

describe('Groups: PATCH in Okta and Entra ID bodies', () => {
  it("Okta: rename with the group's id in the value, add members, remove one by filter", async () => {
    const [u1, u2] = [await createUser('okta1@example.com'), await createUser('okta2@example.com')];
    const g = (await createGroup(groupBody('Okta Push'))).body;
    expect(g).not.toHaveProperty('members');
    let res = await patchGroup(g.id, [{ op: 'replace', value: { id: g.id, displayName: 'Okta Push Renamed' } }]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.displayName).toBe('Okta Push Renamed');
    res = await patchGroup(g.id, [
      {
        op: 'add',
        path: 'members',
        value: [
          { value: u1, display: 'okta1@example.com' },
          { value: u2, display: 'okta2@example.com' },
        ],
      },
    ]);
    expect(res.body.members.map((m: { value: string }) => m.value).sort()).toEqual([u1, u2].sort());
    res = await patchGroup(g.id, [{ op: 'remove', path: `members[value eq "${u1}"]` }]);
    expect(res.body.members.map((m: { value: string }) => m.value)).toEqual([u2]);
    expect((await userAudit(u1)).map((r) => r.action)).toEqual(['create', 'join_group', 'leave_group']);
  });

  it('Entra ID: PascalCase Add and Remove of members with a value list, Replace of displayName and externalId', async () => {
    const [u1, u2, u3] = [
      await createUser('entra1@example.com'),
      await createUser('entra2@example.com'),
      await createUser('entra3@example.com'),
    ];
    const g = (await createGroup(groupBody('Entra Group'))).body;
    let res = await patchGroup(g.id, [
      { op: 'Add', path: 'members', value: [{ value: u1 }, { value: u2 }] },
      { op: 'Add', path: 'members', value: [{ value: u3 }, { value: u1 }] },
      { op: 'Replace', path: 'displayName', value: 'Entra Group 2' },
      { op: 'Replace', path: 'externalId', value: 'aad-1' },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body).toMatchObject({ displayName: 'Entra Group 2', externalId: 'aad-1' });
    expect(res.body.members).toHaveLength(3);
    res = await patchGroup(g.id, [{ op: 'Remove', path: 'members', value: [{ value: u1 }, { value: u3 }] }]);
    expect(res.body.members.map((m: { value: string }) => m.value)).toEqual([u2]);
    res = await patchGroup(g.id, [{ op: 'replace', path: 'members', value: [{ value: u3 }] }]);
    expect(res.body.members.map((m: { value: string }) => m.value)).toEqual([u3]);
    // remove members without a value empties the group (scim-sanity's form), and the attribute is left out.
    res = await patchGroup(g.id, [{ op: 'remove', path: 'members' }]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body).not.toHaveProperty('members');
  });

  it("a member id that names no user of the company is ignored, not refused (another company's user, a deleted one, not a uuid)", async () => {
    const mine = await createUser('mine@example.com');
    const theirs = await createUser('theirs@example.com', b);
    const g = (await createGroup(groupBody('Mixed'))).body;
    const res = await patchGroup(g.id, [
      {
        op: 'add',
        path: 'members',
        value: [
          { value: mine },
          { value: theirs },
          { value: 'fake-member-id' },
          { value: '00000000-0000-4000-8000-000000000000' },
        ],
      },
    ]);
    expect(res.status, res.raw).toBe(200);
    expect(res.body.members.map((m: { value: string }) => m.value)).toEqual([mine]);
    expect((await effectiveOf(theirs, b)).groups).toBeUndefined();
    expect((await userAudit(theirs)).map((r) => r.action)).toEqual(['create']);
  });

  it("a change of the group's role is on each member's trail as group_grants, and takes effect at once", async () => {
    const u = await createUser('role.change@example.com');
    const g = (await createGroup(groupBody('Role Change', [u], editors))).body;
    const res = await patchGroup(g.id, [
      { op: 'replace', path: `${GROUP_EXTENSION_SCHEMA}:permissions`, value: marketingAdmin },
    ]);
    expect(res.status, res.raw).toBe(200);
    // replace of a complex attribute sets the sub-attributes given: appGroup is Marketing's alone now.
    expect(
      res.body[GROUP_EXTENSION_SCHEMA].permissions.appGroup.map((x: { appGroupName: string }) => x.appGroupName),
    ).toEqual(['Marketing']);
    const { effective } = await effectiveOf(u);
    expect(effective.companyPermissions).toEqual(['manage_company_settings']);
    const audit = await userAudit(u);
    expect(audit.at(-1)).toMatchObject({
      action: 'group_grants',
      changes: { 'effectivePermissions.companyPermissions': { from: [], to: ['manage_company_settings'] } },
    });
    // A rename by PATCH (which re-reads the role by names) changes no member's access: no row on its trail.
    const rows = (await userAudit(u)).length;
    expect(
      (await patchGroup(g.id, [{ op: 'replace', path: 'displayName', value: 'Role Change Renamed' }])).status,
    ).toBe(200);
    expect(await userAudit(u)).toHaveLength(rows);
    // Removing the role (the extension's URN as the path) leaves the group without grants.
    const bare = await patchGroup(g.id, [{ op: 'remove', path: GROUP_EXTENSION_SCHEMA }]);
    expect(bare.body).not.toHaveProperty(GROUP_EXTENSION_SCHEMA);
    expect((await effectiveOf(u)).effective).toEqual({ companyPermissions: [], appGroup: [] });
  });
});

describe('Groups: replace and delete', () => {
  it('PUT renames and keeps members when omitted; members [] empties the group', async () => {
    const u = await createUser('put.member@example.com');
    const g = (await createGroup(groupBody('Put Group', [u]))).body;
    let res = await scimCall(env, 'PUT', `/scim/v2/Groups/${g.id}`, a.token, {
      schemas: [GROUP_SCHEMA],
      displayName: 'Put Group Renamed',
    });
    expect(res.status, res.raw).toBe(200);
    expect(res.body.members.map((m: { value: string }) => m.value)).toEqual([u]);
    // Echoing a GET back changes nothing.
    const before = (
      await env.ctx.pool.query(`SELECT count(*)::int AS n FROM scim_group_audit WHERE group_id = $1`, [g.id])
    ).rows[0].n;
    res = await scimCall(env, 'PUT', `/scim/v2/Groups/${g.id}`, a.token, res.body);
    expect(res.status, res.raw).toBe(200);
    expect(
      (await env.ctx.pool.query(`SELECT count(*)::int AS n FROM scim_group_audit WHERE group_id = $1`, [g.id])).rows[0]
        .n,
    ).toBe(before);
    res = await scimCall(env, 'PUT', `/scim/v2/Groups/${g.id}`, a.token, {
      schemas: [GROUP_SCHEMA],
      displayName: 'Put Group Renamed',
      members: [],
    });
    expect(res.body).not.toHaveProperty('members');
    expect((await userAudit(u)).map((r) => r.action)).toEqual(['create', 'join_group', 'leave_group']);
  });

  it("deleting a group takes its grants away at once, on each member's trail", async () => {
    const u = await createUser('delete.member@example.com');
    const g = (await createGroup(groupBody('Doomed', [u], marketingAdmin))).body;
    expect((await effectiveOf(u)).effective.companyPermissions).toEqual(['manage_company_settings']);
    const res = await scimCall(env, 'DELETE', `/scim/v2/Groups/${g.id}`, a.token);
    expect(res.status).toBe(204);
    expect(res.raw).toBe('');
    expectScimError(await scimCall(env, 'GET', `/scim/v2/Groups/${g.id}`, a.token), 404);
    const after = await effectiveOf(u);
    expect(after.groups).toBeUndefined();
    expect(after.effective).toEqual({ companyPermissions: [], appGroup: [] });
    expect((await userAudit(u)).at(-1)).toMatchObject({
      action: 'leave_group',
      changes: { groups: { from: ['Doomed'], to: [] } },
    });
    const trail = (
      await env.ctx.pool.query(`SELECT action FROM scim_group_audit WHERE group_id = $1 ORDER BY id`, [g.id])
    ).rows;
    expect(trail.map((r) => r.action)).toEqual(['create', 'delete']);
  });

  it('deleting a user ends its memberships', async () => {
    const u = await createUser('leaving.user@example.com');
    const g = (await createGroup(groupBody('Shrinking', [u]))).body;
    expect((await scimCall(env, 'DELETE', `/scim/v2/Users/${u}`, a.token)).status).toBe(204);
    expect((await scimCall(env, 'GET', `/scim/v2/Groups/${g.id}`, a.token)).body).not.toHaveProperty('members');
  });
});

describe('Groups: refusals change nothing', () => {
  const snapshot = async () => {
    const q = async (sql: string) => (await env.ctx.pool.query(sql)).rows;
    return {
      groups: await q(`SELECT * FROM scim_groups ORDER BY id`),
      members: await q(`SELECT group_id, user_id FROM scim_group_members ORDER BY group_id, user_id`),
      audit: await q(`SELECT count(*)::int AS n FROM scim_group_audit`),
      userAudit: await q(`SELECT count(*)::int AS n FROM dashboard_user_audit`),
    };
  };

  it('displayName is unique per company ignoring letter case, on create and on rename; another company may use it', async () => {
    await createGroup(groupBody('Unique Name'));
    const other = (await createGroup(groupBody('Other Name'))).body;
    const before = await snapshot();
    const dup = await scimCall(env, 'POST', '/scim/v2/Groups', a.token, groupBody('UNIQUE NAME'));
    expectScimError(dup, 409, 'uniqueness');
    const rename = await patchGroup(other.id, [{ op: 'replace', path: 'displayName', value: 'unique name' }]);
    expectScimError(rename, 409, 'uniqueness');
    expect(await snapshot()).toEqual(before);
    await createGroup(groupBody('Unique Name'), b);
  });

  it.each([
    ['malformed JSON', '{"displayName": ', 'invalidSyntax'],
    ['not an object', '[]', 'invalidSyntax'],
    ['displayName missing', { schemas: [GROUP_SCHEMA] }, 'invalidValue'],
    ['displayName a number', { schemas: [GROUP_SCHEMA], displayName: 7 }, 'invalidValue'],
    ['displayName too long', { schemas: [GROUP_SCHEMA], displayName: 'x'.repeat(256) }, 'invalidValue'],
    [
      'schemas without the Group URN',
      { schemas: ['urn:ietf:params:scim:schemas:core:2.0:User'], displayName: 'G' },
      'invalidValue',
    ],
    ['members not an array', { schemas: [GROUP_SCHEMA], displayName: 'G', members: { value: 'x' } }, 'invalidValue'],
    [
      'a member of type Group',
      { schemas: [GROUP_SCHEMA], displayName: 'G', members: [{ value: 'x', type: 'Group' }] },
      'invalidValue',
    ],
    [
      'too many members',
      {
        schemas: [GROUP_SCHEMA],
        displayName: 'G',
        members: Array.from({ length: 10_001 }, (_, i) => ({ value: `m${i}` })),
      },
      'invalidValue',
    ],
    [
      'a role naming an unknown workspace',
      groupBody('G', [], { appGroup: [{ appGroupName: 'Nowhere', appGroupPermissions: [] }] }),
      'invalidValue',
    ],
    [
      'a role with a permission not allowed',
      groupBody('G', [], { companyPermissions: ['rule_the_world'] }),
      'invalidValue',
    ],
  ])('POST with %s: 400, nothing stored', async (_label, body, scimType) => {
    const before = await snapshot();
    const res = await scimCall(env, 'POST', '/scim/v2/Groups', a.token, body);
    expectScimError(res, 400, scimType);
    expect(await snapshot()).toEqual(before);
  });

  it("a role naming another company's workspace is refused with the path of the field", async () => {
    const res = await scimCall(
      env,
      'POST',
      '/scim/v2/Groups',
      b.token,
      groupBody('Cross', [], { appGroup: [{ appGroupId: a.marketingId, appGroupPermissions: [] }] }),
    );
    expectScimError(res, 400, 'invalidValue');
    expect(res.body.detail).toContain(
      `${GROUP_EXTENSION_SCHEMA}:permissions.appGroup[0].appGroupId: no workspace with this id in this company`,
    );
  });

  it('PATCH refusals: all or nothing', async () => {
    const u = await createUser('patch.refusal@example.com');
    const g = (await createGroup(groupBody('Patch Refusals', [u]))).body;
    const before = await snapshot();
    const cases: [unknown[], string][] = [
      [
        [
          { op: 'add', path: 'members', value: [{ value: u }] },
          { op: 'remove', path: 'displayName' },
        ],
        'mutability',
      ],
      [
        [
          { op: 'replace', path: 'displayName', value: 'x' },
          { op: 'replace', path: 'nothing', value: 1 },
        ],
        'invalidPath',
      ],
      [[{ op: 'replace', value: { id: '00000000-0000-4000-8000-000000000000' } }], 'mutability'],
      [[{ op: 'remove' }], 'noTarget'],
      [[{ op: 'add', path: `members[value eq "${u}"]`, value: 'x' }], 'invalidPath'],
      [[{ op: 'replace', path: 'displayName', value: 42 }], 'invalidValue'],
      [
        [{ op: 'replace', path: `${GROUP_EXTENSION_SCHEMA}:permissions`, value: { companyPermissions: ['fly'] } }],
        'invalidValue',
      ],
      [[{ op: 'replace', path: 'urn:example:other:Group:x', value: 1 }], 'invalidPath'],
    ];
    for (const [operations, scimType] of cases) expectScimError(await patchGroup(g.id, operations), 400, scimType);
    expect(await snapshot()).toEqual(before);
  });

  it("unknown ids, another company's group, missing credentials and an API key: nothing seen, nothing changed", async () => {
    const g = (await createGroup(groupBody('Private Group'))).body;
    const before = await snapshot();
    for (const id of ['00000000-0000-4000-8000-000000000000', 'not-a-uuid', g.id]) {
      const token = id === g.id ? b.token : a.token;
      for (const [method, body] of [
        ['GET', undefined],
        ['PUT', groupBody('X')],
        ['PATCH', { schemas: [PATCH_SCHEMA], Operations: [{ op: 'remove', path: 'members' }] }],
        ['DELETE', undefined],
      ] as const) {
        const res = await scimCall(env, method, `/scim/v2/Groups/${id}`, token, body);
        expectScimError(res, 404);
        expect(res.body.detail).toBe('Group not found');
      }
    }
    const listed = await scimCall(env, 'GET', '/scim/v2/Groups', b.token);
    expect(listed.body.Resources.map((x: { id: string }) => x.id)).not.toContain(g.id);
    const noToken = await env.app.inject({
      method: 'GET',
      url: '/scim/v2/Groups',
      headers: { 'x-request-origin': ORIGIN },
    });
    expect(noToken.statusCode).toBe(401);
    const apiKey = await scimCall(env, 'POST', '/scim/v2/Groups', a.apiKey, groupBody('By API key'));
    expect(apiKey.status).toBe(401);
    expect(await snapshot()).toEqual(before);
  });
});

describe('Groups: roles declared in the workspace file', () => {
  const fileOf = (set: string) => `
company: { name: Role Company }
scim_tokens: [{ name: file-idp, secret: ces_scim_file0000000000000000000000000000000 }]
permission_sets:
  - { name: Editors, permissions: [basic_access, edit_segments] }
  - { name: Viewers, permissions: [basic_access] }
scim_groups:
  - display_name: Marketing Editors
    permissions: { appGroup: [{ appGroupName: Studio, appGroupPermissionSets: [{ appGroupPermissionSetName: ${set} }] }] }
workspaces: [{ name: Studio }]
`;

  it('creates the group the identity provider will push, with its role; the push links to it; a role change reaches the members', async () => {
    const { applyWorkspaceFile } = await import('../../src/features/workspace/apply.js');
    const { parseWorkspaceFile } = await import('../../src/features/workspace/parse.js');
    const summary = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(fileOf('Editors')));
    expect(summary.counts.scim_groups).toEqual({ created: 1, updated: 0, unchanged: 0 });
    const token = 'ces_scim_file0000000000000000000000000000000';
    const company = { ...a, token, companyId: summary.companyId };

    // Okta looks the group up by displayName before pushing it, and finds the declared one; a create would be 409.
    const found = await scimCall(
      env,
      'GET',
      `/scim/v2/Groups?filter=${encodeURIComponent('displayName eq "marketing editors"')}`,
      token,
    );
    expect(found.body.totalResults).toBe(1);
    const group = found.body.Resources[0];
    expect(group[GROUP_EXTENSION_SCHEMA].permissions.appGroup[0]).toMatchObject({
      appGroupName: 'Studio',
      appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }],
    });
    expectScimError(
      await scimCall(env, 'POST', '/scim/v2/Groups', token, groupBody('Marketing Editors')),
      409,
      'uniqueness',
    );

    const member = await createUser('file.member@example.com', company);
    expect(
      (await patchGroup(group.id, [{ op: 'add', path: 'members', value: [{ value: member }] }], token)).status,
    ).toBe(200);
    expect((await effectiveOf(member, company)).effective.appGroup[0].appGroupPermissions).toEqual([
      'basic_access',
      'edit_segments',
    ]);

    // The same file again changes nothing; another role in it reaches the member, on its trail, by the file.
    expect((await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(fileOf('Editors')))).counts.scim_groups).toEqual({
      created: 0,
      updated: 0,
      unchanged: 1,
    });
    expect((await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(fileOf('Viewers')))).counts.scim_groups).toEqual({
      created: 0,
      updated: 1,
      unchanged: 0,
    });
    expect((await effectiveOf(member, company)).effective.appGroup[0].appGroupPermissions).toEqual(['basic_access']);
    expect((await userAudit(member)).at(-1)).toMatchObject({
      action: 'group_grants',
      actor: 'workspace file (ces workspace apply)',
    });
    // Members are the identity provider's: the file left them.
    expect(
      (await scimCall(env, 'GET', `/scim/v2/Groups/${group.id}`, token)).body.members.map(
        (m: { value: string }) => m.value,
      ),
    ).toEqual([member]);
  });

  it('a role naming what the company lacks refuses the whole file, naming the field', async () => {
    const { applyWorkspaceFile } = await import('../../src/features/workspace/apply.js');
    const { parseWorkspaceFile, WorkspaceFileError } = await import('../../src/features/workspace/parse.js');
    const apply = applyWorkspaceFile(
      env.ctx.pool,
      parseWorkspaceFile(fileOf('Nobody').replace('Role Company', 'Role Company 2').replace('file0', 'file1')),
    );
    await expect(apply).rejects.toBeInstanceOf(WorkspaceFileError);
    await expect(apply).rejects.toThrow(
      /scim_groups\[0\]\.permissions: permissions\.appGroup\[0\]\.appGroupPermissionSets\[0\]\.appGroupPermissionSetName: no permission set named "Nobody"/,
    );
    expect(
      (await env.ctx.pool.query(`SELECT count(*)::int AS n FROM companies WHERE name = 'Role Company 2'`)).rows[0].n,
    ).toBe(0);
  });
});
