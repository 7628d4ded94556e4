import { logEvents } from '../event-log.js';
import type { PoolClient } from '../../platform/db/pool.js';
import { deleteProfiles } from './erase.js';
import { mergeCounts } from '../tracked-update-sql.js';

/**
 * Merging one profile into another (POST /users/merge, and POST /users/identify of an alias-only, email-only or
 * phone-only profile into an identified one), with the field rules the public API documents for merges:
 * - a field the kept profile lacks takes the merged profile's value; a field both have keeps the kept one's (names,
 *   email, gender, date of birth, phone, time zone, city, country, language, attribution, subscription states);
 * - custom attributes: the kept profile's win, the others are added;
 * - custom events and purchases: counts add, first is the earlier, last the later; total revenue adds;
 * - devices and push tokens: the union (by device_id, by token); apps: the union by name and platform, sessions
 *   added, first_used the earlier, last_used the later;
 * - campaigns and canvases received: the union, the more recent entry of one campaign or canvas winning; cards
 *   clicked: the union;
 * - aliases: the merged profile's move over, except one whose label the kept profile already has (one alias name per
 *   label); created_at is the earlier.
 * The merged profile is then deleted (its tombstone lists it in the next incremental export's removed parts); its
 * primary external_id is freed, as the public API frees it, and its deprecated ones go with it. What named it is
 * recorded against the kept profile (profile_merged_identifiers), for that profile's erasure.
 */

const FILL = [
  'first_name',
  'last_name',
  'email',
  'gender',
  'dob',
  'phone',
  'time_zone',
  'home_city',
  'country',
  'language',
  'attributed_campaign',
  'attributed_source',
  'attributed_adgroup',
  'attributed_ad',
  'last_coordinates',
  'email_subscribe',
  'push_subscribe',
  'push_opted_in_at',
  'uninstalled_at',
] as const;

/** The union of two arrays of objects by a key expression over `e`, `pick` choosing between two entries of one key. */
const unionBy = (keep: string, merge: string, key: string, pick = 'k.e') => `(
  SELECT coalesce(jsonb_agg(CASE WHEN k.e IS NULL THEN m.e WHEN m.e IS NULL THEN k.e ELSE ${pick} END ORDER BY coalesce(k.i, 1000000 + m.i)), '[]'::jsonb)
    FROM (SELECT e, i, ${key} AS key FROM jsonb_array_elements(${keep}) WITH ORDINALITY AS x(e, i)) AS k
    FULL JOIN (SELECT e, i, ${key} AS key FROM jsonb_array_elements(${merge}) WITH ORDINALITY AS y(e, i)) AS m ON k.key = m.key)`;

const MERGE_SQL = `
UPDATE profiles k SET
  ${FILL.map((c) => `${c} = coalesce(k.${c}, m.${c})`).join(',\n  ')},
  custom_attributes = m.custom_attributes || k.custom_attributes,
  custom_events = ${mergeCounts('k.custom_events', 'm.custom_events')},
  purchases = ${mergeCounts('k.purchases', 'm.purchases')},
  total_revenue = CASE WHEN k.total_revenue IS NULL AND m.total_revenue IS NULL THEN NULL ELSE coalesce(k.total_revenue, 0) + coalesce(m.total_revenue, 0) END,
  devices = ${unionBy('k.devices', 'm.devices', "coalesce(e->>'device_id', e::text)")},
  push_tokens = ${unionBy('k.push_tokens', 'm.push_tokens', "coalesce(e->>'token', e::text)")},
  apps = ${unionBy(
    'k.apps',
    'm.apps',
    "(e->>'name') || '/' || coalesce(e->>'platform', '')",
    `k.e || jsonb_strip_nulls(jsonb_build_object(
       'sessions', CASE WHEN k.e ? 'sessions' OR m.e ? 'sessions' THEN coalesce((k.e->>'sessions')::bigint, 0) + coalesce((m.e->>'sessions')::bigint, 0) END,
       'first_used', LEAST(k.e->>'first_used' COLLATE "C", m.e->>'first_used' COLLATE "C"),
       'last_used', GREATEST(k.e->>'last_used' COLLATE "C", m.e->>'last_used' COLLATE "C")))`,
  )},
  campaigns_received = ${unionBy(
    'k.campaigns_received',
    'm.campaigns_received',
    "coalesce(e->>'api_campaign_id', e->>'name')",
    `CASE WHEN coalesce(m.e->>'last_received', '') COLLATE "C" > coalesce(k.e->>'last_received', '') COLLATE "C" THEN m.e ELSE k.e END`,
  )},
  canvases_received = ${unionBy(
    'k.canvases_received',
    'm.canvases_received',
    "coalesce(e->>'api_canvas_id', e->>'name')",
    `CASE WHEN GREATEST(coalesce(m.e->>'last_received_message', ''), coalesce(m.e->>'last_entered', '')) COLLATE "C"
                 > GREATEST(coalesce(k.e->>'last_received_message', ''), coalesce(k.e->>'last_entered', '')) COLLATE "C" THEN m.e ELSE k.e END`,
  )},
  cards_clicked = ${unionBy('k.cards_clicked', 'm.cards_clicked', 'e::text')},
  attribute_times = m.attribute_times || k.attribute_times,
  created_at = LEAST(k.created_at, m.created_at),
  event_log_hours = (SELECT array_agg(DISTINCT h ORDER BY h) FROM unnest(array_cat(k.event_log_hours, m.event_log_hours)) AS h),
  updated_at = now()
FROM profiles m
WHERE k.id = $1 AND m.id = $2 AND k.workspace_id = m.workspace_id`;

