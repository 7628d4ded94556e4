import { z } from 'zod';

/**
 * The language a segment's membership is written in, evaluated by PostgreSQL as a predicate over `profiles p`.
 * It covers what segments of such a service filter on: standard attributes, custom attributes, random_bucket
 * ranges, and custom-event / purchase counts and recency.
 */
export const STANDARD_ATTRIBUTES = {
  external_id: 'text',
  first_name: 'text',
  last_name: 'text',
  email: 'text',
  dob: 'date',
  home_city: 'text',
  country: 'text',
  phone: 'text',
  language: 'text',
  time_zone: 'text',
  gender: 'text',
  total_revenue: 'double precision',
  attributed_campaign: 'text',
  attributed_source: 'text',
  attributed_adgroup: 'text',
  attributed_ad: 'text',
  push_subscribe: 'text',
  email_subscribe: 'text',
  created_at: 'timestamptz',
  push_opted_in_at: 'timestamptz',
  uninstalled_at: 'timestamptz',
} as const;

const Scalar = z.union([z.string(), z.number(), z.boolean()]);
const Comparison = z.discriminatedUnion('op', [
  z.object({ op: z.enum(['eq', 'neq', 'gt', 'gte', 'lt', 'lte', 'contains', 'starts_with']), value: Scalar }),
  z.object({ op: z.literal('in'), value: z.array(Scalar).min(1).max(1000) }),
  z.object({ op: z.enum(['exists', 'not_exists']) }),
]);

const Count = z
  .object({ gte: z.number().int().nonnegative().optional(), lte: z.number().int().nonnegative().optional() })
  .strict();

export type SegmentFilter =
  | { all: SegmentFilter[] }
  | { any: SegmentFilter[] }
  | { not: SegmentFilter }
  | ({ attribute: keyof typeof STANDARD_ATTRIBUTES } & z.infer<typeof Comparison>)
  | ({ custom_attribute: string } & z.infer<typeof Comparison>)
  | { random_bucket: { gte?: number; lt?: number } }
  | { custom_event: string; count?: z.infer<typeof Count>; within_days?: number }
  | { purchase: string; count?: z.infer<typeof Count>; within_days?: number };

export const SegmentFilterSchema: z.ZodType<SegmentFilter> = z.lazy(() =>
  z.union([
    z.object({ all: z.array(SegmentFilterSchema) }).strict(),
    z.object({ any: z.array(SegmentFilterSchema).min(1) }).strict(),
    z.object({ not: SegmentFilterSchema }).strict(),
    z.intersection(
      z.object({ attribute: z.enum(Object.keys(STANDARD_ATTRIBUTES) as [keyof typeof STANDARD_ATTRIBUTES]) }),
      Comparison,
    ),
    z.intersection(z.object({ custom_attribute: z.string().min(1).max(255) }), Comparison),
    z
      .object({
        random_bucket: z
          .object({
            gte: z.number().int().min(0).max(10_000).optional(),
            lt: z.number().int().min(0).max(10_000).optional(),
          })
          .strict(),
      })
      .strict(),
    z
      .object({
        custom_event: z.string().min(1),
        count: Count.optional(),
        within_days: z.number().int().positive().optional(),
      })
      .strict(),
    z
      .object({
        purchase: z.string().min(1),
        count: Count.optional(),
        within_days: z.number().int().positive().optional(),
      })
      .strict(),
  ]),
);

/** A compiled predicate: SQL text over alias `p` with $n placeholders numbered after `offset`. */
export interface CompiledFilter {
  sql: string;
  params: unknown[];
}

/**
 * Whether a profile's membership can change with time alone, with no write to it: a `within_days` window moves every
 * day. Incremental exports of such a segment compare every member with the base (src/pipelines/exports/incremental.ts).
 */
export function filterMovesWithTime(f: SegmentFilter): boolean {
  if ('all' in f) return f.all.some(filterMovesWithTime);
  if ('any' in f) return f.any.some(filterMovesWithTime);
  if ('not' in f) return filterMovesWithTime(f.not);
  if ('custom_event' in f || 'purchase' in f) return f.within_days !== undefined;
  return false;
}

