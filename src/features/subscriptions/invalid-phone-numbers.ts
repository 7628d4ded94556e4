import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import type { ListPage } from '../../platform/lib/list-page.js';
import { RecordTime, recordsBody, type RecordResult } from '../../platform/lib/records-body.js';

/**
 * Invalid phone numbers: numbers found unusable, recorded through the internal API (POST
 * /records/invalid_phone_numbers) and the workspace file by the one writer below, and listed by GET
 * /sms/invalid_phone_numbers.
 */

/** E.164: a plus, a non-zero country digit, at most 15 digits in all. */
export const E164 = /^\+[1-9]\d{1,14}$/;

export const InvalidPhoneNumberRecord = z.strictObject({
  phone: z
    .string({ error: 'phone must be a string' })
    .regex(E164, 'phone must be an E.164 number such as +15555550123'),
  reason: z.enum(['provider_error', 'deactivated'], { error: "reason must be 'provider_error' or 'deactivated'" }),
  time: RecordTime,
});
export const InvalidPhoneNumberRecords = recordsBody(InvalidPhoneNumberRecord);
export type InvalidPhoneNumberRecordInput = z.output<typeof InvalidPhoneNumberRecord>;

/** Records numbers found invalid in one transaction of their own (see recordInvalidPhoneNumbersIn). */
export async function recordInvalidPhoneNumbers(
  pool: Pool,
  workspaceId: string,
  records: InvalidPhoneNumberRecordInput[],
  now = new Date(),
): Promise<RecordResult> {
  return withTransaction(pool, (client) => recordInvalidPhoneNumbersIn(client, workspaceId, records, now));
}

/** Records numbers found invalid, in the caller's transaction; an exact repeat (same number, reason and time) is skipped. */
export async function recordInvalidPhoneNumbersIn(
  client: PoolClient,
  workspaceId: string,
  records: InvalidPhoneNumberRecordInput[],
  now = new Date(),
): Promise<RecordResult> {
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
}

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
  query: ListPage & { phoneNumbers: string[]; reason?: InvalidReason },
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
    [
      workspaceId,
      query.start ?? null,
      query.end ?? null,
      query.phoneNumbers,
      query.reason ?? null,
      query.limit,
      query.offset,
    ],
  );
  return rows.map((r) => ({ phone: r.phone, invalid_detected_at: r.detected_at.toISOString(), reason: r.reason }));
}
