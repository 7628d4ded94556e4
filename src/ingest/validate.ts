import { z } from 'zod';
import { describeUnstorable, findUnstorable, isStorableText, printable, textProblem, type Unstorable } from '../lib/storable.js';
import { canonicalEventTime, isDateString, parseEventTime } from './time.js';
import type { Identity, ObjectError, StandardValues, TrackArray, TrackAttributes, TrackEvent, TrackObjects, TrackPurchase } from './types.js';

/**
 * Validation of event, purchase and attributes objects to the letter of the spec's Event object and its property
 * rules. zod checks the shape; the rules zod cannot say (exactly one identifier, property names and values, the
 * 50 KB rule) are explicit below. Every refusal is one readable sentence: it becomes an error's `type`.
 */

export const MAX_OBJECTS_PER_ARRAY = 75;
export const MAX_STRING_CHARS = 255;
/** "Event properties with arrays or objects: at most 50 KB", read as 50 x 1024 bytes of the properties' JSON. */
export const MAX_NESTED_PROPERTIES_BYTES = 50 * 1024;
const MAX_IDENTIFIER_CHARS = 512;
/**
 * Property and custom attribute values nest at most 50 levels (a value that is an array or object is level 1): the
 * spec's one nesting bound, that of catalog item values, as the spec gives none for these.
 */
export const MAX_VALUE_NESTING = 50;
/**
 * A purchase's price, either sign: beyond any real price, and it keeps `total_revenue` (float8, which PostgreSQL
 * refuses to overflow past 1.8e308 rather than store infinity) far from overflowing however many purchases add up.
 */
export const MAX_PRICE = 1e15;

export const FATAL_NOTHING_VALID = "Valid data must be provided in the 'attributes', 'events', or 'purchases' fields.";

type Result<T> = { ok: true; value: T } | { ok: false; type: string };

const isPlainObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Characters, not UTF-16 units: an emoji is one character, as a client counts it. */
function charLength(s: string): number {
  if (s.length <= MAX_STRING_CHARS) return s.length;
  let n = 0;
  for (const _ of s) n++;
  return n;
}

// NUL and unpaired surrogates escaped: a refusal's type names what was sent, and is itself storable text.
const quote = (name: string) => `'${printable(name)}'`;

const identifierString = (field: string) =>
  z
    .string({ error: `'${field}' must be a string` })
    .min(1, `'${field}' must not be empty`)
    .max(MAX_IDENTIFIER_CHARS, `'${field}' may be at most ${MAX_IDENTIFIER_CHARS} characters`);

const UserAlias = z
  .object(
    {
      alias_name: identifierString('user_alias.alias_name'),
      alias_label: identifierString('user_alias.alias_label'),
    },
    { error: "'user_alias' must be an object {alias_name, alias_label}" },
  )
  .strict();

const EMAIL = /^[^\s@]+@[^\s@]+$/;
const EmailString = (field: string) => identifierString(field).regex(EMAIL, `'${field}' must be an email address`);

const identifierFields = {
  external_id: identifierString('external_id').optional(),
  user_alias: UserAlias.optional(),
  service_id: identifierString('service_id').optional(),
  email: EmailString('email').optional(),
  _update_existing_only: z.boolean({ error: "'_update_existing_only' must be a boolean" }).optional(),
};

// The character limit of names is checked after parsing (tooLong): a zod refinement costs more than the rest of the
// event's shape, and this runs for every object of every request.
const NameString = (field: string) => z.string({ error: `'${field}' is required and must be a string` }).min(1, `'${field}' must not be empty`);
const tooLong = (value: string, field: string): Result<never> | null =>
  charLength(value) > MAX_STRING_CHARS ? { ok: false, type: `'${field}' may be at most ${MAX_STRING_CHARS} characters` } : null;

const TimeString = z.string({ error: "'time' is required and must be a string" });
// Checked by hand below (checkProperties); z.record would copy every object just to say it is one.
const PropertiesObject = z.custom<Record<string, unknown>>((v) => isPlainObject(v), { error: "'properties' must be an object" });
const AppId = z.string({ error: "'app_id' must be a string" }).min(1, "'app_id' must not be empty").max(MAX_STRING_CHARS, `'app_id' may be at most ${MAX_STRING_CHARS} characters`);

