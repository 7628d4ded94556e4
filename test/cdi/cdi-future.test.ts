import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { attributesOf, putLocal, rejectsOf, syncOnce } from '../helpers/cdi.js';
import { useTestEnv } from '../helpers/context.js';
import { insertProfiles } from '../helpers/export-fixtures.js';

/**
 * An UPDATED_AT more than 5 minutes ahead of the clock refuses its row: it neither moves the watermark (which would
 * skip every row written before that time) nor stamps an attribute with a time in the future (which would freeze it
 * against every write until then). A row a little ahead (clocks drift) is taken.
 */

const env = useTestEnv({ workspaces: ['ws'], config: { CDI_APPLY_LANES: '2' } });
const SOURCE_SCHEMA = `cdi_future_${randomUUID().slice(0, 8)}`;
const TABLE = `${SOURCE_SCHEMA}.user_updates`;
const URL_ENV = `CES_TEST_CDI_FUTURE_${randomUUID().slice(0, 8).toUpperCase()}`;
const TABLE_INTEGRATION = randomUUID();
const FILE_INTEGRATION = randomUUID();
let warehouse: pg.Client;

beforeAll(async () => {
  process.env[URL_ENV] = env.config.DATABASE_URL;
  warehouse = new pg.Client({ connectionString: env.config.DATABASE_URL });
  await warehouse.connect();
  await warehouse.query(`CREATE SCHEMA ${SOURCE_SCHEMA}`);
  await warehouse.query(`CREATE TABLE ${TABLE} (updated_at timestamptz NOT NULL, external_id text, payload text)`);
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 6);
  await env.ctx.pool.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, $3, $4)`, [
    TABLE_INTEGRATION,
    env.ws.workspaceId,
    'table',
    JSON.stringify({ type: 'postgres', url_env: URL_ENV, table: TABLE }),
  ]);
  await env.ctx.pool.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, $3, $4)`, [
    FILE_INTEGRATION,
    env.ws.workspaceId,
    'files',
    JSON.stringify({ type: 'bucket', prefix: 'cdi/future/', format: 'ndjson' }),
  ]);
  env.startWorkers([cdiSyncJob]);
});

afterAll(async () => {
  await warehouse?.query(`DROP SCHEMA IF EXISTS ${SOURCE_SCHEMA} CASCADE`);
  await warehouse?.end();
  delete process.env[URL_ENV];
});

const insert = (at: string, externalId: string, tier: string) =>
  warehouse.query(`INSERT INTO ${TABLE} VALUES ($1, $2, $3)`, [at, externalId, JSON.stringify({ tier })]);

const attributeTime = async (externalId: string) =>
  (
    await env.ctx.pool.query<{ t: string | null }>(
      `SELECT attribute_times->>'custom_attributes.tier' AS t FROM profiles WHERE workspace_id = $1 AND external_id = $2`,
      [env.ws.workspaceId, externalId],
    )
  ).rows[0]?.t ?? null;

describe('CDI rows stamped in the future', () => {
  it('a table row a day ahead is refused, the watermark stays, and the rows written meanwhile are taken', async () => {
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
    const soon = new Date(Date.now() + 60_000).toISOString();
    await insert('2026-01-01T00:00:00Z', 'ext-1', 'past');
    await insert(tomorrow, 'ext-2', 'tomorrow');
    await insert('infinity', 'ext-2', 'forever');
    const first = await syncOnce(env, env.ws, TABLE_INTEGRATION);
    expect(first).toMatchObject({
      job_status: 'partial',
      rows_synced: 1,
      rows_failed_with_errors: 2,
      last_timestamp_synced: '2026-01-01T00:00:00.000Z',
    });
    expect(await attributesOf(env, env.ws, 'ext-2')).not.toMatchObject({ tier: 'tomorrow' });
    const rejects = await rejectsOf(env, env.ws, TABLE_INTEGRATION);
    expect(rejects.map((r) => r.reason)).toEqual([
      expect.stringMatching(/^UPDATED_AT \S+ is more than 5 minutes ahead/),
      'UPDATED_AT is not a finite time',
    ]);
    const watermark = await env.ctx.pool.query(`SELECT watermark FROM cdi_integrations WHERE id = $1`, [
      TABLE_INTEGRATION,
    ]);
    expect((watermark.rows[0].watermark as Date).toISOString()).toBe('2026-01-01T00:00:00.000Z');

    // A row written later with an earlier time than the refused one is taken; one a minute ahead is taken too.
    await insert('2026-01-02T00:00:00Z', 'ext-3', 'next day');
    await insert(soon, 'ext-4', 'soon');
    const second = await syncOnce(env, env.ws, TABLE_INTEGRATION);
    // The refused rows are read, and refused, again: their time has not come.
    expect(second).toMatchObject({ job_status: 'partial', rows_synced: 2, rows_failed_with_errors: 2 });
    expect(await attributesOf(env, env.ws, 'ext-3')).toMatchObject({ tier: 'next day' });
    expect(await attributesOf(env, env.ws, 'ext-4')).toMatchObject({ tier: 'soon' });
    expect(await attributesOf(env, env.ws, 'ext-2')).not.toMatchObject({ tier: 'tomorrow' });
    expect(Date.parse(second.last_timestamp_synced as string)).toBe(Date.parse(soon));
  });

  it('a file row a day ahead is refused, and no attribute is stamped in the future', async () => {
    const tomorrow = new Date(Date.now() + 86_400_000).toISOString();
    await putLocal(
      env,
      env.ws,
      'cdi/future/a.ndjson',
      [
        JSON.stringify({ external_id: 'ext-5', updated_at: tomorrow, payload: { tier: 'tomorrow' } }),
        JSON.stringify({ external_id: 'ext-6', payload: { tier: 'now' } }),
      ].join('\n'),
    );
    expect(await syncOnce(env, env.ws, FILE_INTEGRATION)).toMatchObject({
      job_status: 'partial',
      rows_synced: 1,
      rows_failed_with_errors: 1,
    });
    expect(await attributesOf(env, env.ws, 'ext-5')).not.toMatchObject({ tier: 'tomorrow' });
    expect(await attributesOf(env, env.ws, 'ext-6')).toMatchObject({ tier: 'now' });
    for (const u of ['ext-1', 'ext-3', 'ext-5', 'ext-6']) {
      const t = await attributeTime(u);
      if (t !== null) expect(Date.parse(t), u).toBeLessThanOrEqual(Date.now() + 5 * 60_000);
    }
  });
});
