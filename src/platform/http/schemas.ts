import { z } from 'zod';
import { parseIsoTime, parseUtcDate } from '../lib/iso-time.js';

/** Schemas shared by several route families. */

export const MessageResponse = z.object({ message: z.string() });

/**
 * An integer query parameter in [min, max]. Strict: only decimal digits (with an optional minus, to name the range
 * in the refusal), so that `1.5`, `1e2`, `0x10`, an empty value or a repeated key are refused rather than coerced.
 */
export function queryInteger(name: string, min: number, max?: number) {
  const message =
    max === undefined
      ? `${name} must be an integer of ${min} or more`
      : `${name} must be an integer from ${min} to ${max}`;
  return z
    .string({ error: message })
    .regex(/^-?\d{1,15}$/, message)
    .transform(Number)
    .pipe(
      z
        .number()
        .min(min, message)
        .max(max ?? Number.MAX_SAFE_INTEGER, message),
    );
}

/** `page` from 0, as the list endpoints take it; a non-integer or negative page is refused. */
export const PageParam = queryInteger('page', 0).default(0);

export const SortDirectionParam = z
  .enum(['asc', 'desc'], { error: "sort_direction must be 'asc' or 'desc'" })
  .default('asc');

/** Query booleans arrive as strings. */
export const QueryBoolean = z
  .enum(['true', 'false'], { error: "must be 'true' or 'false'" })
  .transform((v) => v === 'true');

export const LIST_PAGE_SIZE = 100;

/** A calendar date `YYYY-MM-DD` in a query, as midnight UTC. */
export function queryUtcDate(name: string) {
  return z.string({ error: `${name} must be a date YYYY-MM-DD` }).transform((text, ctx) => {
    const date = parseUtcDate(text);
    if (!date) {
      ctx.addIssue({ code: 'custom', message: `${name} must be a date YYYY-MM-DD` });
      return z.NEVER;
    }
    return date;
  });
}

/** An ISO 8601 date or date-time in a query (no zone means UTC); gives the instant and whether a time was given. */
export function queryIsoTime(name: string) {
  return z.string({ error: `${name} must be an ISO 8601 time` }).transform((text, ctx) => {
    const parsed = parseIsoTime(text);
    if (!parsed) {
      ctx.addIssue({ code: 'custom', message: `${name} must be an ISO 8601 time such as 2024-01-31T23:59:59Z` });
      return z.NEVER;
    }
    return parsed;
  });
}

/**
 * One value, or several, of an array query parameter. Clients send `key[]=a&key[]=b`; the query parser gives a
 * string for one value and an array for several, under the literal key `key[]` (or `key`). Route schemas declare
 * both keys with this, then merge them with `mergeArrayParam` and check the items in one place.
 */
export const QueryStringList = z.union([z.string(), z.array(z.string())]).optional();

/** The values of `key` and `key[]` together, as one list. */
export function mergeArrayParam<T>(plain: T | T[] | undefined, bracketed: T | T[] | undefined): T[] {
  const list = (v: T | T[] | undefined): T[] => (v === undefined ? [] : Array.isArray(v) ? v : [v]);
  return [...list(plain), ...list(bracketed)];
}

/**
 * A body the route takes as it is (`unknown`) because its domain validates it object by object (per-object errors,
 * the catalog error ids), documented in the API reference by the zod schema that describes its shape: the schema the
 * domain's validation is built from, so the reference and the validation do not drift apart.
 */
export function documentedBody(schema: z.ZodType, description?: string) {
  const { $schema: _ignored, ...json } = z.toJSONSchema(schema, { io: 'input', unrepresentable: 'any' }) as Record<
    string,
    unknown
  >;
  const body = z.unknown().meta(description === undefined ? json : { ...json, description });
  documentedSchemas.set(body, schema);
  return body;
}

/** The schema a `documentedBody` was made from: what the body's top-level keys are checked against (body-keys.ts). */
const documentedSchemas = new WeakMap<z.ZodType, z.ZodType>();

export const documentedSchemaOf = (body: z.ZodType): z.ZodType | undefined => documentedSchemas.get(body);