const EventShape = z
  .object({ ...identifierFields, app_id: AppId.optional(), name: NameString('name'), time: TimeString, properties: PropertiesObject.optional() })
  .strict();

const PurchaseShape = z
  .object({
    ...identifierFields,
    app_id: AppId.optional(),
    product_id: NameString('product_id'),
    currency: z.string({ error: "'currency' is required and must be a string" }).regex(/^[A-Za-z]{3}$/, "'currency' must be a three-letter ISO 4217 code"),
    price: z
      .number({ error: "'price' is required and must be a number" })
      .min(-MAX_PRICE, `'price' must be a number from -${MAX_PRICE} to ${MAX_PRICE}`)
      .max(MAX_PRICE, `'price' must be a number from -${MAX_PRICE} to ${MAX_PRICE}`),
    quantity: z
      .number({ error: "'quantity' must be an integer from 1 to 100" })
      .int("'quantity' must be an integer from 1 to 100")
      .min(1, "'quantity' must be an integer from 1 to 100")
      .max(100, "'quantity' must be an integer from 1 to 100")
      .optional(),
    time: TimeString,
    properties: PropertiesObject.optional(),
  })
  .strict();

/** The first zod issue as one sentence. */
function describeIssue(error: z.ZodError, kind: string): string {
  const issue = error.issues[0];
  if (!issue) return 'invalid object';
  if (issue.code === 'unrecognized_keys') return `${issue.keys.map(quote).join(', ')} ${issue.keys.length > 1 ? 'are not fields' : 'is not a field'} of ${kind}`;
  const path = issue.path.map(String).join('.');
  // Our messages name their field already; zod's generic ones get the path in front.
  return issue.message.startsWith("'") || !path ? issue.message : `'${path}': ${issue.message}`;
}

interface IdentifierInput {
  external_id?: string;
  user_alias?: { alias_name: string; alias_label: string };
  service_id?: string;
  email?: string;
  _update_existing_only?: boolean;
}

const IDENTIFIER_REQUIRED = "'external_id' or 'service_id' or 'user_alias' or 'email' is required";

/**
 * Exactly one identifier. For an attributes object `email` is the identifier only when none of the other three is
 * given; beside one of them it is the address to set (as the public API reads it).
 */
function identityOf(input: IdentifierInput, emailMayBeAttribute: boolean): Result<{ identity: Identity; create: boolean }> {
  const others = Number(input.external_id !== undefined) + Number(input.user_alias !== undefined) + Number(input.service_id !== undefined);
  const byEmail = input.email !== undefined && !(emailMayBeAttribute && others > 0);
  if (others + Number(byEmail) === 0) return { ok: false, type: IDENTIFIER_REQUIRED };
  if (others + Number(byEmail) > 1) {
    const given: string[] = (['external_id', 'user_alias', 'service_id'] as const).filter((f) => input[f] !== undefined);
    if (byEmail) given.push('email');
    return { ok: false, type: `only one of 'external_id', 'service_id', 'user_alias' or 'email' may be given; got ${given.map(quote).join(' and ')}` };
  }
  // Only an unknown external_id creates a profile; user_alias is always "update existing only".
  if (input.external_id !== undefined) {
    return { ok: true, value: { identity: { type: 'external_id', value: input.external_id }, create: input._update_existing_only !== true } };
  }
  const identity: Identity = input.user_alias !== undefined
    ? { type: 'user_alias', label: input.user_alias.alias_label, name: input.user_alias.alias_name }
    : input.service_id !== undefined
      ? { type: 'service_id', value: input.service_id }
      : { type: 'email', value: input.email!.toLowerCase() };
  return { ok: true, value: { identity, create: false } };
}

function checkName(name: string, what: string): string | null {
  if (name.length === 0) return `${what} name must be a non-empty string`;
  if (charLength(name) > MAX_STRING_CHARS) return `${what} name ${quote(name)} is longer than ${MAX_STRING_CHARS} characters`;
  if (name.startsWith('$')) return `${what} name ${quote(name)} must not begin with '$'`;
  return null;
}

