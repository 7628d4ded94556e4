import type { Pool } from '../../platform/db/pool.js';
import type { ListPage } from '../../platform/lib/list-page.js';

/** The address lists read by time: the hard bounces and the spam list (their tables' names are constants here). */
const LISTS = {
  hard_bounces: 'bounced_at',
  email_spam: 'reported_at',
} as const;

/**
 * One address list's entries, newest first; equal times are ordered by insertion (id) so that walking the list by
 * offset never skips or repeats an entry. `email` matches case-insensitively.
 */
export async function listAddressEntries(
  pool: Pool,
  table: keyof typeof LISTS,
  workspaceId: string,
  query: ListPage & { email?: string },
): Promise<{ email: string; at: Date }[]> {
  const at = LISTS[table];
  const { rows } = await pool.query<{ email: string; at: Date }>(
    `SELECT email, ${at} AS at
       FROM ${table}
      WHERE workspace_id = $1
        AND ($2::timestamptz IS NULL OR ${at} >= $2)
        AND ($3::timestamptz IS NULL OR ${at} < $3)
        AND ($4::text IS NULL OR lower(email) = lower($4))
      ORDER BY ${at} DESC, id DESC
      LIMIT $5 OFFSET $6`,
    [workspaceId, query.start ?? null, query.end ?? null, query.email ?? null, query.limit, query.offset],
  );
  return rows;
}
