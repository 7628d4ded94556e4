import type { Pool, PoolClient } from '../../platform/db/pool.js';
import { withTransaction } from '../../platform/db/pool.js';
import { lockWorkspaceProfiles } from '../write/locks.js';
import { resolveOne, type UserRef } from '../lookup.js';
import { mergeProfiles, refreshUserAliases } from './merge.js';

/**
 * User aliases: renames (POST /users/alias/update), new aliases and alias-only profiles (POST /users/alias/new), and
 * the identification of alias-only, email-only or phone-only profiles (POST /users/identify). profile_aliases is the
 * lookup table; each profile's user_aliases column mirrors it (`refreshUserAliases`).
 */

/** One entry of /users/alias/update, with its index in the request. */
export interface AliasRename {
  index: number;
  update: { alias_label: string; old_alias_name: string; new_alias_name: string };
}

export interface AliasRenameResult {
  aliasesProcessed: number;
  renamed: number;
  errors: Array<{ type: string; input_array: 'alias_updates'; index: number }>;
}

const key = (label: string, name: string) => `${label}\u0000${name}`;

/**
 * Renames aliases in request order: when (label, old name) exists its name becomes the new name, else nothing
 * happens. A rename onto a (label, name) another user holds is refused for that entry. The lookup table and each
 * profile's user_aliases change together, in one transaction and a fixed number of statements.
 */
export async function renameAliases(
  pool: Pool,
  workspaceId: string,
  updates: AliasRename[],
): Promise<AliasRenameResult> {
  const result: AliasRenameResult = { aliasesProcessed: 0, renamed: 0, errors: [] };
  if (updates.length === 0) return result;
  return withTransaction(pool, async (client) => {
    await lockWorkspaceProfiles(client, [workspaceId]);
    const labels: string[] = [];
    const names: string[] = [];
    for (const { update: u } of updates) {
      labels.push(u.alias_label, u.alias_label);
      names.push(u.old_alias_name, u.new_alias_name);
    }
    const { rows } = await client.query<{ alias_label: string; alias_name: string; profile_id: number }>(
      `SELECT a.alias_label, a.alias_name, a.profile_id
         FROM profile_aliases a JOIN unnest($2::text[], $3::text[]) AS i(label, name) ON a.alias_label = i.label AND a.alias_name = i.name
        WHERE a.workspace_id = $1`,
      [workspaceId, labels, names],
    );
    // Play the renames in memory, in order, so that chains (a -> b, then b -> c) and conflicts resolve as sent.
    const holder = new Map<string, number>(rows.map((r) => [key(r.alias_label, r.alias_name), r.profile_id]));
    const before = new Map(holder);
    for (const { index, update: u } of updates) {
      const from = key(u.alias_label, u.old_alias_name);
      const to = key(u.alias_label, u.new_alias_name);
      const owner = holder.get(from);
      const taken = holder.get(to);
      if (owner !== undefined && from !== to && taken !== undefined && taken !== owner) {
        result.errors.push({
          type: `alias '${u.new_alias_name}' with label '${u.alias_label}' already belongs to another user`,
          input_array: 'alias_updates',
          index,
        });
        continue;
      }
      result.aliasesProcessed++;
      if (owner === undefined || from === to) continue;
      holder.delete(from);
      holder.set(to, owner);
      result.renamed++;
    }
    const removed = [...before.keys()].filter((k) => holder.get(k) !== before.get(k));
    const added = [...holder].filter(([k, owner]) => before.get(k) !== owner);
    if (removed.length === 0 && added.length === 0) return result;
    const split = (k: string) => k.split('\u0000') as [string, string];
    await client.query(
      `DELETE FROM profile_aliases a USING unnest($2::text[], $3::text[]) AS i(label, name)
        WHERE a.workspace_id = $1 AND a.alias_label = i.label AND a.alias_name = i.name`,
      [workspaceId, removed.map((k) => split(k)[0]), removed.map((k) => split(k)[1])],
    );
    await client.query(
      `INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id)
       SELECT $1, i.label, i.name, i.profile_id FROM unnest($2::text[], $3::text[], $4::bigint[]) AS i(label, name, profile_id)`,
      [workspaceId, added.map(([k]) => split(k)[0]), added.map(([k]) => split(k)[1]), added.map(([, p]) => p)],
    );
    // user_aliases mirrors the lookup table: rebuilt for the profiles whose aliases changed.
    await refreshUserAliases(client, [...new Set([...removed.map((k) => before.get(k)!), ...added.map(([, p]) => p)])]);
    return result;
  });
}

/** One entry of /users/alias/new: the alias, and the external_id of the user to add it to (none: a new alias-only user). */
export interface NewAlias {
  externalId?: string;
  label: string;
  name: string;
}

