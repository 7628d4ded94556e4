import { z } from 'zod';
import { badRequest } from '../errors.js';
import { withTransaction, type Pool } from '../db/pool.js';
import { lockWorkspaces } from '../ingest/apply-transaction.js';

export const MAX_ALIAS_UPDATES = 50;

const AliasPart = (field: string) =>
  z.string({ error: `'${field}' is required and must be a string` }).min(1, `'${field}' must not be empty`).max(512, `'${field}' may be at most 512 characters`);

/** One entry of `alias_updates`. */
export const AliasUpdate = z
  .object({ alias_label: AliasPart('alias_label'), old_alias_name: AliasPart('old_alias_name'), new_alias_name: AliasPart('new_alias_name') })
  .strict();
export type AliasUpdate = z.infer<typeof AliasUpdate>;

export interface AliasUpdateError {
  type: string;
  input_array: 'alias_updates';
  index: number;
}

export interface AliasUpdateResult {
  aliasesProcessed: number;
  renamed: number;
  errors: AliasUpdateError[];
}

/** Validates each raw entry on its own: the valid ones are applied, the others reported by index. */
export function parseAliasUpdates(raw: unknown[]): { updates: { index: number; update: AliasUpdate }[]; errors: AliasUpdateError[] } {
  const updates: { index: number; update: AliasUpdate }[] = [];
  const errors: AliasUpdateError[] = [];
  raw.forEach((entry, index) => {
    const r = AliasUpdate.safeParse(entry);
    if (r.success) updates.push({ index, update: r.data });
    else {
      const issue = r.error.issues[0];
      const type =
        typeof entry !== 'object' || entry === null || Array.isArray(entry)
          ? 'each alias update must be an object {alias_label, old_alias_name, new_alias_name}'
          : issue?.code === 'unrecognized_keys'
            ? `${issue.keys.map((k) => `'${k}'`).join(', ')} is not a field of an alias update`
            : (issue?.message ?? 'invalid alias update');
      errors.push({ type, input_array: 'alias_updates', index });
    }
  });
  return { updates, errors };
}

const key = (label: string, name: string) => `${label}\u0000${name}`;

/**
 * Renames aliases in request order: when (label, old name) exists its name becomes the new name, else nothing
 * happens. A rename onto a (label, name) another user holds is refused for that entry. The lookup table and each
 * profile's user_aliases change together, in one transaction and a fixed number of statements.
 */
export async function updateAliases(pool: Pool, workspaceId: string, updates: { index: number; update: AliasUpdate }[]): Promise<AliasUpdateResult> {
  const result: AliasUpdateResult = { aliasesProcessed: 0, renamed: 0, errors: [] };
  if (updates.length === 0) return result;
  return withTransaction(pool, async (client) => {
    await lockWorkspaces(client, [workspaceId]);
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
        result.errors.push({ type: `alias '${u.new_alias_name}' with label '${u.alias_label}' already belongs to another user`, input_array: 'alias_updates', index });
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
    const affected = [...new Set([...removed.map((k) => before.get(k)!), ...added.map(([, p]) => p)])];
    await client.query(
      `UPDATE profiles p SET updated_at = now(), user_aliases = coalesce(
         (SELECT jsonb_agg(jsonb_build_object('alias_name', a.alias_name, 'alias_label', a.alias_label) ORDER BY a.alias_label, a.alias_name)
            FROM profile_aliases a WHERE a.profile_id = p.id), '[]'::jsonb)
        WHERE p.id = ANY($1::bigint[])`,
      [affected],
    );
    return result;
  });
}

/**
 * An /users/alias/update request: every entry validated on its own, the valid ones applied, and every refused entry
 * (invalid, or a rename onto an alias another user holds) reported by index in request order. With no valid entry,
 * nothing is applied and the request is refused as a whole.
 */
export async function acceptAliasUpdates(pool: Pool, workspaceId: string, raw: unknown[]): Promise<{ aliasesProcessed: number; errors: AliasUpdateError[] }> {
  const { updates, errors } = parseAliasUpdates(raw);
  if (updates.length === 0) throw badRequest(`No valid alias update: ${errors.slice(0, 5).map((e) => `alias_updates[${e.index}]: ${e.type}`).join('; ')}`);
  const result = await updateAliases(pool, workspaceId, updates);
  return { aliasesProcessed: result.aliasesProcessed, errors: [...errors, ...result.errors].sort((a, b) => a.index - b.index) };
}
