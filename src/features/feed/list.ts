import type { Pool } from '../../platform/db/pool.js';

export interface FeedCardListEntry {
  id: string;
  type: 'NewsItem' | 'CaptionedImage' | 'Banner';
  title: string;
  tags: string[];
}

/** One page of a workspace's news feed cards by creation time, ties ordered by API id; archived cards only on request. */
export async function listFeedCards(
  pool: Pool,
  workspaceId: string,
  opts: { page: number; direction: 'asc' | 'desc'; includeArchived: boolean },
  pageSize: number,
): Promise<FeedCardListEntry[]> {
  const dir = opts.direction === 'desc' ? 'DESC' : 'ASC';
  const { rows } = await pool.query<FeedCardListEntry>(
    `SELECT api_id AS id, type, title, tags
       FROM feed_cards
      WHERE workspace_id = $1 AND ($2 OR NOT archived)
      ORDER BY created_at ${dir}, api_id ${dir}
      LIMIT $3 OFFSET $4`,
    [workspaceId, opts.includeArchived, pageSize, opts.page * pageSize],
  );
  return rows;
}
