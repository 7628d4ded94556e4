import type { Pool } from '../../platform/db/pool.js';

export interface CanvasListEntry {
  id: string;
  last_edited: string;
  name: string;
  tags: string[];
}

export interface CanvasListOptions {
  page: number;
  direction: 'asc' | 'desc';
  includeArchived: boolean;
  /** Only canvases edited strictly after this instant. */
  editedAfter?: Date;
}

/**
 * One page of a workspace's canvases by creation time, ties ordered by API id so pages never overlap. Drafts and
 * stopped canvases are listed; archived ones only on request.
 */
export async function listCanvases(
  pool: Pool,
  workspaceId: string,
  opts: CanvasListOptions,
  pageSize: number,
): Promise<CanvasListEntry[]> {
  const dir = opts.direction === 'desc' ? 'DESC' : 'ASC';
  const { rows } = await pool.query<{ id: string; last_edited: Date; name: string; tags: string[] }>(
    `SELECT api_id AS id, last_edited, name, tags
       FROM canvases
      WHERE workspace_id = $1 AND ($2 OR NOT archived) AND ($3::timestamptz IS NULL OR last_edited > $3)
      ORDER BY created_at ${dir}, api_id ${dir}
      LIMIT $4 OFFSET $5`,
    [workspaceId, opts.includeArchived, opts.editedAfter ?? null, pageSize, opts.page * pageSize],
  );
  return rows.map((r) => ({ id: r.id, last_edited: r.last_edited.toISOString(), name: r.name, tags: r.tags }));
}
