import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { cliEnvOf, runCli } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';

/**
 * CDI integrations as the workspace file declares them (applied by `ces workspace apply`, refused with path-named
 * errors), and `ces cdi list` and `ces cdi sync --wait` as a cron job runs them: their output and exit codes.
 */

const env = useTestEnv();
const tag = randomUUID().slice(0, 8);
const COMPANY = `CDI Co ${tag}`;
const WORKSPACE = `CDI Workspace ${tag}`;
const FILES = randomUUID();
const TABLE = randomUUID();
let dir: string;

function file(integrations: string, workspace = WORKSPACE): string {
  return `company:\n  name: ${COMPANY}\nworkspaces:\n  - name: ${workspace}\n    api_keys:\n      - name: etl\n        permissions: all\n    cdi_integrations:\n${integrations}`;
}

const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, cliEnvOf(env.config, extra), 90_000);

beforeAll(async () => {
  dir = await mkdtemp(path.join(tmpdir(), 'ces-cdi-ws-'));
});
afterAll(async () => {
  await rm(dir, { recursive: true, force: true });
});

describe('CDI in the workspace file and on the command line', () => {
  it('applies integrations, unchanged the second time, and refuses bad ones with the path of each problem', async () => {
    const good = file(
      `      - id: ${FILES}\n        name: lake drops\n        source: { type: bucket, prefix: cdi/users/, format: ndjson }\n` +
        `      - id: ${TABLE}\n        name: warehouse users\n        source: { type: postgres, url_env: CDI_WAREHOUSE_URL, table: analytics.ces_user_updates }\n        schedule: { every_minutes: 15 }\n`,
    );
    await writeFile(path.join(dir, 'good.yaml'), good);
    const first = await cli(['workspace', 'apply', path.join(dir, 'good.yaml')]);
    expect(first.code, first.stderr).toBe(0);
    expect(first.stdout).toMatch(/cdi_integrations +2 +0 +0\n/);
    const again = await cli(['workspace', 'apply', path.join(dir, 'good.yaml')]);
    expect(again.stdout).toMatch(/cdi_integrations +0 +0 +2\n/);
    const { rows } = await env.ctx.pool.query(`SELECT id, name, source, schedule FROM cdi_integrations ORDER BY name`);
    expect(rows).toEqual([
      {
        id: FILES,
        name: 'lake drops',
        source: { type: 'bucket', prefix: 'cdi/users/', format: 'ndjson' },
        schedule: null,
      },
      {
        id: TABLE,
        name: 'warehouse users',
        source: { type: 'postgres', url_env: 'CDI_WAREHOUSE_URL', table: 'analytics.ces_user_updates' },
        schedule: { every_minutes: 15 },
      },
    ]);

    const bad = file(
      `      - id: not-a-uuid\n        name: x\n        source: { type: postgres, url_env: 'lower case', table: 'x; DROP TABLE y' }\n` +
        `      - id: ${randomUUID()}\n        name: y\n        source: { type: bucket, prefix: ../escape/, format: xml }\n        schedule: { cron: 'every day' }\n`,
    );
    await writeFile(path.join(dir, 'bad.yaml'), bad);
    const refused = await cli(['workspace', 'apply', path.join(dir, 'bad.yaml')]);
    expect(refused.code).toBe(2);
    for (const where of [
      'cdi_integrations[0].id',
      'cdi_integrations[0].source.url_env',
      'cdi_integrations[0].source.table',
      'cdi_integrations[1].source',
      'cdi_integrations[1].schedule',
    ]) {
      expect(refused.stderr, where).toContain(where);
    }
    // An id another workspace declares is not taken over.
    await writeFile(
      path.join(dir, 'steal.yaml'),
      file(
        `      - id: ${FILES}\n        name: stolen\n        source: { type: bucket, prefix: x/, format: csv }\n`,
        `Other ${tag}`,
      ),
    );
    const stolen = await cli(['workspace', 'apply', path.join(dir, 'steal.yaml')]);
    expect(stolen.code).not.toBe(0);
    expect(stolen.stderr).toContain(`integration id "${FILES}" belongs to another workspace`);
    expect((await env.ctx.pool.query(`SELECT name FROM cdi_integrations WHERE id = $1`, [FILES])).rows).toEqual([
      { name: 'lake drops' },
    ]);
  });

  it('ces cdi list, and ces cdi sync --wait: a summary, exit 0; config_error with the reason, exit 1', async () => {
    const ws = (
      await env.ctx.pool.query<{ id: string; company_id: string }>(
        `SELECT id, company_id FROM workspaces WHERE name = $1`,
        [WORKSPACE],
      )
    ).rows[0]!;
    const drops = path.join(
      localWorkspaceDir(env.config.LOCAL_STORE_DIR, { workspaceId: ws.id, companyId: ws.company_id }),
      'cdi/users',
    );
    await mkdir(drops, { recursive: true });
    await writeFile(
      path.join(drops, 'a.ndjson'),
      `${JSON.stringify({ external_id: 'cli-1', payload: '{"tier": "cli"}' })}\n${JSON.stringify({ payload: '{}' })}\n`,
    );

    const list = await cli(['cdi', 'list', '--workspace', WORKSPACE]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toContain(`${FILES}  lake drops  ndjson files under cdi/users/  on demand  last run: never`);
    expect(list.stdout).toContain(
      `${TABLE}  warehouse users  table analytics.ces_user_updates (CDI_WAREHOUSE_URL)  every 15 min`,
    );

    const sync = await cli(['cdi', 'sync', 'lake drops', '--workspace', WORKSPACE, '--wait']);
    expect(sync.code, sync.stderr).toBe(0);
    expect(sync.stdout).toMatch(/sync \S+ of lake drops \(.+\): started/);
    expect(sync.stdout).toMatch(/partial: 1 row\(s\) synced, 1 refused/);
    expect(sync.stdout).toMatch(/refused rows, with why: cdi\/users\/\S+\.rejects\.ndjson/);
    const strict = await cli(['cdi', 'sync', FILES, '--wait', '--fail-on-partial']);
    expect(strict.code).toBe(0);
    expect(strict.stdout).toMatch(/success: 0 row\(s\) synced/);

    // No connection string in the environment: the run ends config_error, saying which variable, exit 1.
    const broken = await cli(['cdi', 'sync', 'warehouse users', '--workspace', WORKSPACE, '--wait']);
    expect(broken.code).toBe(1);
    expect(broken.stdout).toMatch(/config_error/);
    expect(broken.stderr).toContain('CDI_WAREHOUSE_URL');
    const unknown = await cli(['cdi', 'sync', 'nothing-here', '--wait']);
    expect(unknown.code).toBe(1);
    expect(unknown.stderr).toContain('no CDI integration "nothing-here"');
  });
});