/** Array elements: any value but a date (spec), strings within the string limit. */
function checkArray(values: unknown[], where: string): string | null {
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
function checkProperties(
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
        if (charLength(value) > MAX_STRING_CHARS && !isDateString(value)) return { ok: false, type: `${what} ${quote(name)}: strings may be at most ${MAX_STRING_CHARS} characters` };
        break;
      case 'object':
        if (value === null) {
          if (!options.allowNull) return { ok: false, type: `${what} ${quote(name)}: null is not a valid value (number, boolean, date, string, array or object)` };
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
        return { ok: false, type: `${what} ${quote(name)}: not a valid value (number, boolean, date, string, array or object)` };
    }
  }
  if (nested) {
    const bytes = Buffer.byteLength(JSON.stringify(props));
    if (bytes > MAX_NESTED_PROPERTIES_BYTES) {
      return { ok: false, type: `${what === 'property' ? 'properties' : 'custom attributes'} with arrays or objects may total at most 50 KB (${MAX_NESTED_PROPERTIES_BYTES} bytes); got ${bytes}` };
    }
  }
  return { ok: true, value: out ?? props };
}

function timeOf(text: string): Result<string> {
  const iso = canonicalEventTime(text);
  if (iso === null) return { ok: false, type: `'time' must be ISO 8601 or yyyy-MM-dd'T'HH:mm:ss:SSSZ; got ${quote(text)}` };
  // A zone can carry 9999-12-31 into year 10000 (or 0000-01-01 before year 0): toISOString then writes `+010000-...`
  // (`-000001-...`), which no longer compares as a string with the stored times.
  if (iso.charCodeAt(0) === 43 || iso.charCodeAt(0) === 45) return { ok: false, type: `'time' must fall within the years 0000 to 9999 in UTC; got ${quote(text)}` };
  return { ok: true, value: iso };
}

const notAnObject = (kind: string): Result<never> => ({ ok: false, type: `each entry must be ${kind} (a JSON object)` });

/**
 * What PostgreSQL would refuse later, anywhere in an object: NUL or an unpaired surrogate in a string or key, a
 * number JSON.parse made infinite (stored it would read null, which removes a custom attribute), values nested
 * deeper than MAX_VALUE_NESTING. `valuesAt` is the level of the object's property values (2 for the properties of
 * an event or purchase, 1 for an attributes object's own keys). One iterative walk, before anything recursive
 * (zod, checkArray, JSON.stringify) sees the object.
 */
function unstorable(raw: Record<string, unknown>, valuesAt: number): Result<never> | null {
  const found = findUnstorable(raw, { maxDepth: valuesAt + MAX_VALUE_NESTING, finiteNumbers: true });
  return found ? unstorableAt(found, '') : null;
}

/** A refusal naming where the problem is, `at` being the path of the value the problem was found in. */
function unstorableAt(found: Unstorable, at: string): Result<never> {
  const path = at === '' ? found.path : found.path === '' ? at : found.path.startsWith('[') ? `${at}${found.path}` : `${at}.${found.path}`;
  return { ok: false, type: describeUnstorable({ ...found, path }, MAX_VALUE_NESTING) };
}

/** `unstorable` for one property of an object not walked whole: its name, then its value (nested ones walked). */
function storableProblem(name: string, value: unknown): Unstorable | null {
  const key = textProblem(name);
  if (key) return { ...key, path: '', inKey: true };
  if (typeof value === 'string') {
    const text = textProblem(value);
    return text ? { ...text, path: '', inKey: false } : null;
  }
  if (typeof value === 'number') return Number.isFinite(value) ? null : { kind: 'not_finite', path: '', inKey: false };
  return typeof value === 'object' && value !== null ? findUnstorable(value, { maxDepth: MAX_VALUE_NESTING, finiteNumbers: true }) : null;
}

type EventInput = z.output<typeof EventShape>;

/**
 * The shape of an event as EventShape has it, checked by hand for the objects clients send every day: only
 * fields of the shape, each of its type and within its length, identifiers, name and app_id storable text (else the
 * whole object is walked by `unstorable`, which says where and why; checkProperties checks the properties). An
 * object this does not recognise (user_alias, a field the shape does not have, a wrong type, an empty or overlong
 * identifier) returns null and goes to EventShape, which stays the one definition of what is refused and why; this
 * may only say yes where EventShape does (test/ingest-validate.test.ts holds the two to that). Skipping zod for these
 * halves the validation of a 75-event request (BENCHMARKS.md), which runs for every request the API takes.
 */
