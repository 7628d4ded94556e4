import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { EXTENSION_SCHEMA, LIST_SCHEMA, scimCall, seedScimCompany, type ScimCompany } from '../helpers/scim.js';

/*
 * The provisioning flows of Okta (its SCIM 2.0 reference) and Microsoft Entra ID (its SCIM provisioning guide),
 * each with the request bodies those documents show. Two adaptations, both the spec's rules: userName must be an
 * email address (Entra's examples use plain strings), and department and permissions are required, so the bodies
 * carry them as an identity provider mapped to our extension (or, for Entra, the enterprise department) sends them.
 */

let env: TestEnv;
let a: ScimCompany;

beforeAll(async () => {
  env = await createTestEnv();
  a = await seedScimCompany(env, 'idp');
});
afterAll(async () => env?.close());

const ENTERPRISE = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';
const PATCH_OP = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
const ourExtension = {
  [EXTENSION_SCHEMA]: {
    department: 'engineering',
    permissions: {
      companyPermissions: [],
      appGroup: [{ appGroupName: 'Marketing', appGroupPermissions: ['basic_access'] }],
    },
  },
};

async function audit(id: string) {
  const { rows } = await env.ctx.pool.query(
    `SELECT action FROM dashboard_user_audit WHERE dashboard_user_id = $1 ORDER BY id`,
    [id],
  );
  return rows.map((r) => r.action);
}

describe('Okta: look up, create, update, deactivate, reactivate', () => {
  it('runs the flow of the Okta SCIM 2.0 reference', async () => {
    const lookup = `/scim/v2/Users?filter=${encodeURIComponent('userName eq "test.user@okta.local"')}&startIndex=1&count=100`;
    const none = await scimCall(env, 'GET', lookup, a.token);
    expect(none.status).toBe(200);
    expect(none.body).toEqual({
      schemas: [LIST_SCHEMA],
      totalResults: 0,
      startIndex: 1,
      itemsPerPage: 0,
      Resources: [],
    });

    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User', EXTENSION_SCHEMA],
      userName: 'test.user@okta.local',
      name: { givenName: 'Test', familyName: 'User' },
      emails: [{ primary: true, value: 'test.user@okta.local', type: 'work' }],
      displayName: 'Test User',
      locale: 'en-US',
      externalId: '00ujl29u0le5T6Aj10h7',
      groups: [],
      password: '1mz050nq',
      active: true,
      ...ourExtension,
    });
    expect(created.status, created.raw).toBe(201);
    const id = created.body.id as string;
    expect(created.body).toMatchObject({
      userName: 'test.user@okta.local',
      externalId: '00ujl29u0le5T6Aj10h7',
      active: true,
      emails: [{ primary: true, value: 'test.user@okta.local', type: 'work' }],
      department: 'engineering',
    });
    // The password is not stored anywhere, nor echoed.
    expect(created.raw).not.toContain('1mz050nq');

    const found = await scimCall(env, 'GET', lookup, a.token);
    expect(found.body.totalResults).toBe(1);
    expect(found.body.Resources[0].id).toBe(id);

    // Okta's profile update is a PUT of the whole user.
    const updated = await scimCall(env, 'PUT', `/scim/v2/Users/${id}`, a.token, {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User', EXTENSION_SCHEMA],
      id,
      userName: 'test.user@okta.local',
      name: { givenName: 'Another', middleName: '', familyName: 'User' },
      emails: [{ primary: true, value: 'test.user@okta.local', type: 'work' }],
      displayName: 'Another User',
      locale: 'en-US',
      externalId: '00ujl29u0le5T6Aj10h7',
      groups: [],
      password: '1mz050nq',
      active: true,
      ...ourExtension,
    });
    expect(updated.status, updated.raw).toBe(200);
    expect(updated.body.name).toEqual({ givenName: 'Another', familyName: 'User' });

    const deactivate = { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: false } }] };
    const off = await scimCall(env, 'PATCH', `/scim/v2/Users/${id}`, a.token, deactivate);
    expect(off.status, off.raw).toBe(200);
    expect(off.body.active).toBe(false);
    // Okta re-reads the user it deactivated: it must still be there.
    const reread = await scimCall(env, 'GET', `/scim/v2/Users/${id}`, a.token);
    expect(reread.status).toBe(200);
    expect(reread.body.active).toBe(false);

    const reactivate = { schemas: [PATCH_OP], Operations: [{ op: 'replace', value: { active: true } }] };
    const on = await scimCall(env, 'PATCH', `/scim/v2/Users/${id}`, a.token, reactivate);
    expect(on.status, on.raw).toBe(200);
    expect(on.body.active).toBe(true);

    // Okta's password sync PATCH is accepted and changes nothing stored.
    const password = await scimCall(env, 'PATCH', `/scim/v2/Users/${id}`, a.token, {
      schemas: [PATCH_OP],
      Operations: [{ op: 'replace', value: { password: 'n3wPass' } }],
    });
    expect(password.status, password.raw).toBe(200);

    expect(await audit(id)).toEqual(['create', 'update', 'deactivate', 'reactivate']);
  });
});

