import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { repoRoot } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { insertProfiles } from '../helpers/export-fixtures.js';
import { bearer } from '../helpers/seed.js';

/**
 * The Airflow Braze provider (airflow-provider-braze 1.0.4) driving a sync, as scripts/cdi-airflow-replay.py replays
 * its requests over real HTTP: POST .../sync, then GET .../job_sync_status until the newest run, started after the
 * trigger, has ended. It must end as the provider's success (exit 0), with the rows synced shown, and the table's
 * DELETED row must have removed its user.
 */

const env = useTestEnv({ workspaces: ['ws'] });
const SCHEMA = `cdi_af_${randomUUID().slice(0, 8)}`;
const URL_ENV = `CES_TEST_CDI_AF_${randomUUID().slice(0, 8).toUpperCase()}`;
const INTEGRATION = randomUUID();
let warehouse: pg.Client;
let base: string;

beforeAll(async () => {
  process.env[URL_ENV] = env.config.DATABASE_URL;
  warehouse = new pg.Client({ connectionString: env.config.DATABASE_URL });
  await warehouse.connect();
  await warehouse.query(`CREATE SCHEMA ${SCHEMA}`);
  await warehouse.query(
    `CREATE TABLE ${SCHEMA}.ces_user_updates (updated_at timestamptz NOT NULL, external_id text, payload text, deleted boolean)`,
  );
  await warehouse.query(
    `INSERT INTO ${SCHEMA}.ces_user_updates VALUES ('2026-03-01T00:00:00Z', 'ext-1', '{"tier": "gold"}', NULL), ('2026-03-01T00:00:01Z', 'ext-2', '{"tier": "silver"}', false),
                                                     ('2026-03-01T00:00:02Z', 'ext-3', NULL, true)`,
  );
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 5);
  await env.ctx.pool.query(
    `INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'warehouse users', $3)`,
    [
      INTEGRATION,
      env.ws.workspaceId,
      JSON.stringify({ type: 'postgres', url_env: URL_ENV, table: `${SCHEMA}.ces_user_updates` }),
    ],
  );
  env.startWorkers([cdiSyncJob]);
  await env.app.listen({ port: 0, host: '127.0.0.1' });
  base = `http://127.0.0.1:${(env.app.server.address() as AddressInfo).port}`;
});

afterAll(async () => {
  await warehouse?.query(`DROP SCHEMA IF EXISTS ${SCHEMA} CASCADE`);
  await warehouse?.end();
  delete process.env[URL_ENV];
});

function replay(
  extra: Record<string, string> = {},
): Promise<{ code: number | null; lines: Array<Record<string, unknown>>; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', [path.join(repoRoot, 'scripts/cdi-airflow-replay.py')], {
      env: {
        ...process.env,
        BASE_URL: base,
        API_KEY: env.ws.apiKey,
        INTEGRATION_ID: INTEGRATION,
        POLL_INTERVAL: '0.5',
        TIMEOUT: '60',
        ...extra,
      },
    });
    let out = '';
    let err = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (err += d));
    child.on('error', reject);
    child.on('exit', (code) =>
      resolve({
        code,
        lines: out
          .trim()
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Record<string, unknown>),
        stderr: err,
      }),
    );
  });
}

describe('the Airflow Braze provider against ces', () => {
  it('triggers a sync and waits for it as the provider does: success, the rows synced shown, the DELETED row applied', async () => {
    const run = await replay();
    const result = run.lines.find((l) => l.event === 'result')!;
    expect(run.code, `${run.stderr}\n${JSON.stringify(run.lines, null, 1)}`).toBe(0);
    expect(result).toMatchObject({ success: true, job_status: 'success', rows_synced: 3, rows_failed_with_errors: 0 });
    const profiles = await env.ctx.pool.query(
      `SELECT external_id, custom_attributes->>'tier' AS tier FROM profiles WHERE workspace_id = $1 AND external_id IN ('ext-1', 'ext-2', 'ext-3') ORDER BY 1`,
      [env.ws.workspaceId],
    );
    expect(profiles.rows).toEqual([
      { external_id: 'ext-1', tier: 'gold' },
      { external_id: 'ext-2', tier: 'silver' },
    ]);
  });

  it("fails the task with the body's message when a run is in progress (429), as the provider does", async () => {
    await env.ctx.pool.query(
      `INSERT INTO cdi_sync_jobs (integration_id, workspace_id, trigger) VALUES ($1, $2, 'api')`,
      [INTEGRATION, env.ws.workspaceId],
    );
    try {
      const run = await replay({ WAIT_FOR_COMPLETION: 'false' });
      expect(run.code).toBe(1);
      expect(run.lines.find((l) => l.event === 'result')).toMatchObject({
        success: false,
        error: expect.stringContaining('Another job is in progress'),
      });
    } finally {
      await env.ctx.pool.query(
        `UPDATE cdi_sync_jobs SET status = 'error', finished_at = now() WHERE integration_id = $1 AND status = 'running'`,
        [INTEGRATION],
      );
    }
    const status = await env.app.inject({
      method: 'GET',
      url: `/cdi/integrations/${INTEGRATION}/job_sync_status`,
      headers: bearer(env.ws.apiKey),
    });
    expect(status.json().results[0].job_status).toBe('error');
  });
});
