import { z } from 'zod';
import { badRequest } from '../../platform/errors.js';
import type { Pool } from '../../platform/db/pool.js';
import { renameAliases } from '../../profiles/commands/aliases.js';

export const MAX_ALIAS_UPDATES = 50;

const AliasPart = (field: string) =>
  z
    .string({ error: `'${field}' is required and must be a string` })
    .min(1, `'${field}' must not be empty`)
    .max(512, `'${field}' may be at most 512 characters`);

/** One entry of `alias_updates`. */
export const AliasUpdate = z
  .object({
    alias_label: AliasPart('alias_label'),
    old_alias_name: AliasPart('old_alias_name'),
    new_alias_name: AliasPart('new_alias_name'),
  })
  .strict();
export type AliasUpdate = z.infer<typeof AliasUpdate>;

export interface AliasUpdateError {
  type: string;
  input_array: 'alias_updates';
  index: number;
}

/** Validates each raw entry on its own: the valid ones are applied, the others reported by index. */
export function parseAliasUpdates(raw: unknown[]): {
  updates: { index: number; update: AliasUpdate }[];
  errors: AliasUpdateError[];
} {
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

/**
 * An /users/alias/update request: every entry validated on its own, the valid ones applied, and every refused entry
 * (invalid, or a rename onto an alias another user holds) reported by index in request order. With no valid entry,
 * nothing is applied and the request is refused as a whole.
 */
export async function acceptAliasUpdates(
  pool: Pool,
  workspaceId: string,
  raw: unknown[],
): Promise<{ aliasesProcessed: number; errors: AliasUpdateError[] }> {
  const { updates, errors } = parseAliasUpdates(raw);
  if (updates.length === 0)
    throw badRequest(
      `No valid alias update: ${errors
        .slice(0, 5)
        .map((e) => `alias_updates[${e.index}]: ${e.type}`)
        .join('; ')}`,
    );
  const result = await renameAliases(pool, workspaceId, updates);
  return {
    aliasesProcessed: result.aliasesProcessed,
    errors: [...errors, ...result.errors].sort((a, b) => a.index - b.index),
  };
}
