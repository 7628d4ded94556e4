import type { PoolClient } from '../db/pool.js';

/**
 * Deleting profiles: the row (its aliases and deprecated external ids go with it, by cascade), leaving the tombstone
 * an incremental export reads (migration 0170's trigger: service_id and external_id only), and, for an erasure
 * (POST /users/delete, GDPR article 17), every other copy this service keeps of what identified the user: objects in
 * dead letters, answers in the idempotency cache, live activity tokens, subscription consent per address, the link
 * of uninstall events. What is kept on purpose, and why, is in docs/privacy.md: an address's unsubscribe and hard
 * bounce stay (suppression lists), and exports already delivered are the customer's.
 */

/** What named an erased user: every value of theirs that another table may repeat. */
export interface ErasedIdentifiers {
  externalIds: string[];
  serviceIds: string[];
  aliases: Array<{ label: string; name: string }>;
  /** Lower-cased. */
  emails: string[];
  phones: string[];
}

/** The identifiers of `profileIds`, read before their rows go. */
async function identifiersOf(client: PoolClient, profileIds: number[]): Promise<ErasedIdentifiers> {
  const { rows } = await client.query<{
    external_ids: string[];
    service_ids: string[];
    emails: string[];
    phones: string[];
    labels: string[];
    names: string[];
  }>(
    `SELECT coalesce(array_agg(DISTINCT e.v) FILTER (WHERE e.v IS NOT NULL), '{}') AS external_ids,
            (SELECT array_agg(p.service_id) FROM profiles p WHERE p.id = ANY($1::bigint[])) AS service_ids,
            (SELECT coalesce(array_agg(DISTINCT lower(p.email)) FILTER (WHERE p.email IS NOT NULL), '{}') FROM profiles p WHERE p.id = ANY($1::bigint[])) AS emails,
            (SELECT coalesce(array_agg(DISTINCT p.phone) FILTER (WHERE p.phone IS NOT NULL), '{}') FROM profiles p WHERE p.id = ANY($1::bigint[])) AS phones,
            (SELECT coalesce(array_agg(a.alias_label ORDER BY a.alias_label, a.alias_name), '{}') FROM profile_aliases a WHERE a.profile_id = ANY($1::bigint[])) AS labels,
            (SELECT coalesce(array_agg(a.alias_name ORDER BY a.alias_label, a.alias_name), '{}') FROM profile_aliases a WHERE a.profile_id = ANY($1::bigint[])) AS names
       FROM (SELECT p.external_id AS v FROM profiles p WHERE p.id = ANY($1::bigint[])
             UNION ALL SELECT x.external_id FROM profile_external_ids x WHERE x.profile_id = ANY($1::bigint[])) AS e`,
    [profileIds],
  );
  const r = rows[0]!;
  return {
    externalIds: r.external_ids,
    serviceIds: r.service_ids ?? [],
    emails: r.emails,
    phones: r.phones,
    aliases: r.labels.map((label, i) => ({ label, name: r.names[i]! })),
  };
}

/** Every value of the identifiers, as strings another table may hold. */
function valuesOf(ids: ErasedIdentifiers): string[] {
  return [
    ...new Set([
      ...ids.externalIds,
      ...ids.serviceIds,
      ...ids.emails,
      ...ids.phones,
      ...ids.aliases.map((a) => a.name),
    ]),
  ];
}

/**
 * Deletes profiles inside the caller's transaction (which holds the workspace's ingestion lock). Returns how many
 * rows went. With `erase`, the copies above go in the same transaction, so an erasure is whole or not at all.
 */
export async function deleteProfiles(
  client: PoolClient,
  workspaceId: string,
  profileIds: number[],
  options: { erase: boolean },
): Promise<number> {
  if (profileIds.length === 0) return 0;
  const identifiers = options.erase ? await identifiersOf(client, profileIds) : null;
  const deleted = await client.query(`DELETE FROM profiles WHERE workspace_id = $1 AND id = ANY($2::bigint[])`, [
    workspaceId,
    profileIds,
  ]);
  if (identifiers) await eraseCopies(client, workspaceId, profileIds, identifiers);
  return deleted.rowCount ?? 0;
}

