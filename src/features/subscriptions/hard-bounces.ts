import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import type { ListPage } from '../../platform/lib/list-page.js';
import { listAddressEntries } from './address-list.js';
import { RecordTime, recordsBody, type RecordResult } from '../../platform/lib/records-body.js';
import { lockWorkspaceProfiles } from '../../profiles/write/locks.js';
import { unsubscribeBounced } from '../../profiles/states.js';

/**
 * Hard bounces: the addresses that bounced for good, recorded through the internal API (POST /records/hard_bounces)
 * and the workspace file by the one writer below, and listed by GET /email/hard_bounces.
 */

export const HardBounceRecord = z.strictObject({
  email: z
    .string({ error: 'email must be a string' })
    .max(254, 'email is at most 254 characters')
    .regex(/^[^\s@]+@[^\s@]+$/, 'email must be an email address'),
  time: RecordTime,
});
export const HardBounceRecords = recordsBody(HardBounceRecord);
export type HardBounceRecordInput = z.output<typeof HardBounceRecord>;

/** Records hard bounces in one transaction of their own (see recordHardBouncesIn). */
export async function recordHardBounces(
  pool: Pool,
  workspaceId: string,
  records: HardBounceRecordInput[],
  now = new Date(),
): Promise<RecordResult> {
  return withTransaction(pool, (client) => recordHardBouncesIn(client, workspaceId, records, now));
}

/**
 * Records hard bounces and unsubscribes the bounced addresses, as the public API does (its hard-bounce list calls
 * the bounce time `unsubscribed_at`): the address's stored subscription state (also for addresses no profile
 * carries yet) and every profile with that address become `unsubscribed`, unless a later subscription change
 * exists. Addresses are stored lower-cased; an exact repeat (same address and time) is skipped, and so is a blocklisting
 * of an address already listed. Runs in the
 * caller's transaction (the workspace file's apply writes its records in its own). `source` is what the event log says
 * set the state: a bounce, or POST /email/blocklist, which marks addresses hard bounced.
 */
export async function recordHardBouncesIn(
  client: PoolClient,
  workspaceId: string,
  records: HardBounceRecordInput[],
  now = new Date(),
  source: 'bounce' | 'blocklist' = 'bounce',
): Promise<RecordResult> {
  const emails = records.map((r) => r.email.toLowerCase());
  const times = records.map((r) => r.time ?? now);
  await lockWorkspaceProfiles(client, [workspaceId]);
  const inserted = await client.query<{ n: number }>(
    `WITH input AS (
       SELECT DISTINCT ON (e, t) e AS email, t AS bounced_at, n
         FROM unnest($2::text[], $3::timestamptz[]) WITH ORDINALITY AS u(e, t, n)
        ORDER BY e, t, n
     ), ins AS (
       INSERT INTO hard_bounces (workspace_id, email, bounced_at)
       SELECT $1, i.email, i.bounced_at FROM input i
        WHERE NOT EXISTS (SELECT 1 FROM hard_bounces h
                           WHERE h.workspace_id = $1 AND lower(h.email) = i.email AND (h.bounced_at = i.bounced_at OR $4))
        ORDER BY i.n
       RETURNING 1
     )
     SELECT count(*)::int AS n FROM ins`,
    // A blocklisted address already on the list stays there once (a bounce is a dated fact; a blocklisting of a listed
    // address adds none).
    [workspaceId, emails, times, source === 'blocklist'],
  );
  const latest = `SELECT e AS email, max(t) AS at FROM unnest($2::text[], $3::timestamptz[]) AS u(e, t) GROUP BY e`;
  await client.query(
    `INSERT INTO email_subscriptions (workspace_id, email, state, updated_at)
     SELECT $1, l.email, 'unsubscribed', l.at FROM (${latest}) l
     ON CONFLICT (workspace_id, email) DO UPDATE SET state = 'unsubscribed', updated_at = EXCLUDED.updated_at
      WHERE email_subscriptions.updated_at <= EXCLUDED.updated_at
        AND NOT (email_subscriptions.state = 'unsubscribed' AND email_subscriptions.updated_at = EXCLUDED.updated_at)`,
    [workspaceId, emails, times],
  );
  await unsubscribeBounced(client, workspaceId, emails, times, source);
  const recorded = inserted.rows[0]!.n;
  return { recorded, duplicates: records.length - recorded };
}

export interface HardBounce {
  email: string;
  /** When the address hard bounced (and so was unsubscribed). */
  unsubscribed_at: string;
}

/** Hard-bounced addresses, newest first (address-list.ts: the order that offset paging needs). */
export async function listHardBounces(
  pool: Pool,
  workspaceId: string,
  query: ListPage & { email?: string },
): Promise<HardBounce[]> {
  const rows = await listAddressEntries(pool, 'hard_bounces', workspaceId, query);
  return rows.map((r) => ({ email: r.email, unsubscribed_at: r.at.toISOString() }));
}