function commonEventShape(raw: Record<string, unknown>): EventInput | null {
  let fields = 0;
  for (const key of Object.keys(raw)) {
    const v = raw[key];
    switch (key) {
      case 'external_id':
      case 'service_id':
        if (typeof v !== 'string' || v.length === 0 || v.length > MAX_IDENTIFIER_CHARS || !isStorableText(v)) return null;
        break;
      case 'email':
        if (typeof v !== 'string' || v.length === 0 || v.length > MAX_IDENTIFIER_CHARS || !EMAIL.test(v) || !isStorableText(v)) return null;
        break;
      case 'name':
        if (typeof v !== 'string' || v.length === 0 || !isStorableText(v)) return null;
        fields++;
        break;
      case 'time':
        // Its format, checked later, admits digits and separators only.
        if (typeof v !== 'string') return null;
        fields++;
        break;
      case 'properties':
        if (!isPlainObject(v)) return null;
        break;
      case 'app_id':
        if (typeof v !== 'string' || v.length === 0 || v.length > MAX_STRING_CHARS || !isStorableText(v)) return null;
        break;
      case '_update_existing_only':
        if (typeof v !== 'boolean') return null;
        break;
      default:
        return null;
    }
  }
  return fields === 2 ? (raw as EventInput) : null;
}

/** An event object's shape: the hand check for the common case, else EventShape. Exported for the tests. */
export function eventShapeOf(raw: Record<string, unknown>, fast = true): { ok: true; value: EventInput } | { ok: false; type: string } {
  const common = fast ? commonEventShape(raw) : null;
  if (common) return { ok: true, value: common };
  const parsed = EventShape.safeParse(raw);
  return parsed.success ? { ok: true, value: parsed.data } : { ok: false, type: describeIssue(parsed.error, 'an event object') };
}

/** One event object. */
export function validateEvent(raw: unknown): Result<TrackEvent> {
  if (!isPlainObject(raw)) return notAnObject('an event object');
  // The common shape has checked its own strings, and checkProperties checks the properties as it reads them: a
  // walk of every event besides cost a third more than the rest of a 75-event request's validation.
  const common = commonEventShape(raw);
  if (!common) {
    const bad = unstorable(raw, 2);
    if (bad) return bad;
  }
  const shape = common ? { ok: true as const, value: common } : eventShapeOf(raw, false);
  if (!shape.ok) return shape;
  const e = shape.value;
  const long = tooLong(e.name, 'name');
  if (long) return long;
  const id = identityOf(e, false);
  if (!id.ok) return id;
  const time = timeOf(e.time);
  if (!time.ok) return time;
  // Fields named one by one, not spread from id.value: a spread made each object in a slow shape of its own, which
  // cost more than the rest of the validation and slowed serializing the staged row after it.
  const event: TrackEvent = { identity: id.value.identity, create: id.value.create, name: e.name, time: time.value };
  if (e.app_id !== undefined) event.app_id = e.app_id;
  if (e.properties !== undefined) {
    const props = checkProperties(e.properties, 'property', { objectsAsStrings: true, allowNull: false, storableAt: common ? 'properties' : undefined });
    if (!props.ok) return props;
    event.properties = props.value;
  }
  return { ok: true, value: event };
}

/** One purchase object (`product_id`, `currency`, `price`, `quantity`, `time`, `properties`, `app_id`). */
export function validatePurchase(raw: unknown): Result<TrackPurchase> {
  if (!isPlainObject(raw)) return notAnObject('a purchase object');
  const bad = unstorable(raw, 2);
  if (bad) return bad;
  const parsed = PurchaseShape.safeParse(raw);
  if (!parsed.success) return { ok: false, type: describeIssue(parsed.error, 'a purchase object') };
  const p = parsed.data;
  const long = tooLong(p.product_id, 'product_id');
  if (long) return long;
  const id = identityOf(p, false);
  if (!id.ok) return id;
  const time = timeOf(p.time);
  if (!time.ok) return time;
  const purchase: TrackPurchase = {
    identity: id.value.identity,
    create: id.value.create,
    product_id: p.product_id,
    currency: p.currency.toUpperCase(),
    price: p.price,
    quantity: p.quantity ?? 1,
    time: time.value,
  };
  if (p.app_id !== undefined) purchase.app_id = p.app_id;
  if (p.properties !== undefined) {
    const props = checkProperties(p.properties, 'property', { objectsAsStrings: true, allowNull: false });
    if (!props.ok) return props;
    purchase.properties = props.value;
  }
  return { ok: true, value: purchase };
}

