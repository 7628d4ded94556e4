import type { Pool } from '../db/pool.js';
import type { DeliverabilityPage } from './common.js';

export interface HardBounce {
  email: string;
  /** When the address hard bounced (and so was unsubscribed). */
  unsubscribed_at: string;
}

/**
 * Hard-bounced addresses, newest first; equal bounce times are ordered by insertion (id) so that walking the list by
 * offset never skips or repeats an entry. `email` matches case-insensitively.
 */
export async function listHardBounces(pool: Pool, workspaceId: string, query: DeliverabilityPage & { email?: string }): Promise<HardBounce[]> {
  const { rows } = await pool.query<{ email: string; bounced_at: Date }>(
    `SELECT email, bounced_at
       FROM hard_bounces
      WHERE workspace_id = $1
        AND ($2::timestamptz IS NULL OR bounced_at >= $2)
        AND ($3::timestamptz IS NULL OR bounced_at < $3)
        AND ($4::text IS NULL OR lower(email) = lower($4))
      ORDER BY bounced_at DESC, id DESC
      LIMIT $5 OFFSET $6`,
    [workspaceId, query.start ?? null, query.end ?? null, query.email ?? null, query.limit, query.offset],
  );
  return rows.map((r) => ({ email: r.email, unsubscribed_at: r.bounced_at.toISOString() }));
}
