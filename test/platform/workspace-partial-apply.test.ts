import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile, WorkspaceFileError } from '../../src/features/workspace/parse.js';
import { useTestEnv } from '../helpers/context.js';
import { scimCall, USER_SCHEMA } from '../helpers/scim.js';
import { bearer } from '../helpers/seed.js';

/**
 * A workspace file says what it names: a company or workspace named without `settings` or `export_destination` (the
 * snippet of docs/cdi.md, applied on its own) leaves what is stored as it is, and what users of those settings see
 * (SCIM's extra departments and permissions, the template default, the export bucket) keeps working.
 */

const env = useTestEnv();
const tag = randomUUID().slice(0, 8);
const COMPANY = `Partial Co ${tag}`;
const WORKSPACE = `Partial WS ${tag}`;
const SCIM_TOKEN = `ces_scim_partial_${tag}_00000000000000`;
const API_KEY = `ces_key_partial_${tag}_000000000000000`;
const DESTINATION = {
  provider: 's3',
  bucket: `partial-${tag}`,
  region: 'eu-west-1',
  endpoint: 'http://127.0.0.1:9',
  credentials: { accessKeyId: 'AKIAPARTIAL', secretAccessKey: 'not-a-real-secret' },
  prefix: 'exports/',
};

const FULL = `
company:
  name: ${COMPANY}
  settings:
    scim:
      departments: [growth]
      permissions: { workspace: [view_partner_reports], company: [approve_budgets] }
scim_tokens:
  - { name: idp, secret: ${SCIM_TOKEN} }
permission_sets:
  - { name: Partners, permissions: [basic_access, view_partner_reports] }
workspaces:
  - name: ${WORKSPACE}
    settings: { should_inline_css: false }
    export_destination: ${JSON.stringify(DESTINATION)}
    api_keys:
      - { name: ops, secret: ${API_KEY}, permissions: all }
`;

/** docs/cdi.md's declaration, as a newcomer applies it: the company and workspace named, nothing else about them. */
const CDI_SNIPPET = `
company:
  name: ${COMPANY}
workspaces:
  - name: ${WORKSPACE}
    cdi_integrations:
      - id: ${randomUUID()}
        name: lake drops
        source: { type: bucket, prefix: cdi/users/, format: parquet }
`;

const apply = (text: string) => applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(text));

async function stored(): Promise<{ company: unknown; workspace: unknown; destination: unknown }> {
  const { rows } = await env.ctx.pool.query<{ company: unknown; workspace: unknown; destination: unknown }>(
    `SELECT c.settings AS company, w.settings AS workspace, w.export_destination AS destination
       FROM companies c JOIN workspaces w ON w.company_id = c.id WHERE c.name = $1 AND w.name = $2`,
    [COMPANY, WORKSPACE],
  );
  return rows[0]!;
}

/** What an identity provider sees: a user in the extra department, with the extra permissions, is accepted. */
async function scimCreate(userName: string) {
  return scimCall(env, 'POST', '/scim/v2/Users', SCIM_TOKEN, {
    schemas: [USER_SCHEMA],
    userName,
    name: { givenName: 'Grace', familyName: 'Hopper' },
    department: 'growth',
    permissions: {
      companyPermissions: ['approve_budgets'],
      appGroup: [{ appGroupName: WORKSPACE, appGroupPermissions: ['basic_access', 'view_partner_reports'] }],
    },
  });
}

/** What an API client sees: a template created without should_inline_css takes the workspace's default. */
async function templateDefault(): Promise<unknown> {
  const headers = { ...bearer(API_KEY), 'content-type': 'application/json' };
  const created = await env.app.inject({
    method: 'POST',
    url: '/templates/email/create',
    headers,
    payload: { template_name: `t-${randomUUID()}`, subject: 's', body: '<p>b</p>' },
  });
  expect(created.statusCode, created.body).toBe(201);
  const info = await env.app.inject({
    method: 'GET',
    url: `/templates/email/info?email_template_id=${created.json<{ email_template_id: string }>().email_template_id}`,
    headers,
  });
  return info.json<{ should_inline_css: unknown }>().should_inline_css;
}