describe('Microsoft Entra ID: create, get by query, update, disable, delete', () => {
  it('runs the flow of the Entra ID provisioning guide', async () => {
    const userName = 'Test_User_ab6490ee-1e48-479e-a20b-2d77186b5dd1@testuser.com';
    const created = await scimCall(env, 'POST', '/scim/v2/Users', a.token, {
      schemas: ['urn:ietf:params:scim:schemas:core:2.0:User', ENTERPRISE, EXTENSION_SCHEMA],
      externalId: '0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef',
      userName,
      active: true,
      emails: [{ primary: true, type: 'work', value: 'Test_User_fd0ea19b-0777-472c-9f96-4f70d2226f2e@testuser.com' }],
      meta: { resourceType: 'User' },
      name: { formatted: 'givenName familyName', familyName: 'familyName', givenName: 'givenName' },
      roles: [],
      [ENTERPRISE]: { department: 'finance', employeeNumber: '701984' },
      [EXTENSION_SCHEMA]: { permissions: ourExtension[EXTENSION_SCHEMA].permissions },
    });
    expect(created.status, created.raw).toBe(201);
    const id = created.body.id as string;
    // The enterprise extension's department is read as ours.
    expect(created.body.department).toBe('finance');

    const byUserName = await scimCall(
      env,
      'GET',
      `/scim/v2/Users?filter=${encodeURIComponent(`userName eq "${userName}"`)}`,
      a.token,
    );
    expect(byUserName.body.totalResults).toBe(1);
    const zero = await scimCall(
      env,
      'GET',
      `/scim/v2/Users?filter=${encodeURIComponent('userName eq "non-existent user@testuser.com"')}`,
      a.token,
    );
    expect(zero.body).toMatchObject({ totalResults: 0, Resources: [] });
    const byExternalId = await scimCall(
      env,
      'GET',
      `/scim/v2/Users?filter=${encodeURIComponent('externalId eq "0a21f0f2-8d2a-4f8e-bf98-7363c4aed4ef"')}`,
      a.token,
    );
    expect(byExternalId.body.Resources.map((r: { id: string }) => r.id)).toEqual([id]);

    // Entra's multi-valued update, as its guide shows it, also renames the user: refused whole (userName is
    // immutable here, as the spec says), and nothing of it is applied.
    const multiValued = (newUserName: string) => ({
      schemas: [PATCH_OP],
      Operations: [
        { op: 'Replace', path: 'emails[type eq "work"].value', value: 'updatedEmail@microsoft.com' },
        { op: 'Replace', path: 'emails[type eq "work"].primary', value: true },
        { op: 'Replace', value: { active: false, userName: newUserName } },
      ],
    });
    const renamed = await scimCall(
      env,
      'PATCH',
      `/scim/v2/Users/${id}`,
      a.token,
      multiValued('5b50642d-79fc-4410-9e90-4c077cdd1a59@testuser.com'),
    );
    expect(renamed.status, renamed.raw).toBe(400);
    expect(renamed.body.scimType).toBe('mutability');
    expect((await scimCall(env, 'GET', `/scim/v2/Users/${id}`, a.token)).body).toMatchObject({
      active: true,
      emails: [{ value: 'Test_User_fd0ea19b-0777-472c-9f96-4f70d2226f2e@testuser.com' }],
    });
    // The same update keeping the userName applies.
    const multi = await scimCall(env, 'PATCH', `/scim/v2/Users/${id}`, a.token, multiValued(userName));
    expect(multi.status, multi.raw).toBe(200);
    expect(multi.body).toMatchObject({
      active: false,
      emails: [{ primary: true, type: 'work', value: 'updatedEmail@microsoft.com' }],
    });

    const single = await scimCall(env, 'PATCH', `/scim/v2/Users/${id}`, a.token, {
      schemas: [PATCH_OP],
      Operations: [{ op: 'Replace', path: 'userName', value: '5b50642d-79fc-4410-9e90-4c077cdd1a59@testuser.com' }],
    });
    expect(single.status).toBe(400);
    expect(single.body.scimType).toBe('mutability');

    // Entra's attribute updates: Add for a value that exists, the enterprise department, an attribute not stored.
    const attributes = await scimCall(env, 'PATCH', `/scim/v2/Users/${id}`, a.token, {
      schemas: [PATCH_OP],
      Operations: [
        { op: 'Replace', path: 'title', value: 'tester' },
        { op: 'Add', path: 'emails[type eq "work"].value', value: 'again@microsoft.com' },
        { op: 'Add', path: `${ENTERPRISE}:department`, value: 'marketing' },
        { op: 'Replace', path: 'active', value: 'True' },
      ],
    });
    expect(attributes.status, attributes.raw).toBe(200);
    expect(attributes.body).toMatchObject({
      active: true,
      department: 'marketing',
      emails: [{ value: 'again@microsoft.com' }],
    });

    // Disable User, with Entra's string boolean as some tenants send it.
    const disable = await scimCall(env, 'PATCH', `/scim/v2/Users/${id}`, a.token, {
      Operations: [{ op: 'Replace', path: 'active', value: 'False' }],
      schemas: [PATCH_OP],
    });
    expect(disable.status, disable.raw).toBe(200);
    expect(disable.body.active).toBe(false);

    const deleted = await scimCall(env, 'DELETE', `/scim/v2/Users/${id}`, a.token);
    expect(deleted.status).toBe(204);
    expect((await scimCall(env, 'GET', `/scim/v2/Users/${id}`, a.token)).status).toBe(404);
    expect(await audit(id)).toEqual(['create', 'deactivate', 'reactivate', 'deactivate', 'delete']);
  });
});
