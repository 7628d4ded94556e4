import type { Pool } from '../db/pool.js';

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