describe('a workspace file that leaves a section out', () => {
  it('keeps the stored settings and destination when a file names the company and workspace without them', async () => {
    await apply(FULL);
    const before = await stored();
    expect(before).toEqual({
      company: {
        scim: {
          departments: ['growth'],
          permissions: { workspace: ['view_partner_reports'], company: ['approve_budgets'] },
        },
      },
      workspace: { should_inline_css: false },
      destination: DESTINATION,
    });
    const first = await scimCreate(`before-${tag}@example.com`);
    expect(first.status, first.raw).toBe(201);

    const summary = await apply(CDI_SNIPPET);
    expect(summary.counts.cdi_integrations.created).toBe(1);
    expect(summary.counts.companies).toEqual({ created: 0, updated: 0, unchanged: 1 });
    expect(summary.counts.workspaces).toEqual({ created: 0, updated: 0, unchanged: 1 });
    expect(await stored()).toEqual(before);

    const after = await scimCreate(`after-${tag}@example.com`);
    expect(after.status, after.raw).toBe(201);
    expect(after.body.department).toBe('growth');
    expect(await templateDefault()).toBe(false);
  });

  it('merges settings given in part: the keys a file gives replace, the others stay', async () => {
    await apply(FULL);
    await apply(`company:\n  name: ${COMPANY}\n  settings:\n    scim:\n      departments: [growth, partnerships]\n`);
    expect((await stored()).company).toEqual({
      scim: {
        departments: ['growth', 'partnerships'],
        permissions: { workspace: ['view_partner_reports'], company: ['approve_budgets'] },
      },
    });
    await apply(
      `company:\n  name: ${COMPANY}\n  settings:\n    scim:\n      permissions: { team: [coach] }\n` +
        `workspaces:\n  - name: ${WORKSPACE}\n    settings: {}\n`,
    );
    expect(await stored()).toEqual({
      company: {
        scim: {
          departments: ['growth', 'partnerships'],
          permissions: { workspace: ['view_partner_reports'], company: ['approve_budgets'], team: ['coach'] },
        },
      },
      workspace: { should_inline_css: false },
      destination: DESTINATION,
    });
    // A list replaces what was stored: this is how an extension is taken back.
    await apply(`company:\n  name: ${COMPANY}\n  settings: { scim: { departments: [] } }\n`);
    expect((await stored()).company).toMatchObject({ scim: { departments: [] } });
    expect((await scimCreate(`gone-${tag}@example.com`)).status).toBe(400);
    await apply(FULL);
    expect((await scimCreate(`back-${tag}@example.com`)).status).toBe(201);
  });

  it('accepts a permission set naming a permission that only the stored settings add', async () => {
    await apply(FULL);
    const summary = await apply(
      `company: { name: ${COMPANY} }\npermission_sets:\n  - { name: Partner admins, permissions: [view_partner_reports] }\n`,
    );
    expect(summary.counts.permission_sets.created).toBe(1);
    const err = await apply(
      `company: { name: ${COMPANY} }\npermission_sets:\n  - { name: Rocketeers, permissions: [fly_rockets] }\n`,
    ).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WorkspaceFileError);
    expect((err as WorkspaceFileError).message).toContain(
      'permission_sets[0].permissions[0]: unknown workspace permission "fly_rockets"',
    );
  });

  it('removes the export destination only when the file says export_destination: null', async () => {
    await apply(FULL);
    await apply(`company: { name: ${COMPANY} }\nworkspaces:\n  - name: ${WORKSPACE}\n    tags: [kept]\n`);
    expect((await stored()).destination).toEqual(DESTINATION);
    await apply(`company: { name: ${COMPANY} }\nworkspaces:\n  - name: ${WORKSPACE}\n    export_destination: null\n`);
    expect((await stored()).destination).toBeNull();
    await apply(FULL);
    expect((await stored()).destination).toEqual(DESTINATION);
  });
});