// Standard profile fields an attributes object sets, each with its own rule; null unsets one.
const nullable = <T extends z.ZodType>(schema: T) => schema.nullable();
const text = (field: string) => z.string({ error: `'${field}' must be a string or null` }).refine((s) => charLength(s) <= MAX_STRING_CHARS, `'${field}' may be at most ${MAX_STRING_CHARS} characters`);
const SUBSCRIPTION = ['opted_in', 'unsubscribed', 'subscribed'] as const;
const TIME_ZONES = new Set(Intl.supportedValuesOf('timeZone'));
TIME_ZONES.add('UTC');

const StandardShape = {
  first_name: nullable(text('first_name')),
  last_name: nullable(text('last_name')),
  home_city: nullable(text('home_city')),
  phone: nullable(text('phone')),
  attributed_campaign: nullable(text('attributed_campaign')),
  attributed_source: nullable(text('attributed_source')),
  attributed_adgroup: nullable(text('attributed_adgroup')),
  attributed_ad: nullable(text('attributed_ad')),
  // Year 0000 parses, but PostgreSQL's date has no year 0 (1 BC comes before 0001) and refuses it.
  dob: nullable(
    z
      .string({ error: "'dob' must be a date YYYY-MM-DD or null" })
      .refine((s) => /^\d{4}-\d{2}-\d{2}$/.test(s) && !s.startsWith('0000') && parseEventTime(s) !== null, "'dob' must be a date YYYY-MM-DD (years 0001 to 9999) or null"),
  ),
  country: nullable(z.string({ error: "'country' must be an ISO 3166-1 alpha-2 code or null" }).regex(/^[A-Za-z]{2}$/, "'country' must be an ISO 3166-1 alpha-2 code or null")),
  language: nullable(z.string({ error: "'language' must be an ISO 639-1 code or null" }).regex(/^[A-Za-z]{2}$/, "'language' must be an ISO 639-1 code or null")),
  time_zone: nullable(z.string({ error: "'time_zone' must be an IANA time zone name or null" }).refine((s) => TIME_ZONES.has(s), "'time_zone' must be an IANA time zone name or null")),
  gender: nullable(z.string({ error: "'gender' must be one of M, F, O, N, P or null" }).regex(/^[MFONPmfonp]$/, "'gender' must be one of M, F, O, N, P or null")),
  email_subscribe: nullable(z.enum(SUBSCRIPTION, { error: "'email_subscribe' must be one of opted_in, unsubscribed, subscribed" })),
  push_subscribe: nullable(z.enum(SUBSCRIPTION, { error: "'push_subscribe' must be one of opted_in, unsubscribed, subscribed" })),
  current_location: nullable(
    z
      .object(
        {
          longitude: z.number({ error: "'current_location.longitude' must be a number from -180 to 180" }).min(-180).max(180),
          latitude: z.number({ error: "'current_location.latitude' must be a number from -90 to 90" }).min(-90).max(90),
        },
        { error: "'current_location' must be an object {longitude, latitude} or null" },
      )
      .strict(),
  ),
};
const StandardSchema = z.object(Object.fromEntries(Object.entries(StandardShape).map(([k, v]) => [k, v.optional()])));
const STANDARD_FIELDS = new Set(Object.keys(StandardShape));
const IDENTIFIER_FIELDS = new Set(['external_id', 'user_alias', 'service_id', 'email', '_update_existing_only']);
/** Fields of the export record that ingestion maintains itself, or that other endpoints own. */
const NOT_SETTABLE = new Set([
  'random_bucket',
  'created_at',
  'updated_at',
  'custom_attributes',
  'custom_events',
  'purchases',
  'devices',
  'push_tokens',
  'apps',
  'campaigns_received',
  'canvases_received',
  'cards_clicked',
  'uninstalled_at',
  'total_revenue',
  'user_aliases',
  'last_coordinates',
  'push_opted_in_at',
  'attribute_times',
]);

