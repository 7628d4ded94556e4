import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import {
  EXTENSION_SCHEMA,
  LIST_SCHEMA,
  ORIGIN,
  USER_SCHEMA,
  scimCall,
  seedScimCompanies,
  seedScimCompany,
  userBody,
  type ScimCompany,
} from '../helpers/scim.js';

const env = useTestEnv();
let a: ScimCompany;
let b: ScimCompany;
beforeAll(async () => ({ a, b } = await seedScimCompanies(env)));

const filterUrl = (userName: string) => `/scim/v2/Users?filter=${encodeURIComponent(`userName eq "${userName}"`)}`;

async function auditRows(userId: string) {
  const { rows } = await env.ctx.pool.query(
    `SELECT action, actor, changes, scim_token_id::text, request_origin, company_id::text FROM dashboard_user_audit WHERE dashboard_user_id = $1 ORDER BY id`,
    [userId],
  );
  return rows;
}

describe('SCIM round trip: create, filter lookup, update, delete', () => {
  it('creates, finds, replaces and deletes a dashboard user, recording each change', async () => {
    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('Ada.Lovelace@Example.com'));
    expect(created.status, created.raw).toBe(201);
    expect(created.headers['content-type']).toMatch(/^application\/scim\+json/);
    const user = created.body;
    expect(user.id).toMatch(/^[0-9a-f-]{36}$/);
    expect(created.headers.location).toBe(`http://127.0.0.1:3000/scim/v2/Users/${user.id}`);
    expect(user).toMatchObject({
      schemas: [USER_SCHEMA, EXTENSION_SCHEMA],
      userName: 'Ada.Lovelace@Example.com',
      name: { givenName: 'Ada', familyName: 'Lovelace' },
      active: true,
      department: 'engineering',
      lastSignInAt: null,
      permissions: {
        companyPermissions: ['manage_company_settings'],
        appGroup: [
          {
            appGroupId: a.marketingId,
            appGroupName: 'Marketing',
            appGroupPermissions: ['basic_access', 'edit_segments'],
            team: [{ teamId: a.growthTeamId, teamName: 'Growth', teamPermissions: ['admin'] }],
          },
          {
            appGroupId: a.productId,
            appGroupName: 'Product',
            appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }],
          },
        ],
      },
      meta: { resourceType: 'User', location: created.headers.location },
    });
    // No emails were given: unassigned, so left out (RFC 7643 2.5).
    expect(user).not.toHaveProperty('emails');
    // The set entry carries no direct permissions, as the request gave none.
    expect(user.permissions.appGroup[1]).not.toHaveProperty('appGroupPermissions');
    const { rows: stored } = await env.ctx.pool.query(
      `SELECT user_name, company_id::text FROM dashboard_users WHERE id = $1`,
      [user.id],
    );
    expect(stored).toEqual([{ user_name: 'Ada.Lovelace@Example.com', company_id: a.companyId }]);

    // Identity providers look users up by userName before provisioning; the match ignores letter case.
    const found = await scimCall(env, 'GET', filterUrl('ada.lovelace@example.COM'), a.token);
    expect(found.status).toBe(200);
    expect(found.headers['content-type']).toMatch(/^application\/scim\+json/);
    expect(found.body).toEqual({
      schemas: [LIST_SCHEMA],
      totalResults: 1,
      startIndex: 1,
      itemsPerPage: 1,
      Resources: [user],
    });

    const got = await scimCall(env, 'GET', `/scim/v2/Users/${user.id}`, a.token);
    expect(got.status).toBe(200);
    expect(got.body).toEqual(user);

    const replacement = {
      schemas: [USER_SCHEMA],
      name: { givenName: 'Ada', familyName: 'King' },
      department: 'finance',
      permissions: {
        companyPermissions: [],
        appGroup: [{ appGroupName: 'Product', appGroupPermissions: ['view_usage_data'], team: [] }],
      },
    };
    const replaced = await scimCall(env, 'PUT', `/scim/v2/Users/${user.id}`, a.token, replacement);
    expect(replaced.status, replaced.raw).toBe(200);
    expect(replaced.headers['content-type']).toMatch(/^application\/scim\+json/);
    expect(replaced.body).toMatchObject({
      id: user.id,
      userName: 'Ada.Lovelace@Example.com',
      name: { givenName: 'Ada', familyName: 'King' },
      department: 'finance',
      lastSignInAt: null,
      permissions: {
        companyPermissions: [],
        appGroup: [
          { appGroupId: a.productId, appGroupName: 'Product', appGroupPermissions: ['view_usage_data'], team: [] },
        ],
      },
    });
    expect(replaced.body.meta.created).toBe(user.meta.created);
    expect(Date.parse(replaced.body.meta.lastModified)).toBeGreaterThanOrEqual(Date.parse(user.meta.lastModified));
    expect((await scimCall(env, 'GET', `/scim/v2/Users/${user.id}`, a.token)).body).toEqual(replaced.body);

    const deleted = await scimCall(env, 'DELETE', `/scim/v2/Users/${user.id}`, a.token);
    expect(deleted.status).toBe(204);
    expect(deleted.raw).toBe('');
    const after = await scimCall(env, 'GET', `/scim/v2/Users/${user.id}`, a.token);
    expect(after.status).toBe(404);
    expect(after.body.detail).toBe('User not found');
    expect((await scimCall(env, 'GET', filterUrl('ada.lovelace@example.com'), a.token)).body).toMatchObject({
      totalResults: 0,
      Resources: [],
    });
    const list = await scimCall(env, 'GET', '/scim/v2/Users', a.token);
    expect(list.body.Resources.map((u: { id: string }) => u.id)).not.toContain(user.id);

    const audit = await auditRows(user.id);
    expect(audit.map((r) => r.action)).toEqual(['create', 'update', 'delete']);
    for (const row of audit) {
      expect(row.actor).toBe(`okta-a (${ORIGIN})`);
      expect(row.request_origin).toBe(ORIGIN);
      expect(row.company_id).toBe(a.companyId);
      expect(JSON.stringify(row)).not.toContain(a.token);
    }
    const tokenId = (await env.ctx.pool.query(`SELECT id::text FROM scim_tokens WHERE name = 'okta-a'`)).rows[0].id;
    expect(audit[0].scim_token_id).toBe(tokenId);
    expect(audit[0].changes).toMatchObject({
      userName: { from: null, to: 'Ada.Lovelace@Example.com' },
      department: { from: null, to: 'engineering' },
      'permissions.appGroup[Marketing]': {
        from: null,
        to: {
          appGroupPermissions: ['basic_access', 'edit_segments'],
          team: [{ teamName: 'Growth', teamPermissions: ['admin'] }],
        },
      },
    });
    // The update names exactly what changed: not the unchanged given name or userName.
    expect(Object.keys(audit[1].changes).sort()).toEqual(
      [
        'department',
        'name.familyName',
        'permissions.appGroup[Marketing]',
        'permissions.appGroup[Product]',
        'permissions.companyPermissions',
      ].sort(),
    );
    expect(audit[1].changes.department).toEqual({ from: 'engineering', to: 'finance' });
    expect(audit[1].changes['permissions.appGroup[Marketing]'].to).toBeNull();
    expect(audit[2].changes['name.familyName']).toEqual({ from: 'King', to: null });
  });

  it('accepts a PUT that echoes a GET (ids, meta, the same userName) and records nothing when nothing changed', async () => {
    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('echo@example.com'));
    expect(created.status).toBe(201);
    const replaced = await scimCall(env, 'PUT', `/scim/v2/Users/${created.body.id}`, a.token, created.body);
    expect(replaced.status, replaced.raw).toBe(200);
    expect(replaced.body).toEqual(created.body);
    expect((await auditRows(created.body.id)).map((r) => r.action)).toEqual(['create']);
  });

  it('userName ignores letter case (RFC 7643 caseExact false): one user, and the spelling stored is the last one sent', async () => {
    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('Alice@Example.com'));
    expect(created.status, created.raw).toBe(201);
    const again = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('alice@example.com'));
    expect(again.status).toBe(409);
    expect(again.body.scimType).toBe('uniqueness');
    for (const spelling of ['alice@example.com', 'ALICE@EXAMPLE.COM']) {
      const found = await scimCall(env, 'GET', filterUrl(spelling), a.token);
      expect(found.body.Resources.map((u: { id: string }) => u.id)).toEqual([created.body.id]);
    }
    // A PUT that repeats it in another case is the same user: the new spelling is stored (Entra ID sends the UPN's).
    const replaced = await scimCall(env, 'PUT', `/scim/v2/Users/${created.body.id}`, a.token, {
      ...created.body,
      userName: 'alice@example.com',
    });
    expect(replaced.status, replaced.raw).toBe(200);
    expect(replaced.body.userName).toBe('alice@example.com');
    const patched = await scimCall(env, 'PATCH', `/scim/v2/Users/${created.body.id}`, a.token, {
      schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
      Operations: [{ op: 'replace', path: 'userName', value: 'Alice@example.COM' }],
    });
    expect(patched.body.userName).toBe('Alice@example.COM');
    const audit = await auditRows(created.body.id);
    expect(audit.map((r) => r.changes.userName)).toEqual([
      { from: null, to: 'Alice@Example.com' },
      { from: 'Alice@Example.com', to: 'alice@example.com' },
      { from: 'alice@example.com', to: 'Alice@example.COM' },
    ]);
  });

  it('reads attribute names in any letter case in POST and PUT bodies (RFC 7643 2.1)', async () => {
    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, {
      SCHEMAS: [USER_SCHEMA],
      UserName: 'cased@example.com',
      NAME: { GIVENNAME: 'Ada', familyname: 'Lovelace' },
      Emails: [{ VALUE: 'cased@example.com', Primary: true }],
      DEPARTMENT: 'engineering',
      'URN:IETF:PARAMS:SCIM:SCHEMAS:EXTENSION:CES:2.0:USER': { Permissions: { CompanyPermissions: ['admin'] } },
    });
    expect(created.status, created.raw).toBe(201);
    expect(created.body).toMatchObject({
      userName: 'cased@example.com',
      name: { givenName: 'Ada', familyName: 'Lovelace' },
      emails: [{ value: 'cased@example.com', primary: true }],
      department: 'engineering',
      permissions: { companyPermissions: ['admin'], appGroup: [] },
    });
    const replaced = await scimCall(env, 'PUT', `/scim/v2/Users/${created.body.id}`, a.token, {
      schemas: [USER_SCHEMA],
      Name: { givenName: 'Augusta', FamilyName: 'King' },
      Active: false,
    });
    expect(replaced.status, replaced.raw).toBe(200);
    expect(replaced.body).toMatchObject({
      name: { givenName: 'Augusta', familyName: 'King' },
      active: false,
      department: 'engineering',
    });
  });

  it('creates a user with only the core attributes (no department, no permissions); the resource leaves them out', async () => {
    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, {
      schemas: [USER_SCHEMA],
      userName: 'core.only@example.com',
      name: { givenName: 'Core', familyName: 'Only' },
      displayName: 'Core Only',
      active: true,
      emails: [{ value: 'core.only@example.com', type: 'work', primary: true }],
    });
    expect(created.status, created.raw).toBe(201);
    expect(created.body).toMatchObject({ displayName: 'Core Only', active: true, lastSignInAt: null });
    for (const attribute of ['department', 'permissions', EXTENSION_SCHEMA])
      expect(created.body).not.toHaveProperty(attribute);
    const { rows } = await env.ctx.pool.query(
      `SELECT department, permissions, display_name FROM dashboard_users WHERE id = $1`,
      [created.body.id],
    );
    expect(rows).toEqual([{ department: null, permissions: null, display_name: 'Core Only' }]);
    // A PUT without them keeps them absent; with them, sets them; a PUT of the spec's body without displayName keeps
    // it.
    const replaced = await scimCall(env, 'PUT', `/scim/v2/Users/${created.body.id}`, a.token, {
      schemas: [USER_SCHEMA],
      name: { givenName: 'Core', familyName: 'Only' },
      department: 'bi',
      permissions: {},
    });
    expect(replaced.body).toMatchObject({
      displayName: 'Core Only',
      department: 'bi',
      permissions: { companyPermissions: [], appGroup: [] },
    });
  });

  it('resolves workspaces and teams by the ids a response returned, and shows current names after a rename', async () => {
    const body = userBody('by-id@example.com', {
      permissions: {
        appGroup: [
          {
            appGroupId: a.marketingId,
            appGroupPermissions: ['admin'],
            team: [{ teamId: a.growthTeamId, teamPermissions: ['basic_access'] }],
          },
        ],
      },
    });
    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, body);
    expect(created.status, created.raw).toBe(201);
    expect(created.body.permissions).toEqual({
      companyPermissions: [],
      appGroup: [
        {
          appGroupId: a.marketingId,
          appGroupName: 'Marketing',
          appGroupPermissions: ['admin'],
          team: [{ teamId: a.growthTeamId, teamName: 'Growth', teamPermissions: ['basic_access'] }],
        },
      ],
    });
    await env.ctx.pool.query(`UPDATE teams SET name = 'Growth EU' WHERE id = $1`, [a.growthTeamId]);
    try {
      const got = await scimCall(env, 'GET', `/scim/v2/Users/${created.body.id}`, a.token);
      expect(got.body.permissions.appGroup[0].team[0].teamName).toBe('Growth EU');
    } finally {
      await env.ctx.pool.query(`UPDATE teams SET name = 'Growth' WHERE id = $1`, [a.growthTeamId]);
    }
  });
});

