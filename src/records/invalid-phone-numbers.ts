import { z } from 'zod';
import { withTransaction, type Pool } from '../db/pool.js';
import { E164 } from '../deliverability/common.js';
import { RecordTime, recordsBody, type RecordResult } from './common.js';

export const InvalidPhoneNumberRecord = z.strictObject({
  phone: z.string({ error: 'phone must be a string' }).regex(E164, 'phone must be an E.164 number such as +15555550123'),
  reason: z.enum(['provider_error', 'deactivated'], { error: "reason must be 'provider_error' or 'deactivated'" }),
  time: RecordTime,
});
export const InvalidPhoneNumberRecords = recordsBody(InvalidPhoneNumberRecord);
export type InvalidPhoneNumberRecordInput = z.output<typeof InvalidPhoneNumberRecord>;

/** Records numbers found invalid; an exact repeat (same number, reason and time) is skipped. */
export async function recordInvalidPhoneNumbers(
  pool: Pool,
  workspaceId: string,
  records: InvalidPhoneNumberRecordInput[],
  now = new Date(),
): Promise<RecordResult> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ n: number }>(
      `WITH input AS (
         SELECT DISTINCT ON (p, r, t) p AS phone, r AS reason, t AS detected_at, n
           FROM unnest($2::text[], $3::text[], $4::timestamptz[]) WITH ORDINALITY AS u(p, r, t, n)
          ORDER BY p, r, t, n
       ), ins AS (
         INSERT INTO invalid_phone_numbers (workspace_id, phone, reason, detected_at)
         SELECT $1, i.phone, i.reason, i.detected_at FROM input i
          WHERE NOT EXISTS (SELECT 1 FROM invalid_phone_numbers x
                             WHERE x.workspace_id = $1 AND x.phone = i.phone AND x.reason = i.reason AND x.detected_at = i.detected_at)
          ORDER BY i.n
         RETURNING 1
       )
       SELECT count(*)::int AS n FROM ins`,
      [workspaceId, records.map((r) => r.phone), records.map((r) => r.reason), records.map((r) => r.time ?? now)],
    );
    const recorded = rows[0]!.n;
    return { recorded, duplicates: records.length - recorded };
  });
}
