import type { Pool, PoolClient } from '../../platform/db/pool.js';
import type { UploadedPart } from './shard/part-writer.js';

/**
 * The statements of the `exports` table (schema: src/platform/db/schema.sql): an export's row as its jobs read it, the
 * moves of its status (queued -> running -> ready | failed), its progress and parts, and the lookups of the API and the
 * reconciler. The incremental rules' set-based pruning, which reads exports together with the change log and the member
 * tables, stays beside those rules in ./incremental.ts.
 */

export interface ExportRow {
  id: string;
  object_prefix: string;
  company_id: string;
  workspace_id: string;
  segment_id: string;
  segment_api_id: string;
  filter: unknown;
  status: 'queued' | 'running' | 'ready' | 'failed';
  request: unknown;
  destination: 'local' | 's3' | 'gcs';
  key_prefix: string | null;
  shard_count: number;
  /** Recorded before the local store had per-workspace namespaces: its keys are relative to the shared root. */
  local_shared_root: boolean;
  /** random_bucket values per shard when requested (null: recorded before this was kept). */
  shard_buckets: number | null;
  /** The API's address when the export was requested (null: recorded before this was kept). */
  public_base_url: string | null;
  /** The primary's WAL position when the export was requested (null: recorded before this was kept). */
  primary_lsn: string | null;
  /** The exports whose member records make up this one's (./member-layers.ts); null: recorded before they were. */
  member_layers: string[] | null;
  created_at: Date;
}

export async function loadExport(pool: Pool, exportId: string): Promise<ExportRow | null> {
  const { rows } = await pool.query<ExportRow>(
    `SELECT e.id, e.object_prefix, e.company_id, e.workspace_id, e.segment_id, s.api_id AS segment_api_id, s.filter, e.status, e.request,
            e.destination, e.key_prefix, COALESCE(e.shard_count, 1) AS shard_count, e.local_shared_root, e.shard_buckets,
            e.public_base_url, e.primary_lsn::text, e.member_layers, e.created_at
       FROM exports e JOIN segments s ON s.id = e.segment_id
      WHERE e.id = $1`,
    [exportId],
  );
  return rows[0] ?? null;
}

/** What recording a new export writes (createExport decides each value). */
export interface NewExportRow {
  id: string;
  objectPrefix: string;
  companyId: string;
  workspaceId: string;
  segmentId: string;
  /** The request as the export runs it (ExportSpec), stored as JSON. */
  request: unknown;
  destination: 'local' | 's3' | 'gcs';
  shardCount: number;
  shardBuckets: number | null;
  scheduledBy: string | null;
  publicBaseUrl: string;
  createdAt: Date;
  changesSince: string | null;
  memberLayers: string[];
}

/** The company's exports not yet ended (queued or running), counted in the caller's transaction. */
export async function countUnfinishedExports(client: PoolClient, companyId: string): Promise<number> {
  const { rows } = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM exports WHERE company_id = $1 AND status IN ('queued', 'running')`,
    [companyId],
  );
  return rows[0]!.n;
}

/**
 * Inserts the export's row, with the primary's WAL position now. 'segment-taken' when the segment already has an
 * unfinished export (a unique index of migration 0140 lets one in).
 */
export async function insertExportRow(client: PoolClient, row: NewExportRow): Promise<'inserted' | 'segment-taken'> {
  try {
    await client.query(
      `INSERT INTO exports (id, object_prefix, company_id, workspace_id, segment_id, request, destination, shard_count, shard_buckets, scheduled_by,
                            public_base_url, created_at, primary_lsn, changes_since, member_layers)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, pg_current_wal_lsn(), $13, $14)`,
      [
        row.id,
        row.objectPrefix,
        row.companyId,
        row.workspaceId,
        row.segmentId,
        JSON.stringify(row.request),
        row.destination,
        row.shardCount,
        row.shardBuckets,
        row.scheduledBy,
        row.publicBaseUrl,
        row.createdAt,
        row.changesSince,
        row.memberLayers,
      ],
    );
    return 'inserted';
  } catch (err) {
    if ((err as { code?: string }).code === '23505') return 'segment-taken';
    throw err;
  }
}

/** Which of these ids are exports not yet ended (the others are stale holders of a Redis hold). */
export async function unfinishedExportIds(pool: Pool, ids: string[]): Promise<Set<string>> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT id::text FROM exports WHERE id = ANY($1::uuid[]) AND status IN ('queued', 'running')`,
    [ids.filter((h) => /^[0-9a-f-]{36}$/.test(h))],
  );
  return new Set(rows.map((r) => r.id));
}

