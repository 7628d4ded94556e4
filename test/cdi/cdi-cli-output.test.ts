import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile } from '../../src/features/workspace/parse.js';
import { cliEnvOf, runCli } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';

/**
 * What `ces cdi` prints, as a person or a cron job reads it: stdout holds the command's own lines and nothing else
 * (its log lines go to stderr), and `ces cdi list` over every workspace says which workspace each integration is in.
 */

const env = useTestEnv();
const tag = randomUUID().slice(0, 8);
const LAKE = randomUUID();
const WAREHOUSE = randomUUID();

const cli = (args: string[], extra: Record<string, string> = {}) => runCli(args, cliEnvOf(env.config, extra), 90_000);

beforeAll(async () => {
  // Two companies, each with a workspace named Main: only the company tells them apart.
  for (const [company, integration] of [
    [`Lake Co ${tag}`, `{ id: ${LAKE}, name: lake, source: { type: bucket, prefix: cdi/, format: ndjson } }`],
    [
      `Warehouse Co ${tag}`,
      `{ id: ${WAREHOUSE}, name: warehouse, source: { type: postgres, url_env: CES_TEST_NO_SUCH_URL, table: t } }`,
    ],
  ] as const) {
    await applyWorkspaceFile(
      env.ctx.pool,
      parseWorkspaceFile(
        `company: { name: ${company} }\nworkspaces:\n  - name: Main\n    cdi_integrations: [${integration}]\n`,
      ),
    );
  }
});

const lineOf = (stdout: string, id: string) => stdout.split('\n').find((l) => l.startsWith(id));

describe('ces cdi list', () => {
  it('without --workspace, names the workspace (and its company) of each integration', async () => {
    const res = await cli(['cdi', 'list']);
    expect(res.code, res.stderr).toBe(0);
    expect(lineOf(res.stdout, LAKE)).toBe(
      `${LAKE}  lake  workspace "Main" of "Lake Co ${tag}"  ndjson files under cdi/  on demand  last run: never`,
    );
    expect(lineOf(res.stdout, WAREHOUSE)).toContain(`  warehouse  workspace "Main" of "Warehouse Co ${tag}"  table t `);
  });

  it('with --workspace, lists that workspace alone, as before', async () => {
    const { rows } = await env.ctx.pool.query<{ id: string }>(
      `SELECT w.id FROM workspaces w JOIN companies c ON c.id = w.company_id WHERE c.name = $1`,
      [`Lake Co ${tag}`],
    );
    const res = await cli(['cdi', 'list', '--workspace', rows[0]!.id]);
    expect(res.stdout.trim()).toBe(`${LAKE}  lake  ndjson files under cdi/  on demand  last run: never`);
  });
});

describe('ces cdi sync --wait', () => {
  it('prints its own lines on stdout and its log lines on stderr', async () => {
    const res = await cli(['cdi', 'sync', WAREHOUSE, '--wait'], { LOG_LEVEL: 'warn' });
    expect(res.code).toBe(1);
    const out = res.stdout.split('\n').filter(Boolean);
    expect(out[0]).toMatch(/^sync \S+ of warehouse \(.+\): started$/);
    expect(out.at(-1)).toMatch(/^sync \S+: config_error: 0 row\(s\) synced, 0 refused$/);
    for (const line of out) expect(line, 'a log line on stdout').not.toMatch(/^\{/);
    const logged = res.stderr
      .split('\n')
      .filter((l) => l.startsWith('{'))
      .map((l) => JSON.parse(l) as { msg: string });
    expect(logged.map((l) => l.msg)).toContain('CDI sync cannot read its source');
    expect(res.stderr).toContain('reason: ');
  });
});
