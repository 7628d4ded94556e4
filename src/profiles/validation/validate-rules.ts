import { z } from 'zod';
import {
  describeUnstorable,
  findUnstorable,
  MAX_VALUE_NESTING,
  printable,
  textProblem,
  type Unstorable,
} from '../../platform/lib/storable.js';
import { canonicalEventTime, isDateString } from './event-time.js';
import type { Identity } from '../tracked-types.js';

/** The rules every kind of track object shares: identifiers, names, properties, times, what PostgreSQL can store. */

export const MAX_OBJECTS_PER_ARRAY = 75;
export const MAX_STRING_CHARS = 255;
/** "Event properties with arrays or objects: at most 50 KB", read as 50 x 1024 bytes of the properties' JSON. */
export const MAX_NESTED_PROPERTIES_BYTES = 50 * 1024;
export const MAX_IDENTIFIER_CHARS = 512;
/**
 * A purchase's price, either sign: beyond any real price, and it keeps `total_revenue` (float8, which PostgreSQL
 * refuses to overflow past 1.8e308 rather than store infinity) far from overflowing however many purchases add up.
 */
export const MAX_PRICE = 1e15;

export const FATAL_NOTHING_VALID = "Valid data must be provided in the 'attributes', 'events', or 'purchases' fields.";

export type Result<T> = { ok: true; value: T } | { ok: false; type: string };

export const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** Characters, not UTF-16 units: an emoji is one character, as a client counts it. */
export function charLength(s: string): number {
  if (s.length <= MAX_STRING_CHARS) return s.length;
  let n = 0;
  for (const _ of s) n++;
  return n;
}

// NUL and unpaired surrogates escaped: a refusal's type names what was sent, and is itself storable text.
export const quote = (name: string) => `'${printable(name)}'`;

export const identifierString = (field: string) =>
  z
    .string({ error: `'${field}' must be a string` })
    .min(1, `'${field}' must not be empty`)
    .max(MAX_IDENTIFIER_CHARS, `'${field}' may be at most ${MAX_IDENTIFIER_CHARS} characters`);

/**
 * A user alias object. An `external_id` inside it is taken and ignored: edX's Braze client sends the alias object it
 * gave POST /users/alias/new (where each alias may carry the external_id of its user) on to /users/track unchanged.
 * Any other key is refused.
 */
export const UserAlias = z
  .object(
    {
      alias_name: identifierString('user_alias.alias_name'),
      alias_label: identifierString('user_alias.alias_label'),
      external_id: z.unknown().optional(),
    },
    { error: "'user_alias' must be an object {alias_name, alias_label}" },
  )
  .strict()
  .transform(({ alias_name, alias_label }) => ({ alias_name, alias_label }));

export const EMAIL = /^[^\s@]+@[^\s@]+$/;
export const EmailString = (field: string) =>
  identifierString(field).regex(EMAIL, `'${field}' must be an email address`);

export const identifierFields = {
  external_id: identifierString('external_id').optional(),
  user_alias: UserAlias.optional(),
  service_id: identifierString('service_id').optional(),
  email: EmailString('email').optional(),
  _update_existing_only: z.boolean({ error: "'_update_existing_only' must be a boolean" }).optional(),
};

// The character limit of names is checked after parsing (tooLong): a zod refinement costs more than the rest of the
// event's shape, and this runs for every object of every request.
export const NameString = (field: string) =>
  z.string({ error: `'${field}' is required and must be a string` }).min(1, `'${field}' must not be empty`);
export const tooLong = (value: string, field: string): Result<never> | null =>
  charLength(value) > MAX_STRING_CHARS
    ? { ok: false, type: `'${field}' may be at most ${MAX_STRING_CHARS} characters` }
    : null;

export const TimeString = z.string({ error: "'time' is required and must be a string" });
// Checked by hand below (checkProperties); z.record would copy every object just to say it is one.
export const PropertiesObject = z.custom<Record<string, unknown>>((v) => isPlainObject(v), {
  error: "'properties' must be an object",
});
export const AppId = z
  .string({ error: "'app_id' must be a string" })
  .min(1, "'app_id' must not be empty")
  .max(MAX_STRING_CHARS, `'app_id' may be at most ${MAX_STRING_CHARS} characters`);

