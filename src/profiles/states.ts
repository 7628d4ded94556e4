import type { PoolClient } from '../platform/db/pool.js';
import type { StateChangeSource } from './event-log-types.js';

/**
 * The states written onto profiles from outside ingestion: the email subscription state, by POST /email/status (every
 * profile with one of the addresses) and hard bounces (every profile with a bounced address); and the uninstall time,
 * by uninstall records. The state's time goes into
 * attribute_times, so that an attributes object accepted earlier but applied later does not undo it (last write wins,
 * as in src/profiles/tracked-objects.ts). A profile whose email subscription state these change gets a
 * users.behaviors.subscription.GlobalStateChange in the event log, written by the statement that changes it.
 */

/**
 * `update`, an UPDATE of profiles joined to `was` (the rows it may write, locked: `lockedStates`) that returns
 * `workspace_id`, `id`, `service_id`, `external_id`, `email`, `email_subscribe`, `was` (the state before) and `at` (the
 * change's time), with the rows whose state it changed logged in the same statement; answers the number written.
 * Fresh ids: neither an /email/status call nor a bounce has an identity of its own, and a repeat of either changes no
 * state, so only this transaction can log its change.
 */
const withStateChangesLogged = (update: string, source: StateChangeSource) => `WITH changed AS (${update}),
  states AS (
    INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, data)
    SELECT c.workspace_id, gen_random_uuid(), 'users.behaviors.subscription.GlobalStateChange',
           c.at, c.id, c.service_id, c.external_id,
           jsonb_build_object('subscription_status', c.email_subscribe, 'channel', 'email', 'email_address', c.email,
                              'state_change_source', '${source}')
      FROM changed c WHERE c.email_subscribe IS DISTINCT FROM c.was)
  SELECT count(*)::int AS n FROM changed`;

/**
 * The state of the workspace's profiles with one of the (lower-cased) addresses in $2, read from the row version the
 * UPDATE then rewrites (locked, so that the state before is the one it replaces), as `was`.
 */
const lockedStates = `(SELECT id, email_subscribe FROM profiles WHERE workspace_id = $1 AND email IS NOT NULL AND lower(email) = ANY($2::text[])
    ORDER BY id FOR UPDATE) AS was`;

/** Sets `state` on every profile of the workspace with one of the (lower-cased) addresses; returns how many. */
export async function setEmailSubscribe(
  client: PoolClient,
  workspaceId: string,
  addresses: string[],
  state: string,
  at: string,
): Promise<number> {
  const updated = await client.query<{ n: number }>(
    withStateChangesLogged(
      `UPDATE profiles p SET email_subscribe = $3, attribute_times = p.attribute_times || jsonb_build_object('email_subscribe', $4::text), updated_at = now()
         FROM ${lockedStates}
        WHERE p.id = was.id
       RETURNING p.workspace_id, p.id, p.service_id, p.external_id, p.email, p.email_subscribe, was.email_subscribe AS was, $4::text::timestamptz AS at`,
      'email_status',
    ),
    [workspaceId, addresses, state, at],
  );
  return updated.rows[0]!.n;
}

/**
 * Unsubscribes the profiles of bounced (lower-cased) addresses as of each address's latest bounce time, unless a later
 * subscription change is stored; a repeat of a bounce already applied writes nothing. `source` says what bounced them:
 * a bounce reported by the sender, or a blocklist call, which marks the addresses hard bounced.
 */
export async function unsubscribeBounced(
  client: PoolClient,
  workspaceId: string,
  emails: string[],
  times: Date[],
  source: Extract<StateChangeSource, 'bounce' | 'blocklist'> = 'bounce',
): Promise<void> {
  // attribute_times holds last-write times as 'YYYY-MM-DDTHH:MM:SS.mmmZ' strings, which compare correctly as text.
  await client.query(
    withStateChangesLogged(
      `UPDATE profiles p
          SET email_subscribe = 'unsubscribed',
              attribute_times = p.attribute_times || jsonb_build_object('email_subscribe', l.iso),
              updated_at = now()
         FROM (SELECT email, at, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS iso
                 FROM (SELECT e AS email, max(t) AS at FROM unnest($2::text[], $3::timestamptz[]) AS u(e, t) GROUP BY e) x) l,
              ${lockedStates}
        WHERE p.id = was.id AND lower(p.email) = l.email
          AND (p.attribute_times->>'email_subscribe' IS NULL OR p.attribute_times->>'email_subscribe' <= l.iso)
          -- A repeat of a bounce already applied writes nothing (a workspace file applied again changes no row).
          AND NOT (p.email_subscribe = 'unsubscribed' AND p.attribute_times->>'email_subscribe' = l.iso)
       RETURNING p.workspace_id, p.id, p.service_id, p.external_id, p.email, p.email_subscribe, was.email_subscribe AS was, l.at`,
      source,
    ),
    [workspaceId, emails, times],
  );
}

/** Marks profiles uninstalled at the latest of their uninstall times, unless a later one is stored. */
export async function markUninstalled(
  client: PoolClient,
  workspaceId: string,
  profileIds: Array<number | null>,
  times: Date[],
): Promise<void> {
  await client.query(
    `UPDATE profiles p SET uninstalled_at = GREATEST(p.uninstalled_at, x.at), updated_at = now()
       FROM (SELECT profile_id, max(occurred_at) AS at FROM unnest($2::bigint[], $3::timestamptz[]) AS i(profile_id, occurred_at)
              WHERE profile_id IS NOT NULL GROUP BY profile_id) x
      WHERE p.id = x.profile_id AND p.workspace_id = $1 AND (p.uninstalled_at IS NULL OR p.uninstalled_at < x.at)`,
    [workspaceId, profileIds, times],
  );
}
