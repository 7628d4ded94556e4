import { escapeLiteral } from 'pg';
import { compileFilter, type SegmentFilter } from '../../../profiles/segments/filter.js';
import type { ExportField, ExportSpec } from '../request/request-body.js';

/** Days of custom_events, purchases, campaigns_received and canvases_received an export covers (spec). */
export const EXPORT_WINDOW_DAYS = 90;

// Each field becomes `"name":<json>` text, or NULL when absent (concat_ws then leaves it out). Building the line as
// text is several times faster than jsonb_build_object, which re-encodes every nested value into a new jsonb
// (BENCHMARKS.md).
const key = (name: string) => `'"${name}":'`;
const text = (name: string, expr: string) => `${key(name)} || to_json(${expr})::text`;
const quoted = (name: string, expr: string) => `'"${name}":"' || ${expr} || '"'`;
const jsonb = (name: string, expr: string) => `${key(name)} || (${expr})::text`;
const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
const nonEmpty = (expr: string) => `NULLIF(${expr}, '[]'::jsonb)`;
/**
 * An array of the entries (of an array, `$[*]`, or the values of an object, `$.*`) whose time field is within the
 * window; the stored strings compare as times.
 */
const windowed = (column: string, entries: '$[*]' | '$.*', condition: string, since: string) =>
  nonEmpty(
    `jsonb_path_query_array(${column}, '${entries} ? (${condition})', ${escapeLiteral(JSON.stringify({ since }))}::jsonb)`,
  );

/** `"field":<value>` of one export field over `p`, or NULL when the field is absent (then the line omits it). */
function fieldText(field: ExportField, spec: Pick<ExportSpec, 'customAttributes'>, since: string): string {
  switch (field) {
    case 'created_at':
    case 'push_opted_in_at':
    case 'uninstalled_at':
      return quoted(field, iso(`p.${field}`));
    case 'dob':
      return quoted(field, `to_char(p.dob, 'YYYY-MM-DD')`);
    case 'custom_attributes': {
      if (!spec.customAttributes) return jsonb(field, `NULLIF(p.custom_attributes, '{}'::jsonb)`);
      const names = `ARRAY[${spec.customAttributes.map(escapeLiteral).join(', ')}]::text[]`;
      return jsonb(
        field,
        `SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(p.custom_attributes) e WHERE e.key = ANY(${names})`,
      );
    }
    case 'custom_events':
    case 'purchases':
      // Stored keyed by name (migration 0100), listed in jsonb's key order. first and count stay as stored: they cover
      // all history, as the spec asks.
      return jsonb(field, windowed(`p.${field}`, '$.*', '@.last >= $since', since));
    case 'campaigns_received':
      return jsonb(field, windowed('p.campaigns_received', '$[*]', '@.last_received >= $since', since));
    case 'canvases_received':
      return jsonb(
        field,
        windowed(
          'p.canvases_received',
          '$[*]',
          '@.last_received_message >= $since || @.last_entered >= $since || @.last_exited >= $since',
          since,
        ),
      );
    case 'subscription_groups':
      // As an attributes object sets them, so that a line can be sent back to /users/track; absent when none is set.
      return jsonb(
        field,
        `SELECT jsonb_agg(jsonb_build_object('subscription_group_id', s.group_id, 'subscription_state', s.state) ORDER BY s.group_id)
           FROM subscription_group_states s WHERE s.profile_id = p.id`,
      );
    case 'user_aliases':
    case 'devices':
    case 'push_tokens':
    case 'apps':
    case 'cards_clicked':
      return jsonb(field, nonEmpty(`p.${field}`));
    default:
      // Text, numbers and the coordinates array: to_json gives valid JSON for each (quoted, escaped strings).
      return text(field, `p.${field}`);
  }
}

/** The window start for an export requested at `requestedAt`, in the stored 'YYYY-MM-DDTHH:MM:SS.mmmZ' form. */
export function windowStart(requestedAt: Date): string {
  return new Date(requestedAt.getTime() - EXPORT_WINDOW_DAYS * 86_400_000).toISOString();
}