/**
 * Adds aliases, in order, inside the caller's transaction (which holds the workspace's ingestion lock). An alias
 * that exists already, on any user, changes nothing (the public API answers success and adds nothing); so does one
 * for an external_id no user has, or for a user that already has an alias of that label (one name per label).
 * Without an external_id, a new alias-only profile is created. Returns the profiles created.
 */
export async function addAliases(
  client: PoolClient,
  workspaceId: string,
  aliases: NewAlias[],
): Promise<{ added: number; created: number }> {
  const result = { added: 0, created: 0 };
  const touched: number[] = [];
  for (const a of aliases) {
    const exists = await client.query(
      `SELECT 1 FROM profile_aliases WHERE workspace_id = $1 AND alias_label = $2 AND alias_name = $3`,
      [workspaceId, a.label, a.name],
    );
    if (exists.rowCount) continue;
    let profileId: number;
    if (a.externalId !== undefined) {
      const [owner] = await resolveOne(client, workspaceId, [{ kind: 'external_id', value: a.externalId }]);
      if (typeof owner !== 'object') continue;
      const labelTaken = await client.query(
        `SELECT 1 FROM profile_aliases WHERE profile_id = $1 AND alias_label = $2`,
        [owner.id, a.label],
      );
      if (labelTaken.rowCount) continue;
      profileId = owner.id;
    } else {
      profileId = await createAnonymousProfile(client, workspaceId);
      result.created++;
    }
    await client.query(
      `INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id) VALUES ($1, $2, $3, $4)`,
      [workspaceId, a.label, a.name, profileId],
    );
    touched.push(profileId);
    result.added++;
  }
  if (touched.length > 0) await refreshUserAliases(client, [...new Set(touched)]);
  return result;
}

/** A profile with no external_id (alias-only until identified): a random service_id and random_bucket, as ingestion makes them. */
async function createAnonymousProfile(client: PoolClient, workspaceId: string): Promise<number> {
  const { rows } = await client.query<{ id: number }>(
    `INSERT INTO profiles (workspace_id, service_id, random_bucket)
     VALUES ($1, left(replace(gen_random_uuid()::text, '-', ''), 24), floor(random() * 10000)::int) RETURNING id`,
    [workspaceId],
  );
  return rows[0]!.id;
}

/** One identification: the external_id to give, and the alias-only (email-only, phone-only) profile to give it to. */
export interface Identification {
  externalId: string;
  target: Extract<UserRef, { kind: 'user_alias' | 'email' | 'phone' }>;
}

export type IdentifyOutcome =
  'identified' | 'merged' | 'unmatched' | 'already-identified' | 'label-taken' | 'ambiguous';

/**
 * Identifies profiles, in order, inside the caller's transaction (which holds the workspace's ingestion lock), as the
 * public API does: the target must be an unidentified profile (no external_id); when no profile has the external_id,
 * the target takes it; when one does, the target is merged into it (src/profiles/commands/merge.ts) unless that profile
 * already has an alias of the target alias's label, in which case nothing happens.
 */
export async function identifyProfiles(
  client: PoolClient,
  workspaceId: string,
  identifications: Identification[],
): Promise<IdentifyOutcome[]> {
  const outcomes: IdentifyOutcome[] = [];
  for (const { externalId, target } of identifications) {
    const [found, owner] = await resolveOne(client, workspaceId, [target, { kind: 'external_id', value: externalId }]);
    if (found === 'ambiguous') {
      outcomes.push('ambiguous');
      continue;
    }
    if (found === 'missing' || found === undefined) {
      outcomes.push('unmatched');
      continue;
    }
    const current = await client.query<{ external_id: string | null }>(
      `SELECT external_id FROM profiles WHERE id = $1 FOR UPDATE`,
      [found.id],
    );
    if (current.rows[0]?.external_id != null) {
      outcomes.push('already-identified');
      continue;
    }
    if (typeof owner !== 'object') {
      await client.query(`UPDATE profiles SET external_id = $2, updated_at = now() WHERE id = $1`, [
        found.id,
        externalId,
      ]);
      outcomes.push('identified');
      continue;
    }
    if (target.kind === 'user_alias') {
      const labelTaken = await client.query(
        `SELECT 1 FROM profile_aliases WHERE profile_id = $1 AND alias_label = $2`,
        [owner.id, target.label],
      );
      if (labelTaken.rowCount) {
        outcomes.push('label-taken');
        continue;
      }
    }
    await mergeProfiles(client, workspaceId, found.id, owner.id);
    outcomes.push('merged');
  }
  return outcomes;
}
