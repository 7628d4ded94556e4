import type { TestEnv } from './context.js';
import { bearer, createScimToken, seedWorkspace } from './seed.js';

export const USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const ERROR_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:Error';
export const LIST_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
export const EXTENSION_SCHEMA = 'urn:ietf:params:scim:schemas:extension:ces:2.0:User';
export const PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';
export const ORIGIN = 'https://idp.example.com';

/** A company as an identity provider sees it: workspaces, a team, a permission set and a SCIM token. */
export interface ScimCompany {
  companyId: string;
  token: string;
  apiKey: string;
  marketingId: string;
  productId: string;
  growthTeamId: string;
  editorsSetId: string;
}

export async function seedScimCompany(env: TestEnv, tag: string): Promise<ScimCompany> {
  const pool = env.ctx.pool;
  const ws = await seedWorkspace(pool, `Marketing-${tag}`);
  // Workspace names are what SCIM bodies reference: give them plain names the tests can use in every company.
  await pool.query(`UPDATE workspaces SET name = 'Marketing' WHERE id = $1`, [ws.workspaceId]);
  const product = await seedWorkspace(pool, `Product-${tag}`, ws.companyId);
  await pool.query(`UPDATE workspaces SET name = 'Product' WHERE id = $1`, [product.workspaceId]);
  const team = await pool.query<{ id: string }>(
    `INSERT INTO teams (workspace_id, name) VALUES ($1, 'Growth') RETURNING id`,
    [ws.workspaceId],
  );
  const set = await pool.query<{ id: string }>(
    `INSERT INTO permission_sets (company_id, name, permissions) VALUES ($1, 'Editors', '{basic_access}') RETURNING id`,
    [ws.companyId],
  );
  return {
    companyId: ws.companyId,
    token: await createScimToken(pool, ws.companyId, `okta-${tag}`),
    apiKey: ws.apiKey,
    marketingId: ws.workspaceId,
    productId: product.workspaceId,
    growthTeamId: team.rows[0]!.id,
    editorsSetId: set.rows[0]!.id,
  };
}

/** Companies A and B, the two every SCIM test file plays against each other. */
export async function seedScimCompanies(env: TestEnv): Promise<{ a: ScimCompany; b: ScimCompany }> {
  return { a: await seedScimCompany(env, 'a'), b: await seedScimCompany(env, 'b') };
}

export function scimHeaders(token: string): Record<string, string> {
  return {
    ...bearer(token),
    'x-request-origin': ORIGIN,
    'content-type': 'application/scim+json',
    accept: 'application/scim+json',
  };
}

/** A valid create body; `over` replaces top-level attributes. */
export function userBody(userName: string, over: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    schemas: [USER_SCHEMA],
    userName,
    name: { givenName: 'Ada', familyName: 'Lovelace' },
    department: 'engineering',
    permissions: {
      companyPermissions: ['manage_company_settings'],
      appGroup: [
        {
          appGroupName: 'Marketing',
          appGroupPermissions: ['basic_access', 'edit_segments'],
          team: [{ teamName: 'Growth', teamPermissions: ['admin'] }],
        },
        { appGroupName: 'Product', appGroupPermissionSets: [{ appGroupPermissionSetName: 'Editors' }] },
      ],
    },
    ...over,
  };
}

export interface ScimCall {
  status: number;
  body: Record<string, unknown> & { [k: string]: any }; // eslint-disable-line @typescript-eslint/no-explicit-any
  raw: string;
  headers: Record<string, unknown>;
}

export async function scimCall(
  env: TestEnv,
  method: 'GET' | 'POST' | 'PUT' | 'DELETE' | 'PATCH',
  url: string,
  token: string,
  payload?: unknown,
  headers: Record<string, string> = {},
): Promise<ScimCall> {
  const res = await env.app.inject({
    method,
    url,
    headers: { ...scimHeaders(token), ...headers },
    payload: payload === undefined ? undefined : typeof payload === 'string' ? payload : JSON.stringify(payload),
  });
  let body: ScimCall['body'] = {};
  try {
    body = res.body === '' ? {} : res.json();
  } catch {
    body = {};
  }
  return { status: res.statusCode, body, raw: res.body, headers: res.headers };
}

export async function userCount(env: TestEnv, companyId: string): Promise<number> {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM dashboard_users WHERE company_id = $1`,
    [companyId],
  );
  return rows[0]!.n;
}

export const GROUP_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Group';
export const GROUP_EXTENSION_SCHEMA = 'urn:ietf:params:scim:schemas:extension:ces:2.0:Group';

/** A group body; `permissions` (the role) goes into our Group extension. */
export function groupBody(
  displayName: string,
  memberIds: string[] = [],
  permissions?: unknown,
): Record<string, unknown> {
  return {
    schemas: [GROUP_SCHEMA],
    displayName,
    members: memberIds.map((value) => ({ value })),
    ...(permissions === undefined ? {} : { [GROUP_EXTENSION_SCHEMA]: { permissions } }),
  };
}
