import type { Pool } from '../db/pool.js';
import type { DeliverabilityPage } from './common.js';

export type InvalidReason = 'provider_error' | 'deactivated';

export interface InvalidPhoneNumber {
  phone: string;
  invalid_detected_at: string;
  reason: InvalidReason;
}

/**
 * Invalid phone numbers, newest first; equal detection times are ordered by insertion (id) so that walking the list
 * by offset never skips or repeats an entry.
 */
export async function listInvalidPhoneNumbers(
  pool: Pool,
  workspaceId: string,
  query: DeliverabilityPage & { phoneNumbers: string[]; reason?: InvalidReason },
): Promise<InvalidPhoneNumber[]> {
  const { rows } = await pool.query<{ phone: string; detected_at: Date; reason: InvalidReason }>(
    `SELECT phone, detected_at, reason
       FROM invalid_phone_numbers
      WHERE workspace_id = $1
        AND ($2::timestamptz IS NULL OR detected_at >= $2)
        AND ($3::timestamptz IS NULL OR detected_at < $3)
        AND (cardinality($4::text[]) = 0 OR phone = ANY($4))
        AND ($5::text IS NULL OR reason = $5)
      ORDER BY detected_at DESC, id DESC
      LIMIT $6 OFFSET $7`,
    [workspaceId, query.start ?? null, query.end ?? null, query.phoneNumbers, query.reason ?? null, query.limit, query.offset],
  );
  return rows.map((r) => ({ phone: r.phone, invalid_detected_at: r.detected_at.toISOString(), reason: r.reason }));
}
