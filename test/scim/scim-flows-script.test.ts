import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { repoRoot } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { seedScimCompany, type ScimCompany } from '../helpers/scim.js';

/**
 * scripts/scim-flows.sh, the documented Okta and Entra ID flows by curl (users, then group push), run as an operator
 * would against this service listening on a free port. The script stops at the first unexpected status or value;
 * here its exit code, and what its group flows left on the audit trails, are checked.
 */

const env = useTestEnv();
let company: ScimCompany;
let base: string;

beforeAll(async () => {
  company = await seedScimCompany(env, 'flows');
  await env.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(env.app.server.address() as AddressInfo).port}`;
});

function runScript(): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', [path.join(repoRoot, 'scripts/scim-flows.sh')], {
      cwd: repoRoot,
      env: {
        PATH: process.env.PATH ?? '/usr/bin:/bin',
        BASE: base,
        SCIM_TOKEN: company.token,
        WORKSPACE: 'Marketing',
        PERMISSION_SET: 'Editors',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('scripts/scim-flows.sh', () => {
  it("runs Okta's and Entra ID's user and group push flows to the end", async () => {
    const run = await runScript();
    expect(run.code, `${run.stdout.slice(-3000)}\n${run.stderr}`).toBe(0);
    expect(run.stdout).toContain('All flows ran as documented.');
    for (const step of [
      'Okta: push the group',
      'Okta: remove a member',
      'Entra ID: add members',
      'Entra ID: delete the group',
    ])
      expect(run.stdout).toContain(step);

    // What the group flows did, as an auditor reads it: both members joined and left both groups.
    const { rows } = await env.ctx.pool.query<{ action: string; n: number }>(
      `SELECT action, count(*)::int AS n FROM dashboard_user_audit WHERE company_id = $1 AND action IN ('join_group', 'leave_group', 'group_grants')
        GROUP BY action ORDER BY action`,
      [company.companyId],
    );
    expect(rows).toEqual([
      { action: 'join_group', n: 4 },
      { action: 'leave_group', n: 4 },
    ]);
    const groups = await env.ctx.pool.query(`SELECT action FROM scim_group_audit WHERE company_id = $1 ORDER BY id`, [
      company.companyId,
    ]);
    expect(groups.rows.map((r) => r.action)).toEqual([
      'create',
      'update',
      'update',
      'update',
      'update',
      'delete',
      'create',
      'update',
      'update',
      'update',
      'delete',
    ]);
  });
});