describe('isolation between companies', () => {
  it("a company never sees, changes or deletes another company's users, and may reuse its userNames", async () => {
    const mine = await scimCall(env, 'POST', '/scim/v2/Users', a.token, userBody('shared@example.com'));
    expect(mine.status).toBe(201);
    const id = mine.body.id;

    expect((await scimCall(env, 'GET', `/scim/v2/Users/${id}`, b.token)).status).toBe(404);
    expect((await scimCall(env, 'GET', filterUrl('shared@example.com'), b.token)).body.totalResults).toBe(0);
    const bList = await scimCall(env, 'GET', '/scim/v2/Users', b.token);
    expect(bList.body.Resources.map((u: { id: string }) => u.id)).not.toContain(id);
    const put = await scimCall(
      env,
      'PUT',
      `/scim/v2/Users/${id}`,
      b.token,
      userBody('shared@example.com', { department: 'finance' }),
    );
    expect(put.status).toBe(404);
    expect(put.body.detail).toBe('User not found');
    expect((await scimCall(env, 'DELETE', `/scim/v2/Users/${id}`, b.token)).status).toBe(404);
    expect((await scimCall(env, 'GET', `/scim/v2/Users/${id}`, a.token)).body.department).toBe('engineering');

    // B has its own "Marketing" workspace: the same body resolves to B's workspace, not A's.
    const theirs = await scimCall(env, 'POST', '/scim/v2/Users', b.token, userBody('shared@example.com'));
    expect(theirs.status, theirs.raw).toBe(201);
    expect(theirs.body.id).not.toBe(id);
    expect(theirs.body.permissions.appGroup[0].appGroupId).toBe(b.marketingId);

    // A workspace id of another company is refused, not attached.
    const foreign = await scimCall(
      env,
      'POST',
      '/scim/v2/Users',
      b.token,
      userBody('foreign@example.com', {
        permissions: { appGroup: [{ appGroupId: a.productId, appGroupPermissions: ['admin'] }] },
      }),
    );
    expect(foreign.status).toBe(400);
    expect(foreign.body.detail).toContain('permissions.appGroup[0].appGroupId');
  });
});

