import { z } from 'zod';
import type { PoolClient, Pool } from '../../platform/db/pool.js';
import { compileFilter, SegmentFilterSchema } from '../../profiles/segments/filter.js';
import { segmentByApiId } from '../../profiles/segments/store.js';

/**
 * Who a scheduled canvas trigger targets:
 * - `recipients` (at most 50, each by external_user_id or user_alias): those users only; with `audience` as well, only
 *   those of them who are in the audience's segment;
 * - no recipients, `audience: {segment_id}`: every member of the segment when the schedule fires;
 * - neither: every user of the workspace (the request must then say `broadcast: true`).
 * Users named as recipients who do not exist are skipped; users are never created by a trigger.
 */

export const MAX_RECIPIENTS = 50;

const UserAlias = z.strictObject(
  {
    alias_name: z
      .string({ error: 'alias_name must be a string' })
      .min(1, 'alias_name must not be empty')
      .max(255, 'alias_name must be at most 255 characters'),
    alias_label: z
      .string({ error: 'alias_label must be a string' })
      .min(1, 'alias_label must not be empty')
      .max(255, 'alias_label must be at most 255 characters'),
  },
  { error: 'user_alias must be an object {alias_name, alias_label}' },
);

/** JSON objects of personalisation data, kept as template data (at most 50 KB each). */
export const Properties = (name: string) =>
  z
    .record(z.string(), z.unknown(), { error: `${name} must be an object` })
    .refine((o) => Buffer.byteLength(JSON.stringify(o)) <= 50 * 1024, `${name} must be at most 50 KB of JSON`);

export const Recipient = z
  .strictObject(
    {
      external_user_id: z
        .string({ error: 'external_user_id must be a string' })
        .min(1, 'external_user_id must not be empty')
        .max(255, 'external_user_id must be at most 255 characters')
        .optional(),
      user_alias: UserAlias.optional(),
      trigger_properties: Properties('trigger_properties').optional(),
      canvas_entry_properties: Properties('canvas_entry_properties').optional(),
      send_to_existing_only: z
        .boolean({ error: 'send_to_existing_only must be true or false' })
        .refine((v) => v, 'send_to_existing_only false is not supported: a trigger never creates users')
        .optional(),
    },
    { error: 'each recipient must be an object' },
  )
  .refine(
    (r) => (r.external_user_id === undefined) !== (r.user_alias === undefined),
    'each recipient needs exactly one of external_user_id or user_alias',
  );
export type Recipient = z.infer<typeof Recipient>;

export const Audience = z.strictObject(
  {
    segment_id: z
      .string({ error: 'audience.segment_id must be a string' })
      .min(1, 'audience.segment_id must not be empty')
      .max(255, 'audience.segment_id must be at most 255 characters'),
  },
  { error: 'audience must be an object {segment_id}' },
);
export type Audience = z.infer<typeof Audience>;

/** A SQL predicate over `profiles p`, its parameters numbered from the caller's offset. */
export interface AudiencePredicate {
  sql: string;
  params: unknown[];
}

/**
 * The audience of a schedule as a predicate (workspace condition included), or a reason it cannot be resolved
 * (a segment deleted or archived since the schedule was made, an audience object this service does not understand).
 */
export async function audiencePredicate(
  db: Pool | PoolClient,
  workspaceId: string,
  recipients: unknown,
  audience: unknown,
  firstParam: number,
): Promise<AudiencePredicate | { unresolved: string }> {
  const params: unknown[] = [workspaceId];
  const p = (v: unknown) => {
    params.push(v);
    return `$${firstParam + params.length - 1}`;
  };
  const parts = [`p.workspace_id = $${firstParam}`];

  if (recipients !== null && recipients !== undefined) {
    // Loose on purpose: rows from the workspace file may carry fields the API refuses (attributes, ...).
    const list = z
      .array(z.looseObject({ external_user_id: z.string().optional(), user_alias: UserAlias.optional() }))
      .safeParse(recipients);
    if (!list.success) return { unresolved: 'recipients are not in a supported form' };
    const externalIds = list.data.flatMap((r) => (r.external_user_id ? [r.external_user_id] : []));
    const aliases = list.data.flatMap((r) => (r.user_alias ? [r.user_alias] : []));
    const ws = `$${firstParam}`;
    parts.push(
      `p.id IN (SELECT id FROM profiles WHERE workspace_id = ${ws} AND external_id = ANY(${p(externalIds)}::text[])
                UNION ALL
                SELECT a.profile_id FROM profile_aliases a
                  JOIN jsonb_to_recordset(${p(JSON.stringify(aliases))}::jsonb) AS r(alias_name text, alias_label text)
                    ON a.alias_name = r.alias_name AND a.alias_label = r.alias_label
                 WHERE a.workspace_id = ${ws})`,
    );
  }

  if (audience !== null && audience !== undefined) {
    const parsed = Audience.safeParse(audience);
    if (!parsed.success)
      return { unresolved: 'the audience is not {segment_id}; other audience objects are not supported' };
    const segment = await segmentByApiId(db, workspaceId, parsed.data.segment_id);
    if (!segment || segment.archived) return { unresolved: `segment ${parsed.data.segment_id} no longer exists` };
    const filter = SegmentFilterSchema.safeParse(segment.filter);
    if (!filter.success) return { unresolved: `segment ${parsed.data.segment_id} has an invalid filter` };
    const compiled = compileFilter(filter.data, firstParam + params.length);
    params.push(...compiled.params);
    parts.push(`COALESCE(${compiled.sql}, FALSE)`);
  }

  return { sql: parts.join(' AND '), params };
}
