import { z } from 'zod';
import { parseEventTime } from './event-time.js';
import type { StandardValues, TrackAttributes } from '../tracked-types.js';
import {
  MAX_STRING_CHARS,
  charLength,
  checkProperties,
  describeIssue,
  identifierFields,
  identityOf,
  isPlainObject,
  notAnObject,
  quote,
  type Result,
  unstorable,
} from './validate-rules.js';

/** Attributes objects: identifiers, the standard profile fields, and custom attributes. */

// Standard profile fields an attributes object sets, each with its own rule; null unsets one.
const nullable = <T extends z.ZodType>(schema: T) => schema.nullable();
const text = (field: string) =>
  z
    .string({ error: `'${field}' must be a string or null` })
    .refine((s) => charLength(s) <= MAX_STRING_CHARS, `'${field}' may be at most ${MAX_STRING_CHARS} characters`);
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
      .refine(
        (s) => /^\d{4}-\d{2}-\d{2}$/.test(s) && !s.startsWith('0000') && parseEventTime(s) !== null,
        "'dob' must be a date YYYY-MM-DD (years 0001 to 9999) or null",
      ),
  ),
  country: nullable(
    z
      .string({ error: "'country' must be an ISO 3166-1 alpha-2 code or null" })
      .regex(/^[A-Za-z]{2}$/, "'country' must be an ISO 3166-1 alpha-2 code or null"),
  ),
  language: nullable(
    z
      .string({ error: "'language' must be an ISO 639-1 code or null" })
      .regex(/^[A-Za-z]{2}$/, "'language' must be an ISO 639-1 code or null"),
  ),
  time_zone: nullable(
    z
      .string({ error: "'time_zone' must be an IANA time zone name or null" })
      .refine((s) => TIME_ZONES.has(s), "'time_zone' must be an IANA time zone name or null"),
  ),
  gender: nullable(
    z
      .string({ error: "'gender' must be one of M, F, O, N, P or null" })
      .regex(/^[MFONPmfonp]$/, "'gender' must be one of M, F, O, N, P or null"),
  ),
  email_subscribe: nullable(
    z.enum(SUBSCRIPTION, { error: "'email_subscribe' must be one of opted_in, unsubscribed, subscribed" }),
  ),
  push_subscribe: nullable(
    z.enum(SUBSCRIPTION, { error: "'push_subscribe' must be one of opted_in, unsubscribed, subscribed" }),
  ),
  current_location: nullable(
    z
      .object(
        {
          longitude: z
            .number({ error: "'current_location.longitude' must be a number from -180 to 180" })
            .min(-180)
            .max(180),
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

/** Built once: zod compiles a schema on its first parse, which per object cost more than the checks themselves. */
const IdentifierSchema = z.object(identifierFields);

/** Groups one attributes object may set (the public API gives no figure; ours). */
export const MAX_GROUPS_PER_OBJECT = 50;
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/**
 * `subscription_groups`: the user's state in each group (docs/subscription-groups.md). A well-formed id the workspace
 * does not declare is dropped when the object is applied: validation knows no workspace.
 */
const SubscriptionGroupsSchema = z
  .array(
    z.strictObject(
      {
        subscription_group_id: z
          .string({ error: "'subscription_group_id' must be a subscription group id (a UUID)" })
          .regex(UUID, "'subscription_group_id' must be a subscription group id (a UUID)"),
        subscription_state: z.enum(['subscribed', 'unsubscribed'], {
          error: "'subscription_state' must be subscribed or unsubscribed",
        }),
      },
      { error: "'subscription_groups' must hold objects {subscription_group_id, subscription_state}" },
    ),
    { error: "'subscription_groups' must be an array of {subscription_group_id, subscription_state}" },
  )
  .max(MAX_GROUPS_PER_OBJECT, `'subscription_groups' may list at most ${MAX_GROUPS_PER_OBJECT} groups`);

/**
 * The shape of an attributes object, for the API reference: the identifiers, the standard profile fields, the
 * subscription groups, and custom attributes as any other key (validateAttributes applies the rules of each).
 */
export const AttributesShape = z.looseObject({
  ...identifierFields,
  ...StandardSchema.shape,
  subscription_groups: SubscriptionGroupsSchema.optional(),
});

/** One attributes object: identifiers, standard profile fields, and custom attributes as the other keys. */
export function validateAttributes(raw: unknown, acceptedAt: string): Result<TrackAttributes> {
  if (!isPlainObject(raw)) return notAnObject('an attributes object');
  const bad = unstorable(raw, 1);
  if (bad) return bad;
  const identifiers: Record<string, unknown> = {};
  const standardRaw: Record<string, unknown> = {};
  const customRaw: Record<string, unknown> = {};
  let groupsRaw: unknown;
  for (const [key, value] of Object.entries(raw)) {
    if (IDENTIFIER_FIELDS.has(key)) identifiers[key] = value;
    else if (key === 'subscription_groups') groupsRaw = value;
    else if (STANDARD_FIELDS.has(key)) standardRaw[key] = value;
    else if (NOT_SETTABLE.has(key)) return { ok: false, type: `${quote(key)} cannot be set through attributes` };
    else customRaw[key] = value;
  }
  const ids = IdentifierSchema.safeParse(identifiers);
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
    } else if (key === 'country' || key === 'gender')
      standard[key] = value === null ? null : (value as string).toUpperCase();
    else if (key === 'language') standard[key] = value === null ? null : (value as string).toLowerCase();
    else standard[key] = value as string | null;
  }
  // Beside another identifier, `email` is the address to set.
  if (id.value.identity.type !== 'email' && ids.data.email !== undefined) standard.email = ids.data.email;

  const custom = checkProperties(customRaw, 'custom attribute', { objectsAsStrings: false, allowNull: true });
  if (!custom.ok) return custom;
  const value: TrackAttributes = {
    identity: id.value.identity,
    create: id.value.create,
    at: acceptedAt,
    standard,
    custom: custom.value,
  };
  if (groupsRaw !== undefined) {
    const groups = SubscriptionGroupsSchema.safeParse(groupsRaw);
    if (!groups.success) return { ok: false, type: describeIssue(groups.error, "'subscription_groups'") };
    value.groups = groups.data.map((g) => ({ id: g.subscription_group_id.toLowerCase(), state: g.subscription_state }));
  }
  return { ok: true, value };
}
