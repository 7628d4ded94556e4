import { randomUUID } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { insertProfiles } from '../helpers/export-fixtures.js';
import { bearer } from '../helpers/seed.js';

/**
 * Cloud Data Ingestion from a PostgreSQL table laid out as the public API documents (UPDATED_AT, an identifier,
 * PAYLOAD, and our DELETED), its columns in upper case: the API's three endpoints, and what a sync does to profiles,
 * run by the cdi-sync worker. The "warehouse" is a schema of the test database, reached through an environment
 * variable.
 */

const env = useTestEnv({ workspaces: ['ws', 'other'] });
const SOURCE_SCHEMA = `cdi_src_${randomUUID().slice(0, 8)}`;
const TABLE = `${SOURCE_SCHEMA}.ces_user_updates`;
const URL_ENV = `CES_TEST_CDI_URL_${randomUUID().slice(0, 8).toUpperCase()}`;
const INTEGRATION = randomUUID();
let warehouse: pg.Client;

beforeAll(async () => {
  process.env[URL_ENV] = env.config.DATABASE_URL;
  warehouse = new pg.Client({ connectionString: env.config.DATABASE_URL });
  await warehouse.connect();
  await warehouse.query(`CREATE SCHEMA ${SOURCE_SCHEMA}`);
  await warehouse.query(
    `CREATE TABLE ${TABLE} ("UPDATED_AT" timestamptz NOT NULL, "EXTERNAL_ID" text, "ALIAS_NAME" text, "ALIAS_LABEL" text, "EMAIL" text, "PHONE" text, "PAYLOAD" text, "DELETED" boolean, other_column int)`,
  );
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 20);
  await env.ctx.pool.query(
    `UPDATE profiles SET phone = '+1555000' || lpad((regexp_replace(external_id, '\\D', '', 'g'))::text, 4, '0') WHERE workspace_id = $1`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'warehouse users', $3)`,
    [INTEGRATION, env.ws.workspaceId, JSON.stringify({ type: 'postgres', url_env: URL_ENV, table: TABLE })],
  );
  env.startWorkers([cdiSyncJob]);
});

afterAll(async () => {
  await warehouse?.query(`DROP SCHEMA IF EXISTS ${SOURCE_SCHEMA} CASCADE`);
  await warehouse?.end();
  delete process.env[URL_ENV];
});

const call = async (method: 'GET' | 'POST', url: string, key = env.ws.apiKey) => {
  const res = await env.app.inject({ method, url, headers: { ...bearer(key), 'content-type': 'application/json' } });
  return { status: res.statusCode, body: res.json() as Record<string, unknown>, headers: res.headers };
};

async function rows(values: Array<[string, Record<string, unknown>]>) {
  for (const [at, r] of values) {
    await warehouse.query(
      `INSERT INTO ${TABLE} ("UPDATED_AT", "EXTERNAL_ID", "ALIAS_NAME", "ALIAS_LABEL", "EMAIL", "PHONE", "PAYLOAD", "DELETED") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)`,
      [
        at,
        r.external_id ?? null,
        r.alias_name ?? null,
        r.alias_label ?? null,
        r.email ?? null,
        r.phone ?? null,
        r.payload === undefined ? null : typeof r.payload === 'string' ? r.payload : JSON.stringify(r.payload),
        r.deleted ?? null,
      ],
    );
  }
}

/** Triggers a sync through the API and waits for its run to end; returns the run's status entry. */
async function sync(): Promise<Record<string, unknown>> {
  const before = Date.now();
  const res = await call('POST', `/cdi/integrations/${INTEGRATION}/sync`);
  expect(res.status, JSON.stringify(res.body)).toBe(202);
  expect(res.body).toEqual({ message: 'success' });
  let latest: Record<string, unknown> = {};
  await waitFor(
    async () => {
      const status = await call('GET', `/cdi/integrations/${INTEGRATION}/job_sync_status`);
      latest = (status.body.results as Array<Record<string, unknown>>)[0]!;
      return Date.parse(latest.sync_start_time as string) >= before - 1000 && latest.job_status !== 'running';
    },
    60_000,
    100,
  );
  return latest;
}

const profile = async (externalId: string) =>
  (
    await env.ctx.pool.query(`SELECT * FROM profiles WHERE workspace_id = $1 AND external_id = $2`, [
      env.ws.workspaceId,
      externalId,
    ])
  ).rows[0] as Record<string, unknown> | undefined;

describe('CDI from a PostgreSQL table', () => {
  it('lists the integration as the public API shapes it', async () => {
    const r = await call('GET', '/cdi/integrations');
    expect(r.status).toBe(200);
    expect(r.body).toEqual({
      results: [
        {
          integration_id: INTEGRATION,
          app_group_id: env.ws.workspaceId,
          integration_name: 'warehouse users',
          integration_type: 'user_attributes',
          integration_status: 'active',
          contact_emails: '',
          last_updated_at: null,
          warehouse_type: 'postgres',
          last_job_start_time: null,
          last_job_status: null,
          next_scheduled_run: null,
        },
      ],
      message: 'success',
    });
    expect((await call('GET', '/cdi/integrations', env.other.apiKey)).body.results).toEqual([]);
  });

  it('syncs every row the first time: attributes by each identifier, nested values, a refused row, a delete', async () => {
    await rows([
      [
        '2026-01-01T00:00:00Z',
        { external_id: 'ext-1', payload: { tier: 'gold', first_name: 'Ann', prefs: { news: true } } },
      ],
      ['2026-01-01T00:00:01Z', { email: 'USER2@example.com', payload: { tier: 'silver' } }],
      ['2026-01-01T00:00:02Z', { phone: '+15550000003', payload: { tier: 'bronze' } }],
      ['2026-01-01T00:00:03Z', { external_id: 'brand-new', payload: { tier: 'new' } }],
      ['2026-01-01T00:00:04Z', { external_id: 'ext-4', payload: '{not json' }],
      ['2026-01-01T00:00:05Z', { external_id: 'ext-5', payload: { dob: 'yesterday' } }],
      ['2026-01-01T00:00:06Z', { external_id: 'ext-6', deleted: true }],
      ['2026-01-01T00:00:07Z', { payload: { tier: 'nobody' } }],
    ]);
    const run = await sync();
    expect(run).toMatchObject({
      job_status: 'partial',
      rows_synced: 5,
      rows_failed_with_errors: 3,
      last_timestamp_synced: '2026-01-01T00:00:07.000Z',
    });
    expect(run.sync_finish_time).toEqual(expect.any(String));
    expect(await profile('ext-1')).toMatchObject({
      first_name: 'Ann',
      custom_attributes: expect.objectContaining({ tier: 'gold', prefs: { news: true } }),
    });
    expect((await profile('ext-2'))!.custom_attributes).toMatchObject({ tier: 'silver' });
    expect((await profile('ext-3'))!.custom_attributes).toMatchObject({ tier: 'bronze' });
    expect((await profile('brand-new'))!.custom_attributes).toEqual({ tier: 'new' });
    expect(await profile('ext-6')).toBeUndefined();
    expect((await env.ctx.pool.query(`SELECT 1 FROM profile_tombstones WHERE external_id = 'ext-6'`)).rowCount).toBe(1);

    // The refused rows, with why, in the rejects file of the run (the local store here: no bucket declared).
    const job = (
      await env.ctx.pool.query(
        `SELECT rejects_key FROM cdi_sync_jobs WHERE integration_id = $1 ORDER BY started_at DESC LIMIT 1`,
        [INTEGRATION],
      )
    ).rows[0];
    expect(job.rejects_key).toMatch(new RegExp(`^cdi/${INTEGRATION}/[0-9a-f-]+\\.rejects\\.ndjson$`));
    const rejects = (
      await readFile(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), job.rejects_key), 'utf8')
    )
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(rejects.map((r) => r.reason)).toEqual([
      'PAYLOAD is not JSON',
      expect.stringContaining('dob'),
      'the row names no user: give EXTERNAL_ID, ALIAS_NAME and ALIAS_LABEL, SERVICE_ID, EMAIL or PHONE',
    ]);
    expect(rejects[0].row).toMatchObject({ external_id: 'ext-4', updated_at: '2026-01-01T00:00:04.000000Z' });
    expect((await env.ctx.pool.query(`SELECT count(*)::int AS n FROM cdi_sync_rejects`)).rows[0].n).toBe(0);
  });

  it('takes only new rows next time, including a new row that shares the watermark, and never one twice', async () => {
    // A row committed late with the watermark's exact time, another after it; and one older than the watermark.
    await rows([
      ['2026-01-01T00:00:07Z', { external_id: 'ext-7', payload: { tier: 'same-second' } }],
      ['2026-01-02T00:00:00Z', { external_id: 'ext-1', payload: { tier: 'platinum' } }],
      ['2025-12-31T00:00:00Z', { external_id: 'ext-8', payload: { tier: 'too-late' } }],
    ]);
    await env.ctx.pool.query(
      `UPDATE profiles SET custom_attributes = custom_attributes || '{"marker": 1}' WHERE workspace_id = $1 AND external_id = 'ext-2'`,
      [env.ws.workspaceId],
    );
    const run = await sync();
    expect(run).toMatchObject({
      job_status: 'success',
      rows_synced: 2,
      rows_failed_with_errors: 0,
      last_timestamp_synced: '2026-01-02T00:00:00.000Z',
    });
    expect((await profile('ext-7'))!.custom_attributes).toMatchObject({ tier: 'same-second' });
    expect((await profile('ext-1'))!.custom_attributes).toMatchObject({ tier: 'platinum' });
    // Older than the watermark: not taken (docs/cdi.md says so and why).
    expect((await profile('ext-8'))!.custom_attributes).not.toMatchObject({ tier: 'too-late' });
    // Nothing of the first run applied again (ext-2's row would have reset nothing, but counts say it).
    // A run with nothing new still says how fresh the data is: the integration's watermark.
    const again = await sync();
    expect(again).toMatchObject({
      job_status: 'success',
      rows_synced: 0,
      rows_failed_with_errors: 0,
      last_timestamp_synced: '2026-01-02T00:00:00.000Z',
    });
  });

  it("answers the public API's refusals: 400 invalid id, 404 unknown or another workspace's, 429 while a run runs, bad cursors", async () => {
    expect(await call('POST', '/cdi/integrations/not-a-uuid/sync')).toMatchObject({
      status: 400,
      body: { message: 'Invalid integration ID' },
    });
    expect(await call('POST', `/cdi/integrations/${randomUUID()}/sync`)).toMatchObject({
      status: 404,
      body: { message: 'Integration not found' },
    });
    expect(await call('POST', `/cdi/integrations/${INTEGRATION}/sync`, env.other.apiKey)).toMatchObject({
      status: 404,
      body: { message: 'Integration not found' },
    });
    expect(await call('GET', `/cdi/integrations/${INTEGRATION}/job_sync_status`, env.other.apiKey)).toMatchObject({
      status: 404,
    });
    expect(await call('GET', '/cdi/integrations?cursor=nope')).toMatchObject({
      status: 400,
      body: { message: 'Invalid cursor' },
    });
    expect(await call('POST', `/cdi/integrations/${INTEGRATION}/sync`, env.ws.bareKey)).toMatchObject({ status: 401 });
    // A run that runs (recorded, not yet taken by the worker): a second is refused until it ends.
    await env.ctx.pool.query(
      `INSERT INTO cdi_sync_jobs (integration_id, workspace_id, trigger) VALUES ($1, $2, 'api')`,
      [INTEGRATION, env.ws.workspaceId],
    );
    expect(await call('POST', `/cdi/integrations/${INTEGRATION}/sync`)).toMatchObject({
      status: 429,
      body: { message: 'Another job is in progress' },
    });
    await env.ctx.pool.query(
      `UPDATE cdi_sync_jobs SET status = 'error', finished_at = now() WHERE integration_id = $1 AND status = 'running'`,
      [INTEGRATION],
    );
  });

  it('pages the runs newest first, 10 a page, linked by a relative Link header', async () => {
    await env.ctx.pool.query(
      `INSERT INTO cdi_sync_jobs (integration_id, workspace_id, trigger, status, started_at, finished_at)
       SELECT $1, $2, 'schedule', 'success', timestamptz '2020-01-01' + g * interval '1 hour', timestamptz '2020-01-01' + g * interval '1 hour' FROM generate_series(1, 12) g`,
      [INTEGRATION, env.ws.workspaceId],
    );
    const first = await call('GET', `/cdi/integrations/${INTEGRATION}/job_sync_status`);
    const results = first.body.results as Array<{ sync_start_time: string }>;
    expect(results).toHaveLength(10);
    expect([...results].sort((a, b) => b.sync_start_time.localeCompare(a.sync_start_time))).toEqual(results);
    const link = String(first.headers.link);
    expect(link).toMatch(/^<\/cdi\/integrations\/[0-9a-f-]+\/job_sync_status\?cursor=[\w-]+>; rel="next"$/);
    const next = await call('GET', link.slice(1, link.indexOf('>')));
    expect((next.body.results as unknown[]).length).toBeGreaterThan(0);
    expect(String(next.headers.link)).toContain('rel="prev"');
  });
});
