import { logEvents } from '../event-log.js';
import type { PoolClient } from '../../platform/db/pool.js';
import {
  eraseConsent,
  eraseLiveActivityTokens,
  eraseScheduledRecipients,
  forgetIdempotencyAnswers,
  keepUnsubscribes,
  unlinkUninstalls,
} from './erase-copies.js';
import { eraseCdiRejects } from './erase-cdi-rejects.js';
import { scrubDeadLetters } from './erase-dead-letters.js';
import { eraseLoggedEvents, loggedPlacesOf, type LoggedPlaces } from './erase-logged-events.js';
import type { ErasedIdentifier, IdentifierKind } from './erased-identifiers.js';

/**
 * Deleting profiles: the row (its aliases and deprecated external ids go with it, by cascade), leaving the tombstone
 * an incremental export reads (migration 0170's trigger: service_id and external_id only), and, for an erasure
 * (POST /users/delete, GDPR article 17), every other copy this service keeps of what identified the user: objects in
 * dead letters, answers in the idempotency cache, live activity tokens, subscription consent per address, the link
 * of uninstall events. The user is also who was merged into the profile (profile_merged_identifiers, migration
 * 0290): their identifiers name the person up to the merge. What is kept on purpose, and why, is in docs/privacy.md:
 * an address's unsubscribe and hard bounce stay (suppression lists), and exports already delivered are the customer's.
 */

/** The identifiers of `profileIds` and of the profiles merged into them, read before their rows go. */
async function identifiersOf(client: PoolClient, profileIds: number[]): Promise<ErasedIdentifier[]> {
  const { rows } = await client.query<{
    kind: IdentifierKind;
    value: string;
    label: string | null;
    until: string;
    until_ms: string | null;
  }>(
    `SELECT i.kind, i.value, i.label, max(i.until)::text AS until,
            CASE WHEN max(i.until) = 'infinity' THEN NULL ELSE extract(epoch FROM max(i.until)) * 1000 END AS until_ms
       FROM (SELECT 'external_id' AS kind, p.external_id AS value, NULL::text AS label, 'infinity'::timestamptz AS until
               FROM profiles p WHERE p.id = ANY($1::bigint[]) AND p.external_id IS NOT NULL
             UNION ALL SELECT 'external_id', x.external_id, NULL, 'infinity' FROM profile_external_ids x WHERE x.profile_id = ANY($1::bigint[])
             UNION ALL SELECT 'service_id', p.service_id, NULL, 'infinity' FROM profiles p WHERE p.id = ANY($1::bigint[])
             UNION ALL SELECT 'email', lower(p.email), NULL, 'infinity' FROM profiles p WHERE p.id = ANY($1::bigint[]) AND p.email IS NOT NULL
             UNION ALL SELECT 'phone', p.phone, NULL, 'infinity' FROM profiles p WHERE p.id = ANY($1::bigint[]) AND p.phone IS NOT NULL
             UNION ALL SELECT 'user_alias', a.alias_name, a.alias_label, 'infinity' FROM profile_aliases a WHERE a.profile_id = ANY($1::bigint[])
             UNION ALL SELECT m.kind, m.value, m.alias_label, m.merged_at FROM profile_merged_identifiers m WHERE m.profile_id = ANY($1::bigint[])) AS i
      GROUP BY i.kind, i.value, i.label
      ORDER BY i.kind, i.value, i.label`,
    [profileIds],
  );
  return rows.map((r) => ({
    kind: r.kind,
    value: r.value,
    label: r.label,
    until: r.until,
    untilMs: r.until_ms === null ? Infinity : Number(r.until_ms),
  }));
}

/**
 * Deletes profiles inside the caller's transaction (which holds the workspace's ingestion lock), an unsubscribe on one
 * of them kept for its address (a suppression list, docs/privacy.md). Returns how many rows went. With `erase`, the
 * copies above go in the same transaction, so an erasure is whole or not at all.
 */
export async function deleteProfiles(
  client: PoolClient,
  workspaceId: string,
  profileIds: number[],
  options: { erase: boolean },
): Promise<number> {
  if (profileIds.length === 0) return 0;
  const identifiers = options.erase ? await identifiersOf(client, profileIds) : null;
  const logged = options.erase ? await loggedPlacesOf(client, profileIds) : null;
  await keepUnsubscribes(client, workspaceId, profileIds);
  if (options.erase) await logDeletions(client, workspaceId, profileIds);
  const deleted = await client.query(`DELETE FROM profiles WHERE workspace_id = $1 AND id = ANY($2::bigint[])`, [
    workspaceId,
    profileIds,
  ]);
  if (identifiers && logged) await eraseCopies(client, workspaceId, profileIds, identifiers, logged);
  return deleted.rowCount ?? 0;
}

/** The copies of an erased user's data outside their profile row, in the order docs/privacy.md lists them. */
async function eraseCopies(
  client: PoolClient,
  workspaceId: string,
  profileIds: number[],
  ids: ErasedIdentifier[],
  logged: LoggedPlaces,
): Promise<void> {
  await eraseLoggedEvents(client, workspaceId, logged);
  await scrubDeadLetters(client, workspaceId, ids);
  await forgetIdempotencyAnswers(client, workspaceId, ids);
  await eraseLiveActivityTokens(client, workspaceId, ids);
  await eraseConsent(client, workspaceId, ids);
  await unlinkUninstalls(client, workspaceId, profileIds);
  await eraseScheduledRecipients(client, workspaceId, ids);
  await eraseCdiRejects(client, workspaceId, ids);
}

/**
 * A `users.Deleted` event per erased profile, naming it by the identifiers it had (read before the row goes); and,
 * where the workspace exports events, an `event_erasures` record of the hours before the log's first day that may hold
 * their events in delivered files (`ces events erasure-report` lists them for the operator).
 */
async function logDeletions(client: PoolClient, workspaceId: string, profileIds: number[]): Promise<void> {
  const { rows } = await client.query<{ service_id: string; external_id: string | null }>(
    `SELECT service_id, external_id FROM profiles WHERE workspace_id = $1 AND id = ANY($2::bigint[]) ORDER BY id`,
    [workspaceId, profileIds],
  );
  const now = new Date().toISOString();
  await logEvents(
    client,
    rows.map((r) => ({
      type: 'users.Deleted' as const,
      workspaceId,
      key: null,
      profileId: null,
      userId: r.service_id,
      externalUserId: r.external_id,
      time: now,
    })),
  );
  await client.query(
    `WITH log_start AS (SELECT event_log_start() AS at)
     INSERT INTO event_erasures (workspace_id, user_id, external_user_id, since, until)
     SELECT p.workspace_id, p.service_id, p.external_id, p.created_at, s.at
       FROM profiles p, log_start s
      WHERE p.workspace_id = $1 AND p.id = ANY($2::bigint[]) AND p.created_at < s.at
        AND EXISTS (SELECT 1 FROM event_exports e WHERE e.workspace_id = $1)`,
    [workspaceId, profileIds],
  );
}