describe('GET /scim/v2/Users paging', () => {
  it('pages by startIndex (from 1) and count, never repeating users', async () => {
    const co = await seedScimCompany(env, 'paging');
    for (let i = 0; i < 5; i++) {
      expect((await scimCall(env, 'POST', '/scim/v2/Users', co.token, userBody(`page${i}@example.com`))).status).toBe(
        201,
      );
    }
    const first = await scimCall(env, 'GET', '/scim/v2/Users?startIndex=1&count=2', co.token);
    expect(first.body).toMatchObject({ schemas: [LIST_SCHEMA], totalResults: 5, startIndex: 1, itemsPerPage: 2 });
    const second = await scimCall(env, 'GET', '/scim/v2/Users?startIndex=3&count=2', co.token);
    const third = await scimCall(env, 'GET', '/scim/v2/Users?startIndex=5&count=2', co.token);
    expect(third.body).toMatchObject({ totalResults: 5, startIndex: 5, itemsPerPage: 1 });
    const names = [first, second, third].flatMap((p) => p.body.Resources.map((u: { userName: string }) => u.userName));
    expect(names).toEqual([
      'page0@example.com',
      'page1@example.com',
      'page2@example.com',
      'page3@example.com',
      'page4@example.com',
    ]);

    const all = await scimCall(env, 'GET', '/scim/v2/Users', co.token);
    expect(all.body).toMatchObject({ totalResults: 5, startIndex: 1, itemsPerPage: 5 });
    // RFC 7644 3.4.2.4: count 0 gives only the total; a negative count means 0 and a startIndex below 1 means 1.
    expect((await scimCall(env, 'GET', '/scim/v2/Users?count=0', co.token)).body).toMatchObject({
      totalResults: 5,
      itemsPerPage: 0,
      Resources: [],
    });
    expect((await scimCall(env, 'GET', '/scim/v2/Users?count=-4', co.token)).body).toMatchObject({
      totalResults: 5,
      itemsPerPage: 0,
    });
    expect(
      (await scimCall(env, 'GET', '/scim/v2/Users?startIndex=0&count=1', co.token)).body.Resources[0].userName,
    ).toBe('page0@example.com');
    expect((await scimCall(env, 'GET', '/scim/v2/Users?startIndex=99', co.token)).body).toMatchObject({
      totalResults: 5,
      itemsPerPage: 0,
      Resources: [],
    });
  });
});