/** The first zod issue as one sentence. */
export function describeIssue(error: z.ZodError, kind: string): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid object';
  if (issue.code === 'unrecognized_keys') {
    // A key inside a nested object (user_alias) is named with that object, not with the object as a whole.
    const within = issue.path.length > 0 ? quote(issue.path.map(String).join('.')) : kind;
    return `${issue.keys.map(quote).join(', ')} ${issue.keys.length > 1 ? 'are not fields' : 'is not a field'} of ${within}`;
  }
  const path = issue.path.map(String).join('.');
  // Our messages name their field already; zod's generic ones get the path in front.
  return issue.message.startsWith("'") || !path ? issue.message : `'${path}': ${issue.message}`;
}

export interface IdentifierInput {
  external_id?: string;
  user_alias?: { alias_name: string; alias_label: string };
  service_id?: string;
  email?: string;
  _update_existing_only?: boolean;
}

export const IDENTIFIER_REQUIRED = "'external_id' or 'service_id' or 'user_alias' or 'email' is required";

/**
 * Exactly one identifier. For an attributes object `email` is the identifier only when none of the other three is
 * given; beside one of them it is the address to set (as the public API reads it).
 */
export function identityOf(
  input: IdentifierInput,
  emailMayBeAttribute: boolean,
): Result<{ identity: Identity; create: boolean }> {
  const others =
    Number(input.external_id !== undefined) +
    Number(input.user_alias !== undefined) +
    Number(input.service_id !== undefined);
  const byEmail = input.email !== undefined && !(emailMayBeAttribute && others > 0);
  if (others + Number(byEmail) === 0) return { ok: false, type: IDENTIFIER_REQUIRED };
  if (others + Number(byEmail) > 1) {
    const given: string[] = (['external_id', 'user_alias', 'service_id'] as const).filter(
      (f) => input[f] !== undefined,
    );
    if (byEmail) given.push('email');
    return {
      ok: false,
      type: `only one of 'external_id', 'service_id', 'user_alias' or 'email' may be given; got ${given.map(quote).join(' and ')}`,
    };
  }
  // Only an unknown external_id creates a profile; user_alias is always "update existing only".
  if (input.external_id !== undefined) {
    return {
      ok: true,
      value: {
        identity: { type: 'external_id', value: input.external_id },
        create: input._update_existing_only !== true,
      },
    };
  }
  const identity: Identity =
    input.user_alias !== undefined
      ? { type: 'user_alias', label: input.user_alias.alias_label, name: input.user_alias.alias_name }
      : input.service_id !== undefined
        ? { type: 'service_id', value: input.service_id }
        : { type: 'email', value: input.email!.toLowerCase() };
  return { ok: true, value: { identity, create: false } };
}

export function checkName(name: string, what: string): string | null {
  if (name.length === 0) return `${what} name must be a non-empty string`;
  if (charLength(name) > MAX_STRING_CHARS)
    return `${what} name ${quote(name)} is longer than ${MAX_STRING_CHARS} characters`;
  if (name.startsWith('$')) return `${what} name ${quote(name)} must not begin with '$'`;
  return null;
}

/** Array elements: any value but a date (spec), strings within the string limit. */
export function checkArray(values: unknown[], where: string): string | null {
  for (const v of values) {
    if (typeof v === 'string') {
      if (isDateString(v)) return `${where}: an array may not contain dates`;
      if (charLength(v) > MAX_STRING_CHARS) return `${where}: strings may be at most ${MAX_STRING_CHARS} characters`;
    } else if (Array.isArray(v)) {
      const nested = checkArray(v, where);
      if (nested) return nested;
    } else if (v === null) {
      return `${where}: an array may not contain null`;
    }
  }
  return null;
}

/**
 * Property (or custom attribute) values: number, boolean, date, string of at most 255 characters, array without
 * dates, or object. Objects are "ingested as a string" for event properties (`objectsAsStrings`); nested custom
 * attributes keep their shape. Null is a value only where it means "remove" (`allowNull`).
 */
