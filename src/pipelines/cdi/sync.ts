import { Readable } from 'node:stream';
import { lockNames, tryLockSession, unlockSession } from '../../platform/db/advisory-locks.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../../platform/storage/stores.js';
import type { SyncDeps } from './batch-apply.js';
import { syncFiles } from './file-sync.js';
import { REJECTS_SUFFIX } from './file-source.js';
import { getIntegration, type CdiIntegration } from './integrations.js';
import { finishJob, readJob, type SyncJob } from './sync-runs.js';
import { SourceConfigError } from './table-source.js';
import { syncTable } from './table-sync.js';

export type { SyncDeps } from './batch-apply.js';

/**
 * Running a Cloud Data Ingestion sync (docs/cdi.md): the source's new rows, a batch at a time, each batch applied with
 * the progress it makes (a table's watermark and the hashes of its rows, a file's position) and the rows it refused,
 * so a run killed at any point resumes from what it committed, and no row is applied twice or skipped
 * (./table-sync.ts, ./file-sync.ts; the apply itself is ./batch-apply.ts).
 */

/** Where a run's rejects file goes: beside a bucket source's files, or under cdi/<integration>/ for a table. */
function rejectsKeyOf(integration: CdiIntegration, jobId: string): string {
  if (integration.source.type === 'bucket')
    return `${integration.source.prefix.replace(/[^/]*$/, '')}${jobId}${REJECTS_SUFFIX}`;
  return `cdi/${integration.id}/${jobId}${REJECTS_SUFFIX}`;
}

/** Writes the run's refused rows, in order, to its rejects file, then forgets them; returns the key, or null. */
async function writeRejects(
  deps: SyncDeps,
  job: SyncJob,
  integration: CdiIntegration,
  opened: WorkspaceStore,
): Promise<string | null> {
  const count = await deps.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM cdi_sync_rejects WHERE job_id = $1`,
    [job.id],
  );
  if (count.rows[0]!.n === 0) return null;
  const key = rejectsKeyOf(integration, job.id);
  const pool = deps.pool;
  // In the source's order: a table's rows by (UPDATED_AT, hash), whichever lane refused them; a bucket's as recorded.
  async function* lines(): AsyncGenerator<string> {
    let after = { order: '', seq: 0 };
    for (;;) {
      const { rows } = await pool.query<{ seq: number; line: string; ord: string }>(
        `SELECT seq, line, coalesce(source_order, '') AS ord FROM cdi_sync_rejects
          WHERE job_id = $1 AND (coalesce(source_order, ''), seq) > ($2, $3)
          ORDER BY coalesce(source_order, ''), seq LIMIT 5000`,
        [job.id, after.order, after.seq],
      );
      if (rows.length === 0) return;
      yield `${rows.map((r) => r.line).join('\n')}\n`;
      after = { order: rows[rows.length - 1]!.ord, seq: Number(rows[rows.length - 1]!.seq) };
    }
  }
  await opened.store.put(key, Readable.from(lines()), { contentType: 'application/x-ndjson' });
  await deps.pool.query(`UPDATE cdi_sync_jobs SET rejects_key = $2 WHERE id = $1`, [job.id, key]);
  await deps.pool.query(`DELETE FROM cdi_sync_rejects WHERE job_id = $1`, [job.id]);
  return key;
}

/**
 * Ends a run whose attempts are spent (the job's last attempt failed): its rejects file written if the store takes it,
 * then the run ended `error`, which forgets its refused rows whether or not the file could be written (finishJob).
 */
export async function endFailedRun(deps: SyncDeps, jobId: string, error: string): Promise<void> {
  const job = await readJob(deps.pool, jobId);
  if (!job || job.status !== 'running') return;
  let rejectsKey: string | null = null;
  let opened: WorkspaceStore | undefined;
  try {
    const integration = await getIntegration(deps.pool, job.workspaceId, job.integrationId);
    const { destination, namespace } = await workspaceStorage(deps.pool, job.workspaceId);
    opened = storeFor(deps.config, destination, namespace);
    rejectsKey = await writeRejects(deps, job, integration, opened);
  } catch (err) {
    deps.log.warn(
      { cdiJobId: jobId, reason: (err as Error).message },
      'CDI sync failed for good, and its refused rows could not be written to the store: they are dropped',
    );
  } finally {
    opened?.close();
  }
  await finishJob(deps.pool, jobId, { status: 'error', error, rejectsKey });
}

/**
 * Runs (or resumes) a sync to its end and returns its job. Holds a session advisory lock on the integration for the
 * whole run, so two runners of one integration (a stalled job retried while the first still works) never interleave;
 * the lock goes with the connection if the process dies. A source that cannot be read as configured ends the run as
 * `config_error`; any other failure is thrown, for the job to be retried (it resumes where it stopped).
 */
export async function runSync(deps: SyncDeps, jobId: string): Promise<SyncJob | undefined> {
  const first = await readJob(deps.pool, jobId);
  if (!first || first.status !== 'running') return first;
  const lockClient = await deps.pool.connect();
  let opened: WorkspaceStore | undefined;
  try {
    if (!(await tryLockSession(lockClient, lockNames.cdiSync(first.integrationId))))
      throw new Error(`integration ${first.integrationId} is being synced by another process`);
    const job = (await readJob(deps.pool, jobId))!;
    if (job.status !== 'running') return job;
    await deps.pool.query(`UPDATE cdi_sync_jobs SET attempts = attempts + 1 WHERE id = $1`, [job.id]);
    const integration = await getIntegration(deps.pool, job.workspaceId, job.integrationId);
    const log = deps.log.child({ cdiJobId: job.id, integrationId: integration.id });
    const { destination, namespace } = await workspaceStorage(deps.pool, job.workspaceId);
    opened = storeFor(deps.config, destination, namespace);
    const startedAt = job.startedAt.toISOString();
    try {
      if (integration.source.type === 'postgres')
        await syncTable(deps, job, integration as CdiIntegration & { source: { type: 'postgres' } }, startedAt);
      else
        await syncFiles(deps, job, integration as CdiIntegration & { source: { type: 'bucket' } }, opened, startedAt);
    } catch (err) {
      if (!(err instanceof SourceConfigError)) throw err;
      log.warn({ reason: err.message }, 'CDI sync cannot read its source');
      return await finishJob(deps.pool, job.id, {
        status: 'config_error',
        error: err.message,
        rejectsKey: await writeRejects(deps, job, integration, opened),
      });
    }
    const rejectsKey = await writeRejects(deps, job, integration, opened);
    const finished = await finishJob(deps.pool, job.id, { rejectsKey });
    log.info(
      { status: finished?.status, rowsSynced: finished?.rowsSynced, rowsFailed: finished?.rowsFailed },
      'CDI sync finished',
    );
    return finished;
  } finally {
    opened?.close();
    await unlockSession(lockClient, lockNames.cdiSync(first.integrationId)).catch(() => {});
    lockClient.release();
  }
}