/** Moves the export to running, keeping the first key prefix any job set; null when it has ended meanwhile. */
export async function setRunning(pool: Pool, exportId: string, keyPrefix: string): Promise<string | null> {
  const { rows } = await pool.query<{ key_prefix: string }>(
    `UPDATE exports SET status = 'running', started_at = COALESCE(started_at, now()), key_prefix = COALESCE(key_prefix, $2)
      WHERE id = $1 AND status IN ('queued', 'running') RETURNING key_prefix`,
    [exportId, keyPrefix],
  );
  return rows[0]?.key_prefix ?? null;
}

/**
 * Records an uploaded part (again, for a retried shard's part of the same place), then raises the progress the status
 * read shows: the most users ever counted while running, since a retried shard removes its parts first.
 */
export async function recordPart(pool: Pool, exportId: string, part: UploadedPart): Promise<void> {
  await pool.query(
    `INSERT INTO export_parts (export_id, kind, shard, part_index, object_key, users, bytes, sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
     ON CONFLICT (export_id, kind, shard, part_index) DO UPDATE
       SET object_key = excluded.object_key, users = excluded.users, bytes = excluded.bytes, sha256 = excluded.sha256, created_at = now()`,
    [exportId, part.kind, part.shard, part.partIndex, part.key, part.users, part.bytes, part.sha256],
  );
  await pool.query(
    `UPDATE exports SET users_progress = GREATEST(users_progress, ${liveUsersSql('$1', 'shard_count')}) WHERE id = $1`,
    [exportId],
  );
}

/**
 * Users an unfinished export has written so far: the shards' full parts, plus their tails, which the finishing job
 * cuts into parts of its own (numbered as shard `shard_count`) while the tails are still recorded: those parts are
 * counted instead of the tails once they outgrow them, never both.
 */
export function liveUsersSql(exportId: string, shardCount: string): string {
  return `((SELECT COALESCE(sum(users), 0) FROM export_parts WHERE export_id = ${exportId} AND kind = 'users' AND shard < COALESCE(${shardCount}, 1))
           + GREATEST((SELECT COALESCE(sum(users), 0) FROM export_tails WHERE export_id = ${exportId} AND kind = 'users'),
                      (SELECT COALESCE(sum(users), 0) FROM export_parts WHERE export_id = ${exportId} AND kind = 'users' AND shard >= COALESCE(${shardCount}, 1))))`;
}

/** Marks a running export ready with its counts (a download link's lifetime for the built-in store). */
export async function setReady(
  pool: Pool,
  exportId: string,
  counts: { users: number; removed: number; parts: number },
  downloadTtlSeconds: number,
): Promise<void> {
  await pool.query(
    `UPDATE exports SET status = 'ready', finished_at = now(), users_done = $2, parts_done = $3, removed_done = $5,
            url_expires_at = CASE WHEN destination = 'local' THEN now() + make_interval(secs => $4) END
      WHERE id = $1 AND status = 'running'`,
    [exportId, counts.users, counts.parts, downloadTtlSeconds, counts.removed],
  );
}

/** Ends an unfinished export as failed; false when it had already ended. */
export async function setFailed(pool: Pool, exportId: string, reason: string): Promise<boolean> {
  const { rowCount } = await pool.query(
    `UPDATE exports SET status = 'failed', error = $2, finished_at = now() WHERE id = $1 AND status IN ('queued', 'running')`,
    [exportId, reason],
  );
  return (rowCount ?? 0) > 0;
}

/** Records that the export's callback is owed, once: the reconciler queues it again until delivered or given up. */
export async function setCallbackPending(pool: Pool, exportId: string): Promise<void> {
  await pool.query(`UPDATE exports SET callback_state = 'pending' WHERE id = $1 AND callback_state IS NULL`, [
    exportId,
  ]);
}

/** The callback's end: delivered, or given up (refused address, attempts spent); the reconciler leaves it then. */
export async function settleCallback(pool: Pool, exportId: string, state: 'delivered' | 'abandoned'): Promise<void> {
  await pool.query('UPDATE exports SET callback_state = $2 WHERE id = $1', [exportId, state]);
}

