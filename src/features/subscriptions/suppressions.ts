import { z } from 'zod';
import { withTransaction, type Pool } from '../../platform/db/pool.js';
import { EmailAddresses, MAX_EMAILS_PER_REQUEST } from './email-status.js';
import { recordHardBouncesIn } from './hard-bounces.js';
import { E164 } from './invalid-phone-numbers.js';

/**
 * The calls that edit the suppression lists: POST /email/blocklist (and its legacy name /email/blacklist), POST
 * /email/bounce/remove, POST /email/spam/remove (src/features/subscriptions/spam.ts) and POST
 * /sms/invalid_phone_numbers/remove. Each takes at most 50 addresses or numbers and is applied before the answer, so
 * the read endpoints (GET /email/hard_bounces, /email/unsubscribes, /email/spam, /sms/invalid_phone_numbers) show it.
 */

/** `{"email": "a@b.io"}` or `{"email": ["a@b.io", ...]}`: the body of the email list calls. */
export const EmailAddressesBody = z.object({ email: EmailAddresses });

// Braze's own example sends numbers without the `+` of E.164 ("12183095514"); a number of digits alone is read as
// E.164 with its `+` left out, so that example and the clients copied from it work.
const PhoneNumber = z
  .string({ error: 'phone_numbers must be an array of strings' })
  .trim()
  .transform((p) => (/^[1-9]\d{1,14}$/.test(p) ? `+${p}` : p))
  .pipe(z.string().regex(E164, 'phone_numbers must be E.164 numbers such as +12183095514'));

/** The body of POST /sms/invalid_phone_numbers/remove. */
export const PhoneNumbersBody = z.object({
  phone_numbers: z
    .array(PhoneNumber, {
      error: `phone_numbers is required: an array of at most ${MAX_EMAILS_PER_REQUEST} E.164 numbers`,
    })
    .min(1, 'phone_numbers must name at least one number')
    .max(MAX_EMAILS_PER_REQUEST, `phone_numbers may list at most ${MAX_EMAILS_PER_REQUEST} numbers`),
});

/**
 * Blocklists addresses: each is recorded hard bounced now, and unsubscribed, as its stored state and on every profile
 * with it (the hard-bounce writer's rules, logged as GlobalStateChange with source `blocklist`).
 */
export async function blocklistEmails(pool: Pool, workspaceId: string, addresses: string[]): Promise<void> {
  const now = new Date();
  const records = addresses.map((email) => ({ email, time: now }));
  await withTransaction(pool, (client) => recordHardBouncesIn(client, workspaceId, records, now, 'blocklist'));
}

/**
 * Takes (lower-cased) addresses off the hard-bounce list, every bounce recorded for them. Their subscription state is
 * left as it is: an address unsubscribed by its bounce stays unsubscribed until POST /email/status says otherwise.
 */
export async function removeHardBounces(pool: Pool, workspaceId: string, addresses: string[]): Promise<number> {
  const { rowCount } = await pool.query(
    `DELETE FROM hard_bounces WHERE workspace_id = $1 AND lower(email) = ANY($2::text[])`,
    [workspaceId, addresses],
  );
  return rowCount ?? 0;
}

/** Takes E.164 numbers off the invalid list, whatever the reason they were recorded with. */
export async function removeInvalidPhoneNumbers(pool: Pool, workspaceId: string, phones: string[]): Promise<number> {
  const { rowCount } = await pool.query(
    `DELETE FROM invalid_phone_numbers WHERE workspace_id = $1 AND phone = ANY($2::text[])`,
    [workspaceId, [...new Set(phones)]],
  );
  return rowCount ?? 0;
}