/**
 * Inlines compiled-filter parameters as literals: COPY takes no bind parameters. Every value is quoted by
 * escapeLiteral (arrays become ARRAY[...]) and the compiler casts each placeholder, so types are as with binding.
 */
export function inlineParams(sql: string, params: unknown[]): string {
  return sql.replace(/\$(\d+)\b/g, (_m, n: string) => {
    const value = params[Number(n) - 1];
    if (value === undefined) throw new Error(`filter placeholder $${n} has no value`);
    return literal(value);
  });
}

function literal(value: unknown): string {
  if (value === null) return 'NULL';
  if (Array.isArray(value)) return `ARRAY[${value.map((v) => escapeLiteral(String(v))).join(', ')}]::text[]`;
  if (typeof value === 'number' && !Number.isFinite(value)) throw new Error('non-finite number in a filter');
  return escapeLiteral(typeof value === 'object' ? JSON.stringify(value) : String(value));
}

export interface ShardQuery {
  workspaceId: string;
  filter: SegmentFilter;
  spec: ExportSpec;
  /** random_bucket range of the shard, [from, to). */
  bucketFrom: number;
  bucketTo: number;
  /** Start of the 90-day window. */
  since: string;
  /**
   * For an incremental export (../incremental.ts): keeps only the members that changed or joined since its base, by a
   * join and a condition over the range (full-compare), or by looking up the changed profiles `(random_bucket, id)`
   * one by one (changes-log).
   */
  changes?: { join: string; condition: string } | { changedIds: string };
}

/** The segment's predicate over `p`, with its values inlined (for COPY). */
export function segmentPredicate(filter: SegmentFilter): string {
  const compiled = compileFilter(filter, 1);
  return inlineParams(compiled.sql, compiled.params);
}

/**
 * The SQL text of one user's export line over the profile `p`: the one rendering of a user as JSON, shared by segment
 * exports and POST /users/export/ids, so that the same user and fields give the same JSON in both.
 */
export function exportLineText(spec: Pick<ExportSpec, 'fields' | 'customAttributes'>, since: string): string {
  const fields =
    spec.customAttributes && !spec.fields.includes('custom_attributes')
      ? [...spec.fields, 'custom_attributes' as const]
      : spec.fields;
  return `'{' || concat_ws(',', ${fields.map((f) => fieldText(f, spec, since)).join(', ')}) || '}'`;
}

/**
 * One SELECT whose every row is one finished NDJSON line (without the newline): PostgreSQL builds the JSON, so the
 * worker only frames, compresses and uploads. Absent values are left out at the top level only; nested nulls (a
 * device's carrier) stay as stored. Rows come in (random_bucket, id) order along the profiles_bucket index.
 */
export function exportLineSelect(q: ShardQuery): string {
  const predicate = segmentPredicate(q.filter);
  if (q.changes && 'changedIds' in q.changes) {
    // A lookup by key per changed profile: the fence (OFFSET 0) keeps the planner from joining the range instead.
    return `SELECT l.line FROM (${q.changes.changedIds}) ch
     CROSS JOIN LATERAL (SELECT ${exportLineText(q.spec, q.since)} AS line FROM profiles p
                          WHERE p.id = ch.id AND p.workspace_id = ${escapeLiteral(q.workspaceId)}::uuid AND (${predicate}) OFFSET 0) l
     ORDER BY ch.random_bucket, ch.id`;
  }
  return `SELECT ${exportLineText(q.spec, q.since)}
    FROM profiles p ${q.changes?.join ?? ''}
   WHERE p.workspace_id = ${escapeLiteral(q.workspaceId)}::uuid
     AND p.random_bucket >= ${Math.trunc(q.bucketFrom)} AND p.random_bucket < ${Math.trunc(q.bucketTo)}
     AND (${predicate})${
       q.changes
         ? `
     AND ${q.changes.condition}`
         : ''
     }
   ORDER BY p.random_bucket, p.id`;
}