/** One attributes object: identifiers, standard profile fields, and custom attributes as the other keys. */
export function validateAttributes(raw: unknown, acceptedAt: string): Result<TrackAttributes> {
  if (!isPlainObject(raw)) return notAnObject('an attributes object');
  const bad = unstorable(raw, 1);
  if (bad) return bad;
  const identifiers: Record<string, unknown> = {};
  const standardRaw: Record<string, unknown> = {};
  const customRaw: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(raw)) {
    if (IDENTIFIER_FIELDS.has(key)) identifiers[key] = value;
    else if (STANDARD_FIELDS.has(key)) standardRaw[key] = value;
    else if (NOT_SETTABLE.has(key)) return { ok: false, type: `${quote(key)} cannot be set through attributes` };
    else customRaw[key] = value;
  }
  const ids = z.object(identifierFields).safeParse(identifiers);
  if (!ids.success) return { ok: false, type: describeIssue(ids.error, 'an attributes object') };
  const id = identityOf(ids.data, true);
  if (!id.ok) return id;

  const std = StandardSchema.safeParse(standardRaw);
  if (!std.success) return { ok: false, type: describeIssue(std.error, 'an attributes object') };
  const standard: StandardValues = {};
  for (const [key, value] of Object.entries(std.data)) {
    if (value === undefined) continue;
    if (key === 'current_location') {
      const loc = value as { longitude: number; latitude: number } | null;
      standard.last_coordinates = loc === null ? null : [loc.longitude, loc.latitude];
    } else if (key === 'country' || key === 'gender') standard[key] = value === null ? null : (value as string).toUpperCase();
    else if (key === 'language') standard[key] = value === null ? null : (value as string).toLowerCase();
    else standard[key] = value as string | null;
  }
  // Beside another identifier, `email` is the address to set.
  if (id.value.identity.type !== 'email' && ids.data.email !== undefined) standard.email = ids.data.email;

  const custom = checkProperties(customRaw, 'custom attribute', { objectsAsStrings: false, allowNull: true });
  if (!custom.ok) return custom;
  return { ok: true, value: { identity: id.value.identity, create: id.value.create, at: acceptedAt, standard, custom: custom.value } };
}

export interface TrackValidation {
  objects: TrackObjects;
  errors: ObjectError[];
  /** Which arrays the request sent: a count is answered for each. */
  sent: Record<TrackArray, boolean>;
}

/** What makes a whole /users/track request unusable (nothing is taken). */
export class FatalTrackError extends Error {}

/**
 * A /users/track body: every object validated on its own; the valid ones are taken, the others listed in
 * `errors`. Throws FatalTrackError when the body itself is unusable or no object is valid.
 */
export function validateTrackBody(body: unknown, acceptedAt: string): TrackValidation {
  if (!isPlainObject(body)) throw new FatalTrackError(FATAL_NOTHING_VALID);
  const sent = { events: false, attributes: false, purchases: false };
  const arrays: Partial<Record<TrackArray, unknown[]>> = {};
  for (const name of ['attributes', 'events', 'purchases'] as const) {
    const value = body[name];
    if (value === undefined || value === null) continue;
    if (!Array.isArray(value)) throw new FatalTrackError(`'${name}' must be an array`);
    if (value.length > MAX_OBJECTS_PER_ARRAY) throw new FatalTrackError(`'${name}' may hold at most ${MAX_OBJECTS_PER_ARRAY} objects per request; got ${value.length}`);
    sent[name] = true;
    arrays[name] = value;
  }
  const objects: TrackObjects = { events: [], attributes: [], purchases: [] };
  const errors: ObjectError[] = [];
  const take = <T>(name: TrackArray, list: T[], check: (raw: unknown) => Result<T>) => {
    arrays[name]?.forEach((raw, index) => {
      const r = check(raw);
      if (r.ok) list.push(r.value);
      else errors.push({ type: r.type, input_array: name, index });
    });
  };
  take('attributes', objects.attributes, (raw) => validateAttributes(raw, acceptedAt));
  take('events', objects.events, validateEvent);
  take('purchases', objects.purchases, validatePurchase);
  const accepted = objects.events.length + objects.attributes.length + objects.purchases.length;
  if (accepted === 0) {
    const detail = errors.slice(0, 5).map((e) => `${e.input_array}[${e.index}]: ${e.type}`);
    if (errors.length > 5) detail.push(`and ${errors.length - 5} more`);
    throw new FatalTrackError(detail.length ? `${FATAL_NOTHING_VALID} ${detail.join('; ')}` : FATAL_NOTHING_VALID);
  }
  return { objects, errors, sent };
}
