import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { recordSyncJob } from '../../src/pipelines/cdi/sync-runs.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { CDI_SYNC_QUEUE, syncJobId } from '../../src/platform/queues/cdi-sync.js';
import { attributesOf, jobRow, putLocal, rejectsOf, syncOnce, waitForRun } from '../helpers/cdi.js';
import { useTestEnv } from '../helpers/context.js';
import { insertProfiles } from '../helpers/export-fixtures.js';
import { bearer } from '../helpers/seed.js';

/**
 * A file's read position belongs to the integration, not to the run: a run that failed for good in the middle of a
 * file leaves the rows it committed applied, and the next run goes on after them. The rows it had applied are not
 * applied again, so a /users/track write made between the two runs stays; and the rest of the file keeps the time it
 * was first read at, so that write (newer than the file) wins over those rows too.
 */

const env = useTestEnv({ workspaces: ['ws'], config: { CDI_BATCH_ROWS: '2' } });
const INTEGRATION = randomUUID();
const REJECTS = randomUUID();
const USERS = ['ext-1', 'ext-2', 'ext-3', 'ext-4', 'ext-5', 'ext-6'];

beforeAll(async () => {
  const db = env.ctx.pool;
  await insertProfiles(db, env.ws.workspaceId, 1, 6);
  // A fault that is not about the data (as a lock timeout): the batch holding ext-5 fails while the trap is set.
  await db.query(`CREATE TABLE position_trap (armed boolean)`);
  await db.query(`CREATE FUNCTION position_trap() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      IF NEW.external_id = 'ext-5' AND EXISTS (SELECT 1 FROM position_trap) THEN
        RAISE EXCEPTION 'position trap' USING ERRCODE = '55P03';
      END IF;
      RETURN NEW;
    END $$`);
  await db.query(
    `CREATE TRIGGER position_trap BEFORE UPDATE ON profiles FOR EACH ROW EXECUTE FUNCTION position_trap()`,
  );
  for (const [id, prefix] of [
    [INTEGRATION, 'cdi/pos/'],
    [REJECTS, 'cdi/rejects/'],
  ] as const)
    await db.query(`INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, $3, $4)`, [
      id,
      env.ws.workspaceId,
      prefix,
      JSON.stringify({ type: 'bucket', prefix, format: 'ndjson' }),
    ]);
  env.startWorkers([cdiSyncJob]);
});

/** Queues a recorded run with one attempt only, as the worker's last attempt: it ends `error` if it fails. */
async function runOnce(integration: string): Promise<void> {
  const job = await recordSyncJob(env.ctx.pool, env.ws.workspaceId, integration, 'api');
  await env.ctx.queues.get(CDI_SYNC_QUEUE).add('sync', { jobId: job.id }, { attempts: 1, jobId: syncJobId(job.id) });
}

async function track(externalId: string, tier: string): Promise<void> {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/track',
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
    payload: JSON.stringify({ attributes: [{ external_id: externalId, tier }] }),
  });
  expect(res.statusCode, res.body).toBe(201);
}

describe('CDI file positions', () => {
  it('a run that failed for good mid-file: the next run goes on where it stopped, after a /users/track write', async () => {
    const db = env.ctx.pool;
    await putLocal(
      env,
      env.ws,
      'cdi/pos/a.ndjson',
      USERS.map((u) => JSON.stringify({ external_id: u, payload: { tier: 'file' } })).join('\n'),
    );
    await db.query(`INSERT INTO position_trap VALUES (true)`);
    // The first run, queued with one attempt only: it fails for good at its third batch (ext-5, ext-6).
    await runOnce(INTEGRATION);
    expect(await waitForRun(env, env.ws, INTEGRATION)).toMatchObject({ job_status: 'error', rows_synced: 4 });
    for (const u of USERS.slice(0, 4)) expect(await attributesOf(env, env.ws, u)).toMatchObject({ tier: 'file' });

    // Between the runs, /users/track writes ext-1 (whose row the first run applied) and ext-5 (whose row it did not).
    await db.query(`DELETE FROM position_trap`);
    await new Promise((r) => setTimeout(r, 20));
    await track('ext-1', 'track');
    await track('ext-5', 'track');
    await drainThrough(db, undefined, {
      maxRows: 100,
      partitions: env.config.INGEST_PARTITIONS,
      log: env.ctx.log,
      metrics: env.ctx.metrics,
    });
    expect(await attributesOf(env, env.ws, 'ext-1')).toMatchObject({ tier: 'track' });

    // The next run takes only the rows the first did not apply.
    expect(await syncOnce(env, env.ws, INTEGRATION)).toMatchObject({ job_status: 'success', rows_synced: 2 });
    expect(await attributesOf(env, env.ws, 'ext-1')).toMatchObject({ tier: 'track' });
    expect(await attributesOf(env, env.ws, 'ext-5')).toMatchObject({ tier: 'track' });
    expect(await attributesOf(env, env.ws, 'ext-6')).toMatchObject({ tier: 'file' });
    const files = await db.query(`SELECT key, rows FROM cdi_files_synced WHERE integration_id = $1`, [INTEGRATION]);
    expect(files.rows).toEqual([{ key: 'cdi/pos/a.ndjson', rows: 6 }]);
    expect(await jobRow(env, INTEGRATION)).toMatchObject({ attempts: 1 });
    // And nothing is left to take.
    expect(await syncOnce(env, env.ws, INTEGRATION)).toMatchObject({ job_status: 'success', rows_synced: 0 });
  });

  it('a run that failed for good leaves no refused row in PostgreSQL: they go to its rejects file', async () => {
    // The verbatim rows of cdi_sync_rejects are personal data: they must not outlive the run, whatever its end.
    const db = env.ctx.pool;
    await putLocal(
      env,
      env.ws,
      'cdi/rejects/a.ndjson',
      [
        JSON.stringify({ external_id: 'ext-1', payload: { tier: 'x' }, deleted: 'maybe', phone: '+1555' }),
        JSON.stringify({ external_id: 'ext-2', payload: { tier: 'rejects' } }),
        JSON.stringify({ external_id: 'ext-5', payload: { tier: 'rejects' } }),
      ].join('\n'),
    );
    await db.query(`INSERT INTO position_trap VALUES (true)`);
    try {
      await runOnce(REJECTS);
      expect(await waitForRun(env, env.ws, REJECTS)).toMatchObject({
        job_status: 'error',
        rows_synced: 1,
        rows_failed_with_errors: 1,
      });
    } finally {
      await db.query(`DELETE FROM position_trap`);
    }
    const job = await jobRow(env, REJECTS);
    const left = await db.query(`SELECT count(*)::int AS n FROM cdi_sync_rejects WHERE job_id = $1`, [job.id]);
    expect(left.rows[0].n).toBe(0);
    expect(job.rejects_key).toBe(`cdi/rejects/${job.id as string}.rejects.ndjson`);
    const rejects = await rejectsOf(env, env.ws, REJECTS);
    expect(rejects).toEqual([expect.objectContaining({ reason: expect.stringContaining('more than once'), line: 1 })]);
  });
});
