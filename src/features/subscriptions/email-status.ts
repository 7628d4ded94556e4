import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { lockWorkspaceProfiles } from '../../profiles/write/locks.js';
import { setEmailSubscribe } from '../../profiles/states.js';

export const SUBSCRIPTION_STATES = ['opted_in', 'unsubscribed', 'subscribed'] as const;
export type SubscriptionState = (typeof SUBSCRIPTION_STATES)[number];
export const MAX_EMAILS_PER_REQUEST = 50;

const EmailAddress = z
  .string({ error: 'email must be a string or an array of strings' })
  .trim()
  .min(1, 'email must not be empty')
  .max(255, 'an email address may be at most 255 characters')
  .regex(/^[^\s@]+@[^\s@]+$/, 'email must be an email address');

/** `email` of the email endpoints that take addresses: one address, or an array of 1 to 50. */
export const EmailAddresses = z.union(
  [
    EmailAddress,
    z
      .array(EmailAddress)
      .min(1, 'email must name at least one address')
      .max(MAX_EMAILS_PER_REQUEST, `email may list at most ${MAX_EMAILS_PER_REQUEST} addresses`),
  ],
  {
    error: `email is required: a string or an array of at most ${MAX_EMAILS_PER_REQUEST} strings`,
  },
);

/** The addresses of an `email` value, lower-cased (addresses are stored so), each once. */
export const addressesOf = (email: string | string[]): string[] => [
  ...new Set((Array.isArray(email) ? email : [email]).map((e) => e.toLowerCase())),
];

/** The body of POST /email/status. */
export const EmailStatusBody = z.object({
  email: EmailAddresses,
  subscription_state: z.enum(SUBSCRIPTION_STATES, {
    error: 'subscription_state is required: one of opted_in, unsubscribed, subscribed',
  }),
});
export type EmailStatusBody = z.infer<typeof EmailStatusBody>;

/**
 * Sets the email subscription state of every user with one of the addresses, and stores it per address: an address no
 * user has yet gets the state when ingestion ties it to a user (src/pipelines/ingest/apply.ts). The state's time goes
 * into attribute_times, so an attributes object accepted earlier but applied later does not undo it.
 */
export async function setEmailStatus(
  pool: Pool,
  workspaceId: string,
  emails: string[],
  state: SubscriptionState,
): Promise<{ profilesUpdated: number }> {
  return withTransaction(pool, async (client) => {
    // Ingestion batches update many profiles; sharing their lock keeps this from deadlocking with one.
    await lockWorkspaceProfiles(client, [workspaceId]);
    return setEmailStatusIn(client, workspaceId, emails, state);
  });
}

/** setEmailStatus's writes, in the caller's transaction, which holds the workspace's profiles lock. */
export async function setEmailStatusIn(
  client: PoolClient,
  workspaceId: string,
  emails: string[],
  state: SubscriptionState,
): Promise<{ profilesUpdated: number }> {
  const addresses = [...new Set(emails.map((e) => e.toLowerCase()))];
  const at = new Date().toISOString();
  await client.query(
    `INSERT INTO email_subscriptions (workspace_id, email, state, updated_at)
     SELECT $1, e, $3, now() FROM unnest($2::text[]) AS e
     ON CONFLICT (workspace_id, email) DO UPDATE SET state = EXCLUDED.state, updated_at = EXCLUDED.updated_at`,
    [workspaceId, addresses, state],
  );
  return { profilesUpdated: await setEmailSubscribe(client, workspaceId, addresses, state, at) };
}