/**
 * Merges profile `mergeId` into `keepId` inside the caller's transaction (which holds the workspace's ingestion lock)
 * and deletes the merged one. Returns false, changing nothing, when either is gone or they are the same profile.
 */
export async function mergeProfiles(
  client: PoolClient,
  workspaceId: string,
  mergeId: number,
  keepId: number,
): Promise<boolean> {
  if (mergeId === keepId) return false;
  // Both rows locked in id order, so that two merges of the same pair in opposite directions cannot deadlock.
  const locked = await client.query(
    `SELECT id FROM profiles WHERE workspace_id = $1 AND id = ANY($2::bigint[]) ORDER BY id FOR UPDATE`,
    [workspaceId, [mergeId, keepId]],
  );
  if (locked.rowCount !== 2) return false;
  await client.query(MERGE_SQL, [keepId, mergeId]);
  // Aliases move to the kept profile unless it has one of the same label already.
  await client.query(
    `UPDATE profile_aliases a SET profile_id = $2
      WHERE a.profile_id = $1 AND NOT EXISTS (SELECT 1 FROM profile_aliases b WHERE b.profile_id = $2 AND b.alias_label = a.alias_label)`,
    [mergeId, keepId],
  );
  await refreshUserAliases(client, [keepId]);
  // Subscription group states move to the kept profile in the groups where it has none of its own.
  await client.query(
    `UPDATE subscription_group_states a SET profile_id = $2
      WHERE a.profile_id = $1 AND NOT EXISTS (SELECT 1 FROM subscription_group_states b WHERE b.profile_id = $2 AND b.group_id = a.group_id)`,
    [mergeId, keepId],
  );
  await recordMergedIdentifiers(client, mergeId, keepId);
  await logMerge(client, workspaceId, mergeId, keepId);
  await deleteProfiles(client, workspaceId, [mergeId], { erase: false });
  return true;
}

/**
 * Records against the kept profile what named the merged one (its own identifiers, the aliases that stayed behind,
 * and what earlier merges recorded against it), so that erasing the kept profile erases the copies naming them too
 * (src/profiles/commands/erase.ts). Aliases that moved are the kept profile's own now, and need no record.
 */
async function recordMergedIdentifiers(client: PoolClient, mergeId: number, keepId: number): Promise<void> {
  await client.query(`UPDATE profile_merged_identifiers SET profile_id = $2 WHERE profile_id = $1`, [mergeId, keepId]);
  // The merged user's uninstalls are the kept user's now (an erasure of it unlinks them).
  await client.query(`UPDATE uninstall_events SET profile_id = $2 WHERE profile_id = $1`, [mergeId, keepId]);
  await client.query(
    `INSERT INTO profile_merged_identifiers (profile_id, workspace_id, kind, value, alias_label)
     SELECT $2::bigint, p.workspace_id, i.kind, i.value, NULL::text
       FROM profiles p,
            LATERAL (VALUES ('external_id', p.external_id), ('service_id', p.service_id), ('email', lower(p.email)), ('phone', p.phone)) AS i(kind, value)
      WHERE p.id = $1::bigint AND i.value IS NOT NULL
     UNION ALL
     SELECT $2::bigint, x.workspace_id, 'external_id', x.external_id, NULL FROM profile_external_ids x WHERE x.profile_id = $1
     UNION ALL
     SELECT $2::bigint, a.workspace_id, 'user_alias', a.alias_name, a.alias_label FROM profile_aliases a WHERE a.profile_id = $1`,
    [mergeId, keepId],
  );
}

/**
 * A `users.Merged` event on the kept profile, naming the merged user by the identifiers it had. The merged user's
 * logged events keep its profile id (the log has no index to re-point them by, migration 0460); the kept profile now
 * answers for them (event_log_merged_profiles: an erasure of it takes them too, a series by segment counts them as
 * its), and its `event_log_hours` took the merged one's in MERGE_SQL. Delivered rows keep the ids they were delivered
 * with: the Merged event is what tells a warehouse to fold them.
 */
async function logMerge(client: PoolClient, workspaceId: string, mergeId: number, keepId: number): Promise<void> {
  const { rows } = await client.query<{ service_id: string; external_id: string | null }>(
    `SELECT service_id, external_id FROM profiles WHERE id = $1`,
    [mergeId],
  );
  await client.query(`UPDATE event_log_merged_profiles SET profile_id = $2 WHERE profile_id = $1`, [mergeId, keepId]);
  await client.query(
    `INSERT INTO event_log_merged_profiles (merged_profile_id, profile_id) VALUES ($1, $2)
     ON CONFLICT (merged_profile_id) DO UPDATE SET profile_id = EXCLUDED.profile_id, merged_at = now()`,
    [mergeId, keepId],
  );
  await logEvents(client, [
    {
      type: 'users.Merged',
      workspaceId,
      key: null,
      profileId: keepId,
      time: new Date().toISOString(),
      data: { merged_user_id: rows[0]!.service_id, merged_external_user_id: rows[0]!.external_id },
    },
  ]);
}

/** Rebuilds profiles' user_aliases column from the lookup table it mirrors. */
export async function refreshUserAliases(client: PoolClient, profileIds: number[]): Promise<void> {
  await client.query(
    `UPDATE profiles p SET updated_at = now(), user_aliases = coalesce(
       (SELECT jsonb_agg(jsonb_build_object('alias_name', a.alias_name, 'alias_label', a.alias_label) ORDER BY a.alias_label, a.alias_name)
          FROM profile_aliases a WHERE a.profile_id = p.id), '[]'::jsonb)
      WHERE p.id = ANY($1::bigint[])`,
    [profileIds],
  );
}