export function checkProperties(
  props: Record<string, unknown>,
  what: 'property' | 'custom attribute',
  options: { objectsAsStrings: boolean; allowNull: boolean; storableAt?: string },
): Result<Record<string, unknown>> {
  let nested = false;
  let out: Record<string, unknown> | undefined;
  const at = options.storableAt;
  for (const [name, value] of Object.entries(props)) {
    const bad = checkName(name, what);
    if (bad) return { ok: false, type: bad };
    if (at !== undefined) {
      const found = storableProblem(name, value);
      if (found) return unstorableAt(found, `${at}.${printable(name)}`);
    }
    switch (typeof value) {
      case 'number':
      case 'boolean':
        break;
      case 'string':
        if (charLength(value) > MAX_STRING_CHARS && !isDateString(value))
          return { ok: false, type: `${what} ${quote(name)}: strings may be at most ${MAX_STRING_CHARS} characters` };
        break;
      case 'object':
        if (value === null) {
          if (!options.allowNull)
            return {
              ok: false,
              type: `${what} ${quote(name)}: null is not a valid value (number, boolean, date, string, array or object)`,
            };
        } else if (Array.isArray(value)) {
          nested = true;
          const arr = checkArray(value, `${what} ${quote(name)}`);
          if (arr) return { ok: false, type: arr };
        } else {
          nested = true;
          if (options.objectsAsStrings) (out ??= { ...props })[name] = JSON.stringify(value);
        }
        break;
      default:
        return {
          ok: false,
          type: `${what} ${quote(name)}: not a valid value (number, boolean, date, string, array or object)`,
        };
    }
  }
  if (nested) {
    const bytes = Buffer.byteLength(JSON.stringify(props));
    if (bytes > MAX_NESTED_PROPERTIES_BYTES) {
      return {
        ok: false,
        type: `${what === 'property' ? 'properties' : 'custom attributes'} with arrays or objects may total at most 50 KB (${MAX_NESTED_PROPERTIES_BYTES} bytes); got ${bytes}`,
      };
    }
  }
  return { ok: true, value: out ?? props };
}

export function timeOf(text: string): Result<string> {
  const iso = canonicalEventTime(text);
  if (iso === null)
    return { ok: false, type: `'time' must be ISO 8601 or yyyy-MM-dd'T'HH:mm:ss:SSSZ; got ${quote(text)}` };
  // A zone can carry 9999-12-31 into year 10000 (or 0000-01-01 before year 0): toISOString then writes `+010000-...`
  // (`-000001-...`), which no longer compares as a string with the stored times.
  if (iso.charCodeAt(0) === 43 || iso.charCodeAt(0) === 45)
    return { ok: false, type: `'time' must fall within the years 0000 to 9999 in UTC; got ${quote(text)}` };
  return { ok: true, value: iso };
}

export const notAnObject = (kind: string): Result<never> => ({
  ok: false,
  type: `each entry must be ${kind} (a JSON object)`,
});

/**
 * What PostgreSQL would refuse later, anywhere in an object: NUL or an unpaired surrogate in a string or key, a
 * number JSON.parse made infinite (stored it would read null, which removes a custom attribute), values nested
 * deeper than MAX_VALUE_NESTING. `valuesAt` is the level of the object's property values (2 for the properties of
 * an event or purchase, 1 for an attributes object's own keys). One iterative walk, before anything recursive
 * (zod, checkArray, JSON.stringify) sees the object.
 */
export function unstorable(raw: Record<string, unknown>, valuesAt: number): Result<never> | null {
  const found = findUnstorable(raw, { maxDepth: valuesAt + MAX_VALUE_NESTING, finiteNumbers: true });
  return found ? unstorableAt(found, '') : null;
}

/** A refusal naming where the problem is, `at` being the path of the value the problem was found in. */
export function unstorableAt(found: Unstorable, at: string): Result<never> {
  const path =
    at === ''
      ? found.path
      : found.path === ''
        ? at
        : found.path.startsWith('[')
          ? `${at}${found.path}`
          : `${at}.${found.path}`;
  return { ok: false, type: describeUnstorable({ ...found, path }, MAX_VALUE_NESTING) };
}

/** `unstorable` for one property of an object not walked whole: its name, then its value (nested ones walked). */
export function storableProblem(name: string, value: unknown): Unstorable | null {
  const key = textProblem(name);
  if (key) return { ...key, path: '', inKey: true };
  if (typeof value === 'string') {
    const text = textProblem(value);
    return text ? { ...text, path: '', inKey: false } : null;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? null : { kind: 'not_finite', path: '', inKey: false };
  return typeof value === 'object' && value !== null
    ? findUnstorable(value, { maxDepth: MAX_VALUE_NESTING, finiteNumbers: true })
    : null;
}
