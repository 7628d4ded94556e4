import type { PoolClient } from '../../platform/db/pool.js';

/** A column fed from the input rows: its SQL type in the input record, and how the stored value is computed. */
export type ColumnSpec = string | { type: string; expr: string };

/**
 * One kind of declared object, upserted by natural key in one statement. Rows whose values already match are not
 * written at all (no new tuple, no updated_at bump), which is what makes applying a file twice change nothing.
 */
export interface UpsertSpec {
  table: string;
  /** The natural key: column -> SQL type. */
  key: Record<string, string>;
  /** Compared and replaced: the file is the truth for these. */
  set?: Record<string, ColumnSpec>;
  /** Compared and replaced only when the input gives a value; on insert a missing value takes `insertDefaults`. */
  optional?: Record<string, ColumnSpec>;
  insertDefaults?: Record<string, string>;
  /** Written on insert only (e.g. generated ids): column -> input type; never compared or updated. */
  insertOnly?: Record<string, string>;
  /** Column set to now() when a row changes (its given value wins when it is also an optional column). */
  touch?: string;
  /** Further assignments made when a row changes, e.g. `version = t.version + 1`. */
  onUpdate?: string[];
}

export interface UpsertCounts {
  created: number;
  updated: number;
  unchanged: number;
}

const typeOf = (c: ColumnSpec) => (typeof c === 'string' ? c : c.type);
const exprOf = (name: string, c: ColumnSpec) => (typeof c === 'string' ? `i.${name}` : c.expr);

/** The statement for a spec; rows go in as one jsonb array (`$1`). */
export function upsertSql(spec: UpsertSpec): string {
  const set = Object.entries(spec.set ?? {});
  const optional = Object.entries(spec.optional ?? {});
  const insertOnly = Object.entries(spec.insertOnly ?? {});
  const keys = Object.keys(spec.key);
  const recordCols = [
    ...Object.entries(spec.key).map(([n, t]) => `${n} ${t}`),
    ...set.map(([n, c]) => `${n} ${typeOf(c)}`),
    ...optional.map(([n, c]) => `${n} ${typeOf(c)}`),
    ...insertOnly.map(([n, t]) => `${n} ${t}`),
  ];
  const match = (alias: string) => keys.map((k) => `${alias}.${k} = i.${k}`).join(' AND ');
  const ctes = [`i AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(${recordCols.join(', ')}))`];

  const assignments = [
    ...set.map(([n, c]) => `${n} = ${exprOf(n, c)}`),
    ...optional.filter(([n]) => n !== spec.touch).map(([n, c]) => `${n} = COALESCE(${exprOf(n, c)}, t.${n})`),
  ];
  assignments.push(...(spec.onUpdate ?? []));
  if (spec.touch) {
    const given = optional.find(([n]) => n === spec.touch);
    assignments.push(`${spec.touch} = ${given ? `COALESCE(${exprOf(given[0], given[1])}, now())` : 'now()'}`);
  }
  const changed = [
    ...set.map(([n, c]) => `t.${n} IS DISTINCT FROM ${exprOf(n, c)}`),
    ...optional.map(([n, c]) => `(i.${n} IS NOT NULL AND t.${n} IS DISTINCT FROM ${exprOf(n, c)})`),
  ];
  if (changed.length > 0) {
    ctes.push(
      `u AS (UPDATE ${spec.table} AS t SET ${assignments.join(', ')} FROM i WHERE ${match('t')} AND (${changed.join(' OR ')}) RETURNING 1)`,
    );
  }
  const insertCols = [...keys, ...set.map(([n]) => n), ...optional.map(([n]) => n), ...insertOnly.map(([n]) => n)];
  const insertValues = [
    ...keys.map((k) => `i.${k}`),
    ...set.map(([n, c]) => exprOf(n, c)),
    ...optional.map(([n, c]) => {
      const def = spec.insertDefaults?.[n];
      return def ? `COALESCE(${exprOf(n, c)}, ${def})` : exprOf(n, c);
    }),
    ...insertOnly.map(([n]) => `i.${n}`),
  ];
  ctes.push(
    `n AS (INSERT INTO ${spec.table} (${insertCols.join(', ')}) SELECT ${insertValues.join(', ')} FROM i ` +
      `WHERE NOT EXISTS (SELECT 1 FROM ${spec.table} AS t WHERE ${match('t')}) RETURNING 1)`,
  );
  const updated = changed.length > 0 ? '(SELECT count(*) FROM u)::int' : '0';
  return `WITH ${ctes.join(',\n')}\nSELECT (SELECT count(*) FROM n)::int AS created, ${updated} AS updated`;
}

export async function upsert(
  client: PoolClient,
  spec: UpsertSpec,
  rows: Record<string, unknown>[],
): Promise<UpsertCounts> {
  if (rows.length === 0) return { created: 0, updated: 0, unchanged: 0 };
  const { rows: result } = await client.query<{ created: number; updated: number }>(upsertSql(spec), [
    JSON.stringify(rows),
  ]);
  const { created, updated } = result[0]!;
  return { created, updated, unchanged: rows.length - created - updated };
}
