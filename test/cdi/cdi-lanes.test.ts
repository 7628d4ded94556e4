import { randomUUID } from 'node:crypto';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { moveWatermark } from '../../src/pipelines/cdi/table-sync.js';
import { withTransaction } from '../../src/platform/db/pool.js';
import { waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

/**
 * A table sync applies each batch over several lanes at once (CDI_APPLY_LANES), each lane committing its own rows with
 * their hashes. Here one lane of a batch fails (a trigger refuses one profile's update, once, with an error that is not
 * about the data) after the other lane of the same batch has committed: the run fails that attempt, the job is retried,
 * and the sync ends with every row applied exactly once (counted by a second trigger that logs each committed update)
 * and each profile at its row's value.
 */

const ROWS = 1_200;
const env = useTestEnv({ workspaces: ['ws'], config: { CDI_BATCH_ROWS: '300', CDI_APPLY_LANES: '2' } });
const SOURCE_SCHEMA = `cdi_lanes_${randomUUID().slice(0, 8)}`;
const TABLE = `${SOURCE_SCHEMA}.user_updates`;
const URL_ENV = `CES_TEST_CDI_LANES_${randomUUID().slice(0, 8).toUpperCase()}`;
const INTEGRATION = randomUUID();
let warehouse: pg.Client;

beforeAll(async () => {
  process.env[URL_ENV] = env.config.DATABASE_URL;
  warehouse = new pg.Client({ connectionString: env.config.DATABASE_URL });
  await warehouse.connect();
  await warehouse.query(`CREATE SCHEMA ${SOURCE_SCHEMA}`);
  // Every row at one time: each batch ends at the watermark's time, so the batch that follows the failed one ends
  // at the time of the rows its committed lane applied, which the watermark must then keep by their hashes.
  await warehouse.query(
    `CREATE TABLE ${TABLE} AS SELECT timestamptz '2026-01-01' AS updated_at,
            'lane-' || g AS external_id, json_build_object('tier', g)::text AS payload
       FROM generate_series(1, ${ROWS}) g`,
  );
  const db = env.ctx.pool;
  await db.query(`CREATE SEQUENCE lane_trap_calls`);
  await db.query(`CREATE TABLE applied_log (external_id text NOT NULL, tier text)`);
  await db.query(`CREATE FUNCTION lane_trap() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      -- A sequence is not rolled back: the first update of lane-700 fails, every later one goes through.
      IF NEW.external_id = 'lane-700' AND nextval('lane_trap_calls') = 1 THEN
        RAISE EXCEPTION 'lane trap' USING ERRCODE = '55P03';
      END IF;
      INSERT INTO applied_log VALUES (NEW.external_id, NEW.custom_attributes->>'tier');
      RETURN NEW;
    END $$`);
  await db.query(`CREATE TRIGGER lane_trap BEFORE UPDATE ON profiles FOR EACH ROW EXECUTE FUNCTION lane_trap()`);
  await db.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'lanes', $3)`, [
    INTEGRATION,
    env.ws.workspaceId,
    JSON.stringify({ type: 'postgres', url_env: URL_ENV, table: TABLE }),
  ]);
  env.startWorkers([cdiSyncJob]);
});

afterAll(async () => {
  await warehouse?.query(`DROP SCHEMA IF EXISTS ${SOURCE_SCHEMA} CASCADE`);
  await warehouse?.end();
  delete process.env[URL_ENV];
});

async function sync(): Promise<Record<string, unknown>> {
  const before = Date.now();
  const res = await env.app.inject({
    method: 'POST',
    url: `/cdi/integrations/${INTEGRATION}/sync`,
    headers: bearer(env.ws.apiKey),
  });
  expect(res.statusCode, res.body).toBe(202);
  let latest: Record<string, unknown> = {};
  await waitFor(
    async () => {
      const status = await env.app.inject({
        method: 'GET',
        url: `/cdi/integrations/${INTEGRATION}/job_sync_status`,
        headers: bearer(env.ws.apiKey),
      });
      latest = (status.json().results as Array<Record<string, unknown>>)[0]!;
      return Date.parse(latest.sync_start_time as string) >= before - 1000 && latest.job_status !== 'running';
    },
    90_000,
    100,
  );
  return latest;
}

describe('CDI apply lanes', () => {
  it('a lane failing after the other lane of its batch committed: the retried run applies every row exactly once', async () => {
    const db = env.ctx.pool;
    const run = await sync();
    expect(run).toMatchObject({ job_status: 'success', rows_synced: ROWS, rows_failed_with_errors: 0 });
    // The trap fired: the batch of lane-700 failed once and the job's run took a second attempt.
    expect(Number((await db.query(`SELECT last_value FROM lane_trap_calls`)).rows[0].last_value)).toBe(2);
    const attempts = await db.query<{ attempts: number }>(
      `SELECT attempts FROM cdi_sync_jobs WHERE integration_id = $1`,
      [INTEGRATION],
    );
    expect(attempts.rows[0]!.attempts).toBeGreaterThan(1);
    // Every committed update of a synced profile: one per row, none twice (the other lane's rows were not applied
    // again).
    const applied = await db.query<{ n: number; users: number }>(
      `SELECT count(*)::int AS n, count(DISTINCT external_id)::int AS users FROM applied_log WHERE external_id LIKE 'lane-%'`,
    );
    expect(applied.rows[0]).toEqual({ n: ROWS, users: ROWS });
    const wrong = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM profiles
        WHERE workspace_id = $1 AND external_id LIKE 'lane-%' AND custom_attributes->>'tier' <> substr(external_id, 6)`,
      [env.ws.workspaceId],
    );
    expect(wrong.rows[0]!.n).toBe(0);
    const profiles = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM profiles WHERE workspace_id = $1 AND external_id LIKE 'lane-%'`,
      [env.ws.workspaceId],
    );
    expect(profiles.rows[0]!.n).toBe(ROWS);
    // What the watermark keeps: the hashes of the rows at its exact time, here every row, those the committed lane
    // applied included; the lanes' arrays went with their batches.
    const kept = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM cdi_watermark_rows WHERE integration_id = $1`,
      [INTEGRATION],
    );
    expect(kept.rows[0]!.n).toBe(ROWS);
    const lanes = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM cdi_lane_rows WHERE integration_id = $1`,
      [INTEGRATION],
    );
    expect(lanes.rows[0]!.n).toBe(0);
  });

  it('moving the watermark keeps lane entries past it, turns those at it into watermark rows, and drops the rest', async () => {
    // Entries past the new watermark: a lane's rows of a batch a resumed run left out, which may end later than the
    // batch that moves the watermark now. They must stay, or a run stopped before the watermark passes them would
    // read and apply them again.
    const db = env.ctx.pool;
    const id = randomUUID();
    await db.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'move', $3)`, [
      id,
      env.ws.workspaceId,
      JSON.stringify({ type: 'postgres', url_env: URL_ENV, table: TABLE }),
    ]);
    const [before, at, past] = [
      '2026-03-01T00:00:00.000001Z',
      '2026-03-01T00:00:00.000002Z',
      '2026-03-01T00:00:00.000003Z',
    ];
    await db.query(`INSERT INTO cdi_watermark_rows (integration_id, row_hash) VALUES ($1, 'kept-for-the-old-time')`, [
      id,
    ]);
    await db.query(
      `INSERT INTO cdi_lane_rows (integration_id, row_hashes, row_times) VALUES ($1, $2, $3), ($1, $4, $5)`,
      [id, ['lane-before', 'lane-at'], [before, at], ['lane-past'], [past]],
    );
    await withTransaction(db, (client) => moveWatermark(client, id, before, [{ row: {}, ts: at, hash: 'batch-at' }]));
    const kept = await db.query<{ row_hash: string }>(
      `SELECT row_hash FROM cdi_watermark_rows WHERE integration_id = $1 ORDER BY row_hash`,
      [id],
    );
    expect(kept.rows.map((r) => r.row_hash)).toEqual(['batch-at', 'lane-at']);
    const lanes = await db.query(`SELECT row_hashes, row_times FROM cdi_lane_rows WHERE integration_id = $1`, [id]);
    expect(lanes.rows).toEqual([{ row_hashes: ['lane-past'], row_times: [past] }]);
    const watermark = await db.query<{ w: string }>(
      `SELECT to_char(watermark AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS w FROM cdi_integrations WHERE id = $1`,
      [id],
    );
    expect(watermark.rows[0]!.w).toBe(at);
  });

  it('a second sync of the same table applies nothing: the rows at the watermark are left out by their hash', async () => {
    const db = env.ctx.pool;
    const before = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM applied_log`)).rows[0]!.n;
    const run = await sync();
    expect(run).toMatchObject({ job_status: 'success', rows_synced: 0 });
    expect((await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM applied_log`)).rows[0]!.n).toBe(before);
  });

  it('a row added later at the same time is taken, once: the rows at the watermark no longer match those taken', async () => {
    // The run before read only the two digests of the rows at the watermark's time (they matched); now they differ.
    const db = env.ctx.pool;
    await warehouse.query(`INSERT INTO ${TABLE} VALUES (timestamptz '2026-01-01', 'lane-late', '{"tier": "late"}')`);
    const before = (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM applied_log`)).rows[0]!.n;
    expect(await sync()).toMatchObject({ job_status: 'success', rows_synced: 1 });
    expect(await sync()).toMatchObject({ job_status: 'success', rows_synced: 0 });
    // lane-late's profile written once, and no other profile written again.
    const applied = await db.query<{ n: number; late: number }>(
      `SELECT count(*)::int AS n, count(*) FILTER (WHERE external_id = 'lane-late')::int AS late FROM applied_log`,
    );
    expect(applied.rows[0]).toEqual({ n: before + 1, late: 1 });
    const kept = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM cdi_watermark_rows WHERE integration_id = $1`,
      [INTEGRATION],
    );
    expect(kept.rows[0]!.n).toBe(ROWS + 1);
  });
});
