import type { Pool, PoolClient } from '../../platform/db/pool.js';

/**
 * The statements of the `segments` table, apart from the workspace file's upsert of its rows
 * (src/features/workspace/apply-specs.ts writes every declared table the same way): a segment looked up by the id the
 * API knows it by, a batch of them for the workspace file's references, and the list endpoint's page.
 */

export interface SegmentRow {
  id: string;
  archived: boolean;
  /** The stored filter, as declared: callers parse it (src/profiles/segments/filter.ts) before compiling it. */
  filter: unknown;
}

/** A workspace's segment by its API id (`segments.api_id`), archived or not; null when the workspace has none. */
export async function segmentByApiId(
  db: Pool | PoolClient,
  workspaceId: string,
  apiId: string,
): Promise<SegmentRow | null> {
  const { rows } = await db.query<SegmentRow>(
    `SELECT id, archived, filter FROM segments WHERE workspace_id = $1 AND api_id = $2`,
    [workspaceId, apiId],
  );
  return rows[0] ?? null;
}

/** The segments of any of the workspaces with any of the API ids, with where each belongs. */
export async function segmentsByApiIds(
  db: Pool | PoolClient,
  workspaceIds: string[],
  apiIds: string[],
): Promise<{ id: string; workspace_id: string; api_id: string }[]> {
  const { rows } = await db.query<{ id: string; workspace_id: string; api_id: string }>(
    'SELECT id, workspace_id, api_id FROM segments WHERE workspace_id = ANY($1) AND api_id = ANY($2)',
    [workspaceIds, apiIds],
  );
  return rows;
}

export interface SegmentListEntry {
  id: string;
  name: string;
  analytics_tracking_enabled: boolean;
  tags: string[];
}

/** One page of a workspace's unarchived segments by creation time; ties are ordered by id so pages never overlap. */
export async function listSegments(
  pool: Pool,
  workspaceId: string,
  page: number,
  direction: 'asc' | 'desc',
  pageSize: number,
): Promise<SegmentListEntry[]> {
  const dir = direction === 'desc' ? 'DESC' : 'ASC';
  const { rows } = await pool.query<SegmentListEntry>(
    `SELECT api_id AS id, name, analytics_tracking_enabled, tags
       FROM segments
      WHERE workspace_id = $1 AND NOT archived
      ORDER BY created_at ${dir}, id ${dir}
      LIMIT $2 OFFSET $3`,
    [workspaceId, pageSize, page * pageSize],
  );
  return rows;
}
