import type { Pool, PoolClient } from '../../platform/db/pool.js';
import { AppError } from '../../platform/errors.js';
import { PAGE_SIZE } from './integrations.js';

/**
 * The sync jobs (runs) of an integration: one runs at a time (a partial unique index), each counts what it synced and
 * refused. Where a sync has got to is the integration's (a table's watermark, a file's position), committed with every
 * batch, so that the next run, or this one resumed, goes on from there.
 */

export type JobStatus = 'running' | 'success' | 'partial' | 'error' | 'config_error';
export type JobTrigger = 'api' | 'schedule' | 'cli';

export interface SyncJob {
  id: string;
  integrationId: string;
  workspaceId: string;
  trigger: JobTrigger;
  status: JobStatus;
  startedAt: Date;
  finishedAt: Date | null;
  rowsSynced: number;
  rowsFailed: number;
  lastTimestampSynced: Date | null;
  rejectsKey: string | null;
  error: string | null;
}

interface JobRow {
  id: string;
  integration_id: string;
  workspace_id: string;
  trigger: JobTrigger;
  status: JobStatus;
  started_at: Date;
  finished_at: Date | null;
  rows_synced: number;
  rows_failed: number;
  last_timestamp_synced: Date | null;
  rejects_key: string | null;
  error: string | null;
}

const fromRow = (r: JobRow): SyncJob => ({
  id: r.id,
  integrationId: r.integration_id,
  workspaceId: r.workspace_id,
  trigger: r.trigger,
  status: r.status,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  rowsSynced: r.rows_synced,
  rowsFailed: r.rows_failed,
  lastTimestampSynced: r.last_timestamp_synced,
  rejectsKey: r.rejects_key,
  error: r.error,
});

type Db = Pick<Pool | PoolClient, 'query'>;

/** The public API's refusal of a second run while one runs. */
export const anotherJobInProgress = () => new AppError('rate_limited', 'Another job is in progress');

/**
 * Records a run of the integration, started now (so its sync_start_time is after the caller's request), or says that
 * one already runs (429 "Another job is in progress"). The caller queues the job; a run recorded but not queued
 * (Redis away) is queued by the reconciler.
 */
export async function recordSyncJob(
  db: Db,
  workspaceId: string,
  integrationId: string,
  trigger: JobTrigger,
): Promise<SyncJob> {
  const { rows } = await db.query<JobRow>(
    `INSERT INTO cdi_sync_jobs (integration_id, workspace_id, trigger) VALUES ($1, $2, $3)
     ON CONFLICT (integration_id) WHERE status = 'running' DO NOTHING RETURNING *`,
    [integrationId, workspaceId, trigger],
  );
  if (!rows[0]) throw anotherJobInProgress();
  return fromRow(rows[0]);
}

export async function readJob(db: Db, jobId: string): Promise<SyncJob | undefined> {
  const { rows } = await db.query<JobRow>(`SELECT * FROM cdi_sync_jobs WHERE id = $1`, [jobId]);
  return rows[0] ? fromRow(rows[0]) : undefined;
}

/**
 * Ends a run: its status from what it synced and refused, unless it failed as a whole. A run that moved no watermark
 * (nothing new) reports the integration's, so that its last_timestamp_synced always says how fresh the data is. Its
 * refused rows go from cdi_sync_rejects in the same statement, whatever the end: they are the source's rows verbatim,
 * kept only for the run's rejects file (./sync.ts writes it first when it can).
 */
export async function finishJob(
  db: Db,
  jobId: string,
  outcome: { status?: JobStatus; error?: string | null; rejectsKey?: string | null },
): Promise<SyncJob | undefined> {
  const { rows } = await db.query<JobRow>(
    `WITH ended AS (UPDATE cdi_sync_jobs SET
       status = coalesce($2, CASE WHEN rows_failed = 0 THEN 'success' WHEN rows_synced = 0 THEN 'error' ELSE 'partial' END),
       error = $3, rejects_key = coalesce($4, rejects_key), finished_at = now(),
       last_timestamp_synced = coalesce(last_timestamp_synced, (SELECT i.watermark FROM cdi_integrations i WHERE i.id = integration_id))
      WHERE id = $1 AND status = 'running' RETURNING *),
          forgotten AS (DELETE FROM cdi_sync_rejects WHERE job_id = $1)
     SELECT * FROM ended`,
    [jobId, outcome.status ?? null, outcome.error?.slice(0, 1000) ?? null, outcome.rejectsKey ?? null],
  );
  return rows[0] ? fromRow(rows[0]) : undefined;
}

export interface JobSyncStatus {
  job_status: JobStatus;
  sync_start_time: string;
  sync_finish_time: string | null;
  last_timestamp_synced: string | null;
  rows_synced: number;
  rows_failed_with_errors: number;
}

export const toStatus = (j: SyncJob): JobSyncStatus => ({
  job_status: j.status,
  sync_start_time: j.startedAt.toISOString(),
  sync_finish_time: j.finishedAt?.toISOString() ?? null,
  last_timestamp_synced: j.lastTimestampSynced?.toISOString() ?? null,
  rows_synced: j.rowsSynced,
  rows_failed_with_errors: j.rowsFailed,
});

/** A page of the integration's runs, newest first (the Airflow provider reads the first as the latest). */
export async function jobStatusPage(
  pool: Pool,
  integrationId: string,
  offset: number,
): Promise<{ results: JobSyncStatus[]; hasNext: boolean }> {
  const { rows } = await pool.query<JobRow>(
    `SELECT * FROM cdi_sync_jobs WHERE integration_id = $1 ORDER BY started_at DESC, id DESC LIMIT $2 OFFSET $3`,
    [integrationId, PAGE_SIZE + 1, offset],
  );
  return { results: rows.slice(0, PAGE_SIZE).map((r) => toStatus(fromRow(r))), hasNext: rows.length > PAGE_SIZE };
}