/** The copies of an erased user's data outside their profile row. */
async function eraseCopies(
  client: PoolClient,
  workspaceId: string,
  profileIds: number[],
  ids: ErasedIdentifiers,
): Promise<void> {
  const values = valuesOf(ids);
  await scrubDeadLetters(client, workspaceId, ids, values);
  // Answers replayed for an Idempotency-Key may repeat an identifier (a rename's external_ids): those keys are forgotten.
  await client.query(
    `DELETE FROM idempotency_keys k
      WHERE k.workspace_id = $1 AND k.response IS NOT NULL
        AND EXISTS (SELECT 1 FROM unnest($2::text[]) AS v WHERE jsonb_path_exists(k.response, '$.** ? (@ == $v)', jsonb_build_object('v', v)))`,
    [workspaceId, values],
  );
  await client.query(
    `DELETE FROM live_activity_tokens t USING live_activities l, apps a
      WHERE t.live_activity_id = l.id AND l.app_id = a.id AND a.workspace_id = $1 AND t.external_id = ANY($2::text[])`,
    [workspaceId, ids.externalIds],
  );
  // Consent given per address goes; an unsubscribe stays, as a suppression list must (docs/privacy.md).
  await client.query(
    `DELETE FROM email_subscriptions WHERE workspace_id = $1 AND email = ANY($2::text[]) AND state <> 'unsubscribed'`,
    [workspaceId, ids.emails],
  );
  // The uninstall counts stay (KPI series); what tied them to the person does not.
  await client.query(
    `UPDATE uninstall_events SET profile_id = NULL WHERE workspace_id = $1 AND profile_id = ANY($2::bigint[])`,
    [workspaceId, profileIds],
  );
}

interface StagedIdentity {
  type?: string;
  value?: string;
  label?: string;
  name?: string;
}

/** Whether a staged object's identity is one of the erased user's. */
function namesErased(identity: StagedIdentity | undefined, ids: ErasedIdentifiers, emails: Set<string>): boolean {
  if (!identity) return false;
  switch (identity.type) {
    case 'external_id':
      return ids.externalIds.includes(identity.value ?? '');
    case 'service_id':
      return ids.serviceIds.includes(identity.value ?? '');
    case 'email':
      return emails.has((identity.value ?? '').toLowerCase());
    case 'user_alias':
      return ids.aliases.some((a) => a.label === identity.label && a.name === identity.name);
    default:
      return false;
  }
}

/**
 * Dead letters hold refused objects of many users: the erased user's objects are taken out of each payload (a row
 * left empty goes), and a PostgreSQL message that may quote one of their values is replaced. A command row (a
 * user-data command that failed) naming one of their values goes whole: its commands are about them.
 */
async function scrubDeadLetters(
  client: PoolClient,
  workspaceId: string,
  ids: ErasedIdentifiers,
  values: string[],
): Promise<void> {
  if (values.length === 0) return;
  // Only rows whose text holds one of the values, as JSON writes it, can hold their objects.
  const patterns = values.map(
    (v) =>
      `%${JSON.stringify(v)
        .slice(1, -1)
        .replace(/[\\%_]/g, (c) => `\\${c}`)}%`,
  );
  const { rows } = await client.query<{ id: number; payload: string; error_message: string }>(
    `SELECT id, payload, error_message FROM ingest_dead_letters
      WHERE workspace_id = $1 AND (payload ILIKE ANY($2::text[]) OR error_message ILIKE ANY($2::text[]))
      FOR UPDATE`,
    [workspaceId, patterns],
  );
  const emails = new Set(ids.emails);
  const lowered = values.map((v) => v.toLowerCase());
  for (const row of rows) {
    let payload: Record<string, unknown> | null = null;
    try {
      payload = JSON.parse(row.payload) as Record<string, unknown>;
    } catch {
      payload = null;
    }
    const quotes = (text: string) => lowered.some((v) => text.toLowerCase().includes(v));
    if (payload === null || Array.isArray(payload.commands)) {
      // Not a payload of objects (unreadable, or commands): it goes whole once it quotes one of their values.
      if (quotes(row.payload)) await client.query(`DELETE FROM ingest_dead_letters WHERE id = $1`, [row.id]);
      continue;
    }
    let left = 0;
    for (const kind of ['events', 'purchases', 'attributes'] as const) {
      const list = Array.isArray(payload[kind]) ? (payload[kind] as Array<{ identity?: StagedIdentity }>) : [];
      payload[kind] = list.filter((o) => !namesErased(o.identity, ids, emails));
      left += (payload[kind] as unknown[]).length;
    }
    if (left === 0) {
      await client.query(`DELETE FROM ingest_dead_letters WHERE id = $1`, [row.id]);
      continue;
    }
    const message = quotes(row.error_message)
      ? 'message removed: it quoted data of a user erased since (docs/privacy.md)'
      : row.error_message;
    await client.query(`UPDATE ingest_dead_letters SET payload = $2, objects = $3, error_message = $4 WHERE id = $1`, [
      row.id,
      JSON.stringify(payload),
      left,
      message,
    ]);
  }
}