describe('company extensions of the allowed strings', () => {
  it('accepts departments and permissions from companies.settings.scim, only in that company', async () => {
    await env.ctx.pool.query(
      `UPDATE companies SET settings = '{"scim": {"departments": ["support"], "permissions": {"workspace": ["manage_canvases"], "company": ["billing"]}}}' WHERE id = $1`,
      [a.companyId],
    );
    const body = userBody('ext@example.com', {
      department: 'support',
      permissions: {
        companyPermissions: ['billing'],
        appGroup: [{ appGroupName: 'Marketing', appGroupPermissions: ['manage_canvases'] }],
      },
    });
    const ok = await scimCall(env, 'POST', '/scim/v2/Users', a.token, body);
    expect(ok.status, ok.raw).toBe(201);
    expect(ok.body.department).toBe('support');

    const refused = await scimCall(env, 'POST', '/scim/v2/Users', b.token, body);
    expect(refused.status).toBe(400);
    expect(refused.body.scimType).toBe('invalidValue');
    expect(refused.body.detail).toContain('department: "support" is not an allowed department');
    expect(refused.body.detail).toContain(
      'permissions.companyPermissions: "billing" is not an allowed company permission',
    );
    expect(refused.body.detail).toContain(
      'permissions.appGroup[0].appGroupPermissions: "manage_canvases" is not an allowed workspace permission',
    );
    const { rows } = await env.ctx.pool.query(
      `SELECT 1 FROM dashboard_users WHERE company_id = $1 AND user_name = 'ext@example.com'`,
      [b.companyId],
    );
    expect(rows).toHaveLength(0);
  });

  it('a plain list in settings.scim.permissions extends every level', async () => {
    await env.ctx.pool.query(
      `UPDATE companies SET settings = '{"scim": {"permissions": ["custom_everywhere"]}}' WHERE id = $1`,
      [b.companyId],
    );
    const body = userBody('plain-ext@example.com', {
      permissions: {
        companyPermissions: ['custom_everywhere'],
        appGroup: [
          {
            appGroupName: 'Marketing',
            appGroupPermissions: ['custom_everywhere'],
            team: [{ teamName: 'Growth', teamPermissions: ['custom_everywhere'] }],
          },
        ],
      },
    });
    const ok = await scimCall(env, 'POST', '/scim/v2/Users', b.token, body);
    expect(ok.status, ok.raw).toBe(201);
  });
});
