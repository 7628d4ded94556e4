import { z } from 'zod';
import type { Pool } from '../../platform/db/pool.js';
import type { ListPage } from '../../platform/lib/list-page.js';
import { listAddressEntries } from './address-list.js';
import { RecordTime, recordsBody, type RecordResult } from '../../platform/lib/records-body.js';

/**
 * The spam list, beside the hard bounces: addresses whose owner reported mail as spam, recorded through the internal
 * API (POST /internal/records/spam, a sending provider's complaint feed), listed by GET /email/spam and removed by POST
 * /email/spam/remove. A spam report here lists the address only: it does not change its subscription state (a
 * sender's complaint feed usually unsubscribes separately, through POST /email/status).
 */

export const SpamRecord = z.strictObject({
  email: z
    .string({ error: 'email must be a string' })
    .max(254, 'email is at most 254 characters')
    .regex(/^[^\s@]+@[^\s@]+$/, 'email must be an email address'),
  time: RecordTime,
});
export const SpamRecords = recordsBody(SpamRecord);
export type SpamRecordInput = z.output<typeof SpamRecord>;

/** Records spam reports, lower-cased; an exact repeat (same address and time) is skipped. */
export async function recordSpam(
  pool: Pool,
  workspaceId: string,
  records: SpamRecordInput[],
  now = new Date(),
): Promise<RecordResult> {
  const { rows } = await pool.query<{ n: number }>(
    `WITH input AS (
       SELECT DISTINCT ON (e, t) e AS email, t AS reported_at, n
         FROM unnest($2::text[], $3::timestamptz[]) WITH ORDINALITY AS u(e, t, n)
        ORDER BY e, t, n
     ), ins AS (
       INSERT INTO email_spam (workspace_id, email, reported_at)
       SELECT $1, i.email, i.reported_at FROM input i
        WHERE NOT EXISTS (SELECT 1 FROM email_spam s
                           WHERE s.workspace_id = $1 AND lower(s.email) = i.email AND s.reported_at = i.reported_at)
        ORDER BY i.n
       RETURNING 1
     )
     SELECT count(*)::int AS n FROM ins`,
    [workspaceId, records.map((r) => r.email.toLowerCase()), records.map((r) => r.time ?? now)],
  );
  const recorded = rows[0]!.n;
  return { recorded, duplicates: records.length - recorded };
}

export interface SpamReport {
  email: string;
  /** When the address reported spam. */
  reported_at: string;
}

/** Addresses on the spam list, newest first, ties by insertion (so offset paging never repeats an entry). */
export async function listSpam(
  pool: Pool,
  workspaceId: string,
  query: ListPage & { email?: string },
): Promise<SpamReport[]> {
  const rows = await listAddressEntries(pool, 'email_spam', workspaceId, query);
  return rows.map((r) => ({ email: r.email, reported_at: r.at.toISOString() }));
}

/** Takes (lower-cased) addresses off the spam list; answers how many entries went. */
export async function removeSpam(pool: Pool, workspaceId: string, addresses: string[]): Promise<number> {
  const { rowCount } = await pool.query(
    `DELETE FROM email_spam WHERE workspace_id = $1 AND lower(email) = ANY($2::text[])`,
    [workspaceId, addresses],
  );
  return rowCount ?? 0;
}
