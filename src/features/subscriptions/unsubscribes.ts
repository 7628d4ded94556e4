import type { Pool } from '../../platform/db/pool.js';
import type { ListPage } from '../../platform/lib/list-page.js';

export interface Unsubscribe {
  email: string;
  unsubscribed_at: string;
}

/**
 * GET /email/unsubscribes: the addresses unsubscribed in [start, end), each once, at its latest unsubscription, newest
 * first (or oldest first). An address is unsubscribed per address (POST /email/status, a hard bounce: the
 * email_subscriptions row) or per profile (an attributes object's email_subscribe, whose time attribute_times
 * keeps); both count, and an address with both is listed once. Two partial indexes hold exactly these rows
 * (migration 0190), so the cost follows the unsubscribed, not the workspace.
 */
export async function listUnsubscribes(
  pool: Pool,
  workspaceId: string,
  query: ListPage & { email?: string; ascending: boolean },
): Promise<Unsubscribe[]> {
  const { rows } = await pool.query<{ email: string; at: Date }>(
    `WITH unsubscribed AS (
       SELECT s.email, s.updated_at AS at FROM email_subscriptions s
        WHERE s.workspace_id = $1 AND s.state = 'unsubscribed' AND ($4::text IS NULL OR s.email = lower($4))
       UNION ALL
       SELECT lower(p.email), coalesce((p.attribute_times->>'email_subscribe')::timestamptz, p.updated_at) FROM profiles p
        WHERE p.workspace_id = $1 AND p.email_subscribe = 'unsubscribed' AND p.email IS NOT NULL AND ($4::text IS NULL OR lower(p.email) = lower($4))
     ), latest AS (SELECT email, max(at) AS at FROM unsubscribed GROUP BY email)
     SELECT email, at FROM latest
      WHERE ($2::timestamptz IS NULL OR at >= $2) AND ($3::timestamptz IS NULL OR at < $3)
      ORDER BY CASE WHEN $7 THEN at END ASC, CASE WHEN NOT $7 THEN at END DESC, email
      LIMIT $5 OFFSET $6`,
    [
      workspaceId,
      query.start ?? null,
      query.end ?? null,
      query.email ?? null,
      query.limit,
      query.offset,
      query.ascending,
    ],
  );
  return rows.map((r) => ({ email: r.email, unsubscribed_at: r.at.toISOString() }));
}
