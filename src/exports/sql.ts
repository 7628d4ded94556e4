import { escapeLiteral } from 'pg';
import { compileFilter, type SegmentFilter } from '../segments/filter.js';
import type { ExportField, ExportSpec } from './request.js';

/** Days of custom_events, purchases, campaigns_received and canvases_received an export covers (spec). */
export const EXPORT_WINDOW_DAYS = 90;

const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;
const nonEmpty = (expr: string) => `NULLIF(${expr}, '[]'::jsonb)`;
/** Keeps the array elements whose time field is within the window; the stored strings compare as times. */
const windowed = (column: string, condition: string, since: string) =>
  nonEmpty(`jsonb_path_query_array(${column}, '$[*] ? (${condition})', ${escapeLiteral(JSON.stringify({ since }))}::jsonb)`);

/** The SQL value of one export field over `p`; NULL when the field is absent (then it is left out of the line). */
function fieldExpression(field: ExportField, spec: ExportSpec, since: string): string {
  switch (field) {
    case 'created_at':
    case 'push_opted_in_at':
    case 'uninstalled_at':
      return iso(`p.${field}`);
    case 'dob':
      return `to_char(p.dob, 'YYYY-MM-DD')`;
    case 'last_coordinates':
      return `to_jsonb(p.last_coordinates)`;
    case 'custom_attributes': {
      if (!spec.customAttributes) return `NULLIF(p.custom_attributes, '{}'::jsonb)`;
      const names = `ARRAY[${spec.customAttributes.map(escapeLiteral).join(', ')}]::text[]`;
      return `(SELECT jsonb_object_agg(e.key, e.value) FROM jsonb_each(p.custom_attributes) e WHERE e.key = ANY(${names}))`;
    }
    case 'custom_events':
    case 'purchases':
      // first and count stay as stored: they cover all history, as the spec asks.
      return windowed(`p.${field}`, '@.last >= $since', since);
    case 'campaigns_received':
      return windowed('p.campaigns_received', '@.last_received >= $since', since);
    case 'canvases_received':
      return windowed('p.canvases_received', '@.last_received_message >= $since || @.last_entered >= $since || @.last_exited >= $since', since);
    case 'user_aliases':
    case 'devices':
    case 'push_tokens':
    case 'apps':
    case 'cards_clicked':
      return nonEmpty(`p.${field}`);
    default:
      return `p.${field}`;
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
}

/**
 * One SELECT whose every row is one finished NDJSON line (without the newline): PostgreSQL builds the JSON, so the
 * worker only frames, compresses and uploads. Absent values are dropped at the top level only (jsonb_strip_nulls
 * would also strip nulls inside nested values such as a device's carrier).
 */
export function exportLineSelect(q: ShardQuery): string {
  const compiled = compileFilter(q.filter, 1);
  const predicate = inlineParams(compiled.sql, compiled.params);
  const fields = q.spec.customAttributes && !q.spec.fields.includes('custom_attributes') ? [...q.spec.fields, 'custom_attributes' as const] : q.spec.fields;
  const exprs = fields.map((f) => ({ name: f, expr: fieldExpression(f, q.spec, q.since) }));
  // Field values are computed once in the subquery; the outer level drops the keys whose value is null.
  const col = (name: string) => `j."f_${name}"`;
  const nullKeys = `ARRAY[${exprs.map((e) => `CASE WHEN ${col(e.name)} IS NULL THEN '${e.name}' END`).join(', ')}]::text[]`;
  const object = `jsonb_build_object(${exprs.map((e) => `'${e.name}', ${col(e.name)}`).join(', ')})`;
  const inner = exprs.map((e) => `${e.expr} AS "f_${e.name}"`).join(', ');
  return `SELECT (${object} - ${nullKeys})::text
    FROM (SELECT ${inner}
            FROM profiles p
           WHERE p.workspace_id = ${escapeLiteral(q.workspaceId)}::uuid
             AND p.random_bucket >= ${Math.trunc(q.bucketFrom)} AND p.random_bucket < ${Math.trunc(q.bucketTo)}
             AND (${predicate})
           ORDER BY p.random_bucket, p.id) j`;
}