/** Drops the export's member records (whole and layered): it can no longer be a base of `changes_since`. */
export async function forgetMembers(pool: Pool, exportId: string): Promise<void> {
  await pool.query(
    `WITH dropped AS (DELETE FROM export_members WHERE export_id = $1), dropped_changes AS (DELETE FROM export_member_changes WHERE export_id = $1)
     UPDATE exports SET members_forgotten_at = now() WHERE id = $1`,
    [exportId],
  );
}

/** Whether a base export still has its member records, and the layers they are made of; null when unknown. */
export async function baseMembersState(
  pool: Pool,
  exportId: string,
): Promise<{ id: string; forgotten: boolean; member_layers: string[] | null } | null> {
  const { rows } = await pool.query<{ id: string; forgotten: boolean; member_layers: string[] | null }>(
    `SELECT id, members_forgotten_at IS NOT NULL AS forgotten, member_layers FROM exports WHERE id = $1`,
    [exportId],
  );
  return rows[0] ?? null;
}

export interface DownloadRow {
  id: string;
  company_id: string;
  workspace_id: string;
  status: string;
  key_prefix: string | null;
  destination: string;
  local_shared_root: boolean;
  url_expires_at: Date | null;
}

/** The export a download link names (object prefixes are unique across workspaces: they start with a UUID). */
export async function exportByObjectPrefix(pool: Pool, objectPrefix: string): Promise<DownloadRow | null> {
  const { rows } = await pool.query<DownloadRow>(
    `SELECT id, company_id, workspace_id, status, key_prefix, destination, local_shared_root, url_expires_at FROM exports WHERE object_prefix = $1`,
    [objectPrefix],
  );
  return rows[0] ?? null;
}

export interface ExportStatusRow {
  object_prefix: string;
  segment_id: string;
  status: ExportRow['status'];
  destination: ExportRow['destination'];
  users_done: string | null;
  parts_done: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
  key_prefix: string | null;
  url_expires_at: Date | null;
  error: string | null;
  scheduled_by: string | null;
  users_progress: string;
  public_base_url: string | null;
  removed_done: string | null;
  changes_since: string | null;
  live_users: string;
  live_parts: string;
}

/** A workspace's export as the status endpoint reads it, with its live counts while it runs. */
export async function exportStatusRow(
  pool: Pool,
  workspaceId: string,
  objectPrefix: string,
): Promise<ExportStatusRow | null> {
  const { rows } = await pool.query<ExportStatusRow>(
    `SELECT e.object_prefix, s.api_id AS segment_id, e.status, e.destination, e.users_done, e.parts_done, e.created_at, e.started_at,
            e.finished_at, e.key_prefix, e.url_expires_at, e.error, e.scheduled_by, e.users_progress, e.public_base_url,
            e.removed_done, (SELECT b.object_prefix FROM exports b WHERE b.id = e.changes_since) AS changes_since,
            ${liveUsersSql('e.id', 'e.shard_count')} AS live_users,
            (SELECT count(*) FROM export_parts WHERE export_id = e.id) AS live_parts
       FROM exports e JOIN segments s ON s.id = e.segment_id
      WHERE e.workspace_id = $1 AND e.object_prefix = $2`,
    [workspaceId, objectPrefix],
  );
  return rows[0] ?? null;
}

/** Exports queued or running since before `before`, oldest first: the reconciler's candidates. */
export async function unfinishedExportsBefore(
  pool: Pool,
  before: Date,
): Promise<
  { id: string; segment_id: string; company_id: string; shard_count: number; shard_buckets: number | null }[]
> {
  const { rows } = await pool.query(
    `SELECT id, segment_id, company_id, COALESCE(shard_count, 1) AS shard_count, shard_buckets
       FROM exports WHERE status IN ('queued', 'running') AND created_at < $1 ORDER BY created_at`,
    [before],
  );
  return rows;
}

/** Exports that finished in the day before `before` and whose callback is still owed. */
export async function pendingCallbacksBefore(pool: Pool, before: Date): Promise<ExportCallbackRow[]> {
  const { rows } = await pool.query<ExportCallbackRow>(
    `SELECT id, object_prefix, destination, request, status, error, public_base_url FROM exports
      WHERE callback_state = 'pending' AND finished_at BETWEEN now() - interval '1 day' AND $1`,
    [before],
  );
  return rows;
}

/** What the callback of a finished export is made from (columns of `exports`). */
export interface ExportCallbackRow {
  id: string;
  object_prefix: string;
  destination: string;
  request: unknown;
  status: string;
  error: string | null;
  public_base_url: string | null;
}
