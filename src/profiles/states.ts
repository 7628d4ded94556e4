import type { PoolClient } from '../platform/db/pool.js';

/**
 * The states written onto profiles from outside ingestion: the email subscription state, by POST /email/status (every
 * profile with one of the addresses) and hard bounces (every profile with a bounced address); and the uninstall time,
 * by uninstall records. The state's time goes into
 * attribute_times, so that an attributes object accepted earlier but applied later does not undo it (last write wins,
 * as in src/profiles/tracked-objects.ts).
 */

/** Sets `state` on every profile of the workspace with one of the (lower-cased) addresses; returns how many. */
export async function setEmailSubscribe(
  client: PoolClient,
  workspaceId: string,
  addresses: string[],
  state: string,
  at: string,
): Promise<number> {
  const updated = await client.query(
    `UPDATE profiles SET email_subscribe = $3, attribute_times = attribute_times || jsonb_build_object('email_subscribe', $4::text), updated_at = now()
      WHERE workspace_id = $1 AND lower(email) = ANY($2::text[])`,
    [workspaceId, addresses, state, at],
  );
  return updated.rowCount ?? 0;
}

/**
 * Unsubscribes the profiles of bounced (lower-cased) addresses as of each address's latest bounce time, unless a later
 * subscription change is stored; a repeat of a bounce already applied writes nothing.
 */
export async function unsubscribeBounced(
  client: PoolClient,
  workspaceId: string,
  emails: string[],
  times: Date[],
): Promise<void> {
  // attribute_times holds last-write times as 'YYYY-MM-DDTHH:MM:SS.mmmZ' strings, which compare correctly as text.
  await client.query(
    `UPDATE profiles p
        SET email_subscribe = 'unsubscribed',
            attribute_times = p.attribute_times || jsonb_build_object('email_subscribe', l.iso),
            updated_at = now()
       FROM (SELECT email, to_char(at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"') AS iso
               FROM (SELECT e AS email, max(t) AS at FROM unnest($2::text[], $3::timestamptz[]) AS u(e, t) GROUP BY e) x) l
      WHERE p.workspace_id = $1 AND p.email IS NOT NULL AND lower(p.email) = l.email
        AND (p.attribute_times->>'email_subscribe' IS NULL OR p.attribute_times->>'email_subscribe' <= l.iso)
        -- A repeat of a bounce already applied writes nothing (a workspace file applied again changes no row).
        AND NOT (p.email_subscribe = 'unsubscribed' AND p.attribute_times->>'email_subscribe' = l.iso)`,
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