const SQL_OPS = { eq: '=', neq: '<>', gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;
const PATH_OPS = { eq: '==', neq: '!=', gt: '>', gte: '>=', lt: '<', lte: '<=' } as const;

/** Adds a parameter and returns its placeholder ($n). */
type Param = (value: unknown) => string;

type ComparisonFilter = z.infer<typeof Comparison>;
type CountFilter = Extract<SegmentFilter, { custom_event: string }> | Extract<SegmentFilter, { purchase: string }>;
type CustomAttributeFilter = Extract<SegmentFilter, { custom_attribute: string }>;

/** Compiles a filter to a parameterised predicate; `firstParam` is the number of the first placeholder. */
export function compileFilter(filter: SegmentFilter, firstParam = 1): CompiledFilter {
  const params: unknown[] = [];
  const p: Param = (value) => {
    params.push(value);
    return `$${firstParam + params.length - 1}`;
  };

  const walk = (f: SegmentFilter): string => {
    if ('all' in f) return f.all.length === 0 ? 'TRUE' : `(${f.all.map(walk).join(' AND ')})`;
    if ('any' in f) return `(${f.any.map(walk).join(' OR ')})`;
    if ('not' in f) return `(NOT COALESCE(${walk(f.not)}, FALSE))`;
    if ('random_bucket' in f) return randomBucketSql(f.random_bucket, p);
    if ('custom_event' in f || 'purchase' in f) return countSql(f, p);
    if ('attribute' in f) return standardComparison(`p.${f.attribute}`, STANDARD_ATTRIBUTES[f.attribute], f, p);
    return customComparison(f, p);
  };

  return { sql: walk(filter), params };
}

function randomBucketSql(range: { gte?: number; lt?: number }, p: Param): string {
  const parts: string[] = [];
  if (range.gte !== undefined) parts.push(`p.random_bucket >= ${p(range.gte)}::int`);
  if (range.lt !== undefined) parts.push(`p.random_bucket < ${p(range.lt)}::int`);
  return parts.length === 0 ? 'TRUE' : `(${parts.join(' AND ')})`;
}

/** A custom event's or a product's count and recency, looked up in the profile's aggregates. */
function countSql(f: CountFilter, p: Param): string {
  const column = 'custom_event' in f ? 'p.custom_events' : 'p.purchases';
  const name = 'custom_event' in f ? f.custom_event : f.purchase;
  const conds = ['@.name == $name'];
  const vars = [`'name', ${p(name)}::text`];
  if (f.count?.gte !== undefined) {
    conds.push('@.count >= $gte');
    vars.push(`'gte', ${p(f.count.gte)}::int`);
  }
  if (f.count?.lte !== undefined) {
    conds.push('@.count <= $lte');
    vars.push(`'lte', ${p(f.count.lte)}::int`);
  }
  if (f.within_days !== undefined) {
    // Stored times are 'YYYY-MM-DDTHH:MM:SS.mmmZ', so string order is time order.
    conds.push('@.last >= $since');
    vars.push(
      `'since', to_char(now() - make_interval(days => ${p(f.within_days)}::int), 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`,
    );
  }
  // Entries are stored keyed by name (migration 0100); each value still holds its name.
  const exists = `jsonb_path_exists(${column}, '$.* ? (${conds.join(' && ')})', jsonb_build_object(${vars.join(', ')}))`;
  // "count <= n" includes users who never did it (count 0).
  if (f.count?.lte !== undefined && (f.count.gte ?? 0) === 0 && f.within_days === undefined) {
    return `(${exists} OR NOT jsonb_path_exists(${column}, '$.* ? (@.name == $name)', jsonb_build_object('name', ${p(name)}::text)))`;
  }
  return exists;
}

/** A comparison of a standard attribute's column, of its SQL type. */
function standardComparison(column: string, type: string, f: ComparisonFilter, p: Param): string {
  switch (f.op) {
    case 'exists':
      return `(${column} IS NOT NULL)`;
    case 'not_exists':
      return `(${column} IS NULL)`;
    case 'in':
      return `(${column} = ANY(${p(f.value.map(String))}::${type}[]))`;
    case 'contains':
      return `COALESCE(strpos(${column}::text, ${p(String(f.value))}::text) > 0, FALSE)`;
    case 'starts_with':
      return `COALESCE(starts_with(${column}::text, ${p(String(f.value))}::text), FALSE)`;
    default:
      return `COALESCE(${column} ${SQL_OPS[f.op]} ${p(String(f.value))}::${type}, FALSE)`;
  }
}

/** A comparison of a custom attribute, a JSON value of any type (a JSON null counts as absent). */
function customComparison(f: CustomAttributeFilter, p: Param): string {
  const value = `(p.custom_attributes -> ${p(f.custom_attribute)}::text)`;
  switch (f.op) {
    case 'exists':
      return `(${value} IS NOT NULL AND ${value} <> 'null'::jsonb)`;
    case 'not_exists':
      return `(${value} IS NULL OR ${value} = 'null'::jsonb)`;
    case 'in':
      return `(${value} IN (SELECT jsonb_array_elements(${p(JSON.stringify(f.value))}::jsonb)))`;
    case 'contains': {
      // A string attribute contains a substring; an array attribute contains an element.
      const needle = p(String(f.value));
      const element = p(JSON.stringify([f.value]));
      return `COALESCE(CASE jsonb_typeof(${value}) WHEN 'string' THEN strpos(${value} #>> '{}', ${needle}::text) > 0 WHEN 'array' THEN ${value} @> ${element}::jsonb ELSE FALSE END, FALSE)`;
    }
    case 'starts_with':
      return `COALESCE(jsonb_typeof(${value}) = 'string' AND starts_with(${value} #>> '{}', ${p(String(f.value))}::text), FALSE)`;
    default:
      // jsonpath compares like with like and is false (never an error) across types.
      return `COALESCE(jsonb_path_exists(${value}, '$ ? (@ ${PATH_OPS[f.op]} $v)', jsonb_build_object('v', ${p(JSON.stringify(f.value))}::jsonb)), FALSE)`;
  }
}
