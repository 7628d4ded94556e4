import type { PoolClient } from '../../platform/db/pool.js';
import { boundedValues, identifierColumns, type ErasedIdentifier } from './erased-identifiers.js';

/**
 * The erasure of each copy of a person outside their profile row (src/profiles/commands/erase.ts says which,
 * docs/privacy.md why). Each statement runs in the erasure's transaction, which holds the workspace's whole ingestion
 * lock; each matches the person's identifiers exactly, and a merged-in identifier only on copies written up to its
 * merge.
 */

/**
 * Answers replayed for an Idempotency-Key that repeat an identifier (a rename's external_ids): the keys are forgotten.
 * Found by the hashes of the answers' string values (`names`, migration 0290) in a GIN index, then checked exactly
 * (case aside: a key forgotten too many only runs its retry again).
 */
export async function forgetIdempotencyAnswers(
  client: PoolClient,
  workspaceId: string,
  ids: ErasedIdentifier[],
): Promise<void> {
  await client.query(
    `DELETE FROM idempotency_keys k
      WHERE k.workspace_id = $1 AND k.names <> '{}'
        AND k.names && (SELECT array_agg(identifier_hash(v)) FROM unnest($2::text[]) AS v)
        AND EXISTS (SELECT 1 FROM jsonb_path_query(k.response, 'strict $.** ? (@.type() == "string")') AS s,
                                  unnest($2::text[], $3::timestamptz[]) AS v(value, until)
                     WHERE lower(s #>> '{}') = lower(v.value) AND k.created_at <= v.until)`,
    [workspaceId, ...boundedValues(ids)],
  );
}

/** Live activity push tokens registered with one of the person's external ids. */
export async function eraseLiveActivityTokens(
  client: PoolClient,
  workspaceId: string,
  ids: ErasedIdentifier[],
): Promise<void> {
  await client.query(
    `DELETE FROM live_activity_tokens t USING live_activities l, apps a, unnest($2::text[], $3::timestamptz[]) AS v(value, until)
      WHERE t.live_activity_id = l.id AND l.app_id = a.id AND a.workspace_id = $1 AND t.external_id = v.value AND t.created_at <= v.until`,
    [workspaceId, ...boundedValues(ids, ['external_id'])],
  );
}

/**
 * An unsubscribe set on a profile (email_subscribe in an attributes object) lives on the profile only: kept as its
 * address's suppression, as POST /email/status and a hard bounce store it (email_subscriptions), when the profile
 * goes (a deletion, or a merge into a profile that keeps another address). At the profile's unsubscribe time, so
 * GET /email/unsubscribes lists the address as before; an address state written later than that stands, as the
 * hard-bounce writer has it.
 */
export async function keepUnsubscribes(client: PoolClient, workspaceId: string, profileIds: number[]): Promise<void> {
  await client.query(
    `INSERT INTO email_subscriptions (workspace_id, email, state, updated_at)
     SELECT $1, lower(p.email), 'unsubscribed', max(coalesce((p.attribute_times->>'email_subscribe')::timestamptz, p.updated_at))
       FROM profiles p
      WHERE p.workspace_id = $1 AND p.id = ANY($2::bigint[]) AND p.email_subscribe = 'unsubscribed' AND p.email IS NOT NULL
      GROUP BY lower(p.email)
     ON CONFLICT (workspace_id, email) DO UPDATE SET state = 'unsubscribed', updated_at = EXCLUDED.updated_at
      WHERE email_subscriptions.updated_at <= EXCLUDED.updated_at
        AND NOT (email_subscriptions.state = 'unsubscribed' AND email_subscriptions.updated_at = EXCLUDED.updated_at)`,
    [workspaceId, profileIds],
  );
}

/** Consent given per address goes; an unsubscribe stays, as a suppression list must (docs/privacy.md). */
export async function eraseConsent(client: PoolClient, workspaceId: string, ids: ErasedIdentifier[]): Promise<void> {
  await client.query(
    `DELETE FROM email_subscriptions s USING unnest($2::text[], $3::timestamptz[]) AS v(value, until)
      WHERE s.workspace_id = $1 AND s.email = v.value AND s.updated_at <= v.until AND s.state <> 'unsubscribed'`,
    [workspaceId, ...boundedValues(ids, ['email'])],
  );
}

/** The uninstall counts stay (KPI series); what tied them to the person does not. */
export async function unlinkUninstalls(client: PoolClient, workspaceId: string, profileIds: number[]): Promise<void> {
  await client.query(
    `UPDATE uninstall_events SET profile_id = NULL WHERE workspace_id = $1 AND profile_id = ANY($2::bigint[])`,
    [workspaceId, profileIds],
  );
}

/** Whether recipient `<e>` of schedule `s` is named by identifier `v` (kind, value, label, until). */
const NAMES_RECIPIENT = `s.created_at <= v.until
  AND ((v.kind = 'external_id' AND e->>'external_user_id' = v.value)
       OR (v.kind = 'user_alias' AND e->'user_alias'->>'alias_name' = v.value AND e->'user_alias'->>'alias_label' = v.label))`;

/**
 * Scheduled canvas sends name their recipients (external_user_id or user_alias) with per-recipient
 * trigger_properties and canvas_entry_properties: the person's entries go, from every schedule of the workspace
 * (sent ones too: the row is a copy all the same). A schedule of recipients (not a broadcast) left with none would
 * send to nobody: one still to send is cancelled, so its firings do nothing (src/features/canvases/fire.ts).
 */
export async function eraseScheduledRecipients(
  client: PoolClient,
  workspaceId: string,
  ids: ErasedIdentifier[],
): Promise<void> {
  const named = ids.filter((i) => i.kind === 'external_id' || i.kind === 'user_alias');
  if (named.length === 0) return;
  await client.query(
    `WITH v AS (SELECT * FROM unnest($2::text[], $3::text[], $4::text[], $5::timestamptz[]) AS v(kind, value, label, until)),
          hit AS (
            SELECT s.id,
                   (SELECT coalesce(jsonb_agg(r.e ORDER BY r.i), '[]'::jsonb) FROM jsonb_array_elements(s.recipients) WITH ORDINALITY AS r(e, i)
                     WHERE NOT EXISTS (SELECT 1 FROM v, LATERAL (SELECT r.e) AS x(e) WHERE ${NAMES_RECIPIENT})) AS kept
              FROM canvas_schedules s JOIN canvases c ON c.id = s.canvas_id
             WHERE c.workspace_id = $1 AND jsonb_typeof(s.recipients) = 'array'
               AND EXISTS (SELECT 1 FROM jsonb_array_elements(s.recipients) AS e, v WHERE ${NAMES_RECIPIENT})
               FOR UPDATE OF s)
     UPDATE canvas_schedules s
        SET recipients = hit.kept, updated_at = now(),
            state = CASE WHEN jsonb_array_length(hit.kept) = 0 AND NOT s.broadcast AND s.state IN ('scheduled', 'sending') THEN 'cancelled' ELSE s.state END
       FROM hit WHERE s.id = hit.id`,
    [workspaceId, ...identifierColumns(named)],
  );
}
