import type { EventData, EventType } from '../../../profiles/event-log-types.js';
import type { JsonText } from './json-text.js';
import type { SourceEvent } from './source.js';

/**
 * The fields of each event type's record, in Currents' order, and how each is filled from a logged event
 * (docs/events-schemas.md). The Currents types follow the storage schemas of Braze's event glossary and of the Avro
 * files Braze publishes as samples, which give the exact Avro types and field order:
 *  - users.behaviors.CustomEvent, users.behaviors.Purchase: braze-inc/braze-docs,
 *    _docs/_user_guide/data/distribution/braze_currents/event_glossary/customer_behavior_events.md ("Cloud Storage"
 *    tabs), https://www.braze.com/docs/user_guide/data/braze_currents/event_glossary/customer_behavior_events/
 *  - users.behaviors.Uninstall, users.behaviors.subscription.GlobalStateChange, users.canvas.Entry: the same
 *    repository, .../event_glossary/message_engagement_events.md,
 *    https://www.braze.com/docs/user_guide/data/braze_currents/event_glossary/message_engagement_events/
 *  - the writer schemas embedded in Appboy/currents-examples, sample-data/Avro/<type>.avro (Currents v10).
 *
 * A field Currents marks optional is nullable here, and null when we cannot know it (device, platform, campaign...).
 * A field Currents marks required is never null: when the log has no value for it, the record carries the neutral
 * value named in the field's `missing` note ('' or '{}'), so that a reader of Braze's schema can read every record.
 *
 * Changing this list: a new field is appended as a nullable field (old readers skip it, old files read as null), and
 * the type's version (./schemas.ts) stays; removing or retyping a field, or making one required, is a breaking change
 * that moves the version.
 */

/**
 * How a field is typed in each format:
 *  - string: Avro string, Parquet VARCHAR, JSON string.
 *  - time: Avro int (Unix seconds, as Currents), Parquet TIMESTAMP WITH TIME ZONE, JSON RFC 3339 string (whole seconds).
 *  - json: a JSON object: Avro string and Parquet VARCHAR holding its JSON text, the object itself in NDJSON.
 *  - float: Avro float (32 bits, as Currents' price), Parquet DOUBLE, JSON number.
 *  - long: Avro long, Parquet BIGINT, JSON integer.
 *  - boolean: Avro boolean, Parquet BOOLEAN, JSON boolean.
 */
export type FieldKind = 'string' | 'time' | 'json' | 'float' | 'long' | 'boolean';

/** A field's value as the mapping gives it, before any format writes it. */
export type FieldValue = string | number | boolean | Date | Record<string, unknown> | JsonText | null;

export interface EventField<T extends EventType = EventType> {
  name: string;
  kind: FieldKind;
  /** Null allowed: Currents marks the field optional (or it is one of ours, added later or beyond Currents). */
  nullable: boolean;
  /** The Avro `doc` and the JSON Schema `description`. */
  doc: string;
  value: (e: SourceEvent<T>) => FieldValue;
  /** A field of Currents the log never knows (device, campaign...): always null, which the encoders write once. */
  neverKnown: boolean;
}

export interface EventTypeSpec<T extends EventType = EventType> {
  /** Currents' record name and namespace (ours for the two types beyond Currents). */
  name: string;
  namespace: string;
  doc: string;
  fields: EventField<T>[];
}

type Fields<T extends EventType> = EventField<T>[];

const NS = 'dataexport.S3.inner.';

// The builders below keep each type's list to one line a field.
const field = <T extends EventType>(
  name: string,
  kind: FieldKind,
  nullable: boolean,
  doc: string,
  value: (e: SourceEvent<T>) => FieldValue,
): EventField<T> => ({ name, kind, nullable, doc, value, neverKnown: false });
/** A field Currents has that the log never knows: always null. */
const unknown = <T extends EventType>(name: string, doc: string, kind: FieldKind = 'string'): EventField<T> => ({
  name,
  kind,
  nullable: true,
  doc,
  value: () => null,
  neverKnown: true,
});

const id = <T extends EventType>() => field<T>('id', 'string', false, 'Globally unique ID for this event', (e) => e.id);
/** Our service_id. Required by Currents; '' in the only case the log lacks it (a profile gone before its log row). */
const userId = <T extends EventType>() =>
  field<T>('user_id', 'string', false, '[PII] service_id of the user who performed this event', (e) => e.userId ?? '');
const externalUserId = <T extends EventType>() =>
  field<T>('external_user_id', 'string', true, '[PII] External ID of the user', (e) => e.externalUserId);
const appId = <T extends EventType>() =>
  field<T>('app_id', 'string', true, 'API ID of the app on which this event occurred', (e) => e.appId);
const time = <T extends EventType>() =>
  field<T>('time', 'time', false, 'UNIX timestamp at which the event happened', (e) => e.time);
/** Braze's app group is our workspace. */
const appGroupId = <T extends EventType>() =>
  field<T>('app_group_id', 'string', true, 'ID of the workspace this user belongs to', (e) => e.workspaceId);
/** Currents' `properties`: required, a JSON object's text; '{}' when the event had none. */
const properties = <T extends EventType>() =>
  field<T>('properties', 'json', false, 'Custom properties stored as a JSON encoded string', (e) => e.properties ?? {});

const device = <T extends EventType>(): Fields<T> => [
  unknown('platform', 'Platform of the device'),
  unknown('os_version', 'Version of the operating system of the device'),
  unknown('device_model', 'Model of the device'),
  unknown('device_id', 'ID of the device on which the event occurred'),
];
const advertising = <T extends EventType>(): Fields<T> => [
  unknown('ad_id', '[PII] Advertising identifier'),
  unknown('ad_id_type', "One of ['ios_idfa', 'google_ad_id', 'windows_ad_id', 'roku_ad_id']"),
  unknown('ad_tracking_enabled', 'Whether advertising tracking is enabled for the device', 'boolean'),
];
const timezone = <T extends EventType>() => unknown<T>('timezone', 'Time zone of the user');

const customEvent: Fields<'users.behaviors.CustomEvent'> = [
  id(),
  userId(),
  externalUserId(),
  appId(),
  time(),
  timezone(),
  ...device(),
  field('name', 'string', false, 'Name of the custom event', (e) => e.name ?? ''),
  properties(),
  ...advertising(),
  appGroupId(),
];

const purchase: Fields<'users.behaviors.Purchase'> = [
  id(),
  userId(),
  externalUserId(),
  appId(),
  time(),
  ...device(),
  field('product_id', 'string', false, 'ID of the product purchased', (e) => e.name ?? ''),
  field('price', 'float', false, 'Price of the purchase', (e) => e.data.price),
  field('currency', 'string', false, 'Currency of the purchase', (e) => e.data.currency),
  properties(),
  ...advertising(),
  appGroupId(),
  // Beyond Currents, which has no quantity.
  field('quantity', 'long', true, 'Quantity purchased', (e) => e.data.quantity ?? null),
];

const uninstall: Fields<'users.behaviors.Uninstall'> = [
  id(),
  userId(),
  externalUserId(),
  unknown('device_id', 'ID of the device on which the event occurred'),
  // Required by Currents; '' when the uninstall was not reported for one app.
  field('app_id', 'string', false, 'API ID of the app on which this event occurred', (e) => e.appId ?? ''),
  time(),
  appGroupId(),
];

type StateChange = EventData['users.behaviors.subscription.GlobalStateChange'];
/** Currents' spelling of the profile's email_subscribe states; another value passes as it is. */
const SUBSCRIPTION_STATUS: Record<string, string> = {
  subscribed: 'Subscribed',
  unsubscribed: 'Unsubscribed',
  opted_in: 'Opted In',
};
const subscriptionStatus = (d: StateChange) => SUBSCRIPTION_STATUS[d.subscription_status] ?? d.subscription_status;

const globalStateChange: Fields<'users.behaviors.subscription.GlobalStateChange'> = [
  id(),
  userId(),
  externalUserId(),
  field('email_address', 'string', true, '[PII] Email address of the user', (e) => e.data.email_address),
  field(
    'state_change_source',
    'string',
    true,
    'Source of the state change: api (/users/track), email_status (/email/status), cdi, bounce',
    (e) => e.data.state_change_source,
  ),
  field(
    'subscription_status',
    'string',
    false,
    "Subscription status: 'Subscribed', 'Unsubscribed' or 'Opted In'",
    (e) => subscriptionStatus(e.data),
  ),
  field('channel', 'string', true, 'Channel this event belongs to', (e) => e.data.channel),
  time(),
  timezone(),
  appGroupId(),
  appId(),
  unknown('campaign_id', 'API ID of the campaign this event belongs to'),
  unknown('campaign_name', 'Name of the campaign'),
  unknown('message_variation_id', 'API ID of the message variation this user received'),
  unknown('canvas_id', 'API ID of the Canvas this event belongs to'),
  unknown('canvas_name', 'Name of the Canvas'),
  unknown('canvas_variation_id', 'API ID of the Canvas variation this event belongs to'),
  unknown('canvas_variation_name', 'Name of the Canvas variation this user received'),
  unknown('canvas_step_id', 'API ID of the Canvas step this event belongs to'),
  unknown('canvas_step_name', 'Name of the Canvas step'),
  unknown('send_id', 'Message send ID this message belongs to'),
  // For the email channel, the user's identifier on it is the address.
  field(
    'channel_identifier',
    'string',
    true,
    "[PII] The user's identifier on the channel the event is for",
    (e) => e.data.email_address,
  ),
];

type GroupChange = EventData['users.behaviors.subscriptiongroup.StateChange'];
/** Currents' spelling of a group state ('Subscribed' or 'Unsubscribed'). */
const groupStatus = (d: GroupChange) => SUBSCRIPTION_STATUS[d.subscription_status] ?? d.subscription_status;

/**
 * The glossary's Cloud Storage tab lists this type's fields alphabetically and Braze publishes no sample file of it:
 * the order is GlobalStateChange's, with the group's id, the phone number and the two fields it lacks (the message
 * variation's name, the dispatch) where the glossary's other tabs put them.
 */
const groupStateChange: Fields<'users.behaviors.subscriptiongroup.StateChange'> = [
  id(),
  userId(),
  externalUserId(),
  field('email_address', 'string', true, '[PII] Email address of the user', (e) => e.data.email_address),
  field(
    'phone_number',
    'string',
    true,
    '[PII] Phone number of the user in E.164 format (for example +14155552671)',
    (e) => e.data.phone_number,
  ),
  field(
    'state_change_source',
    'string',
    true,
    'Source of the state change: api (/users/track), subscription_status (/subscription/status/set and its v2)',
    (e) => e.data.state_change_source,
  ),
  field('subscription_group_id', 'string', false, 'Subscription group API ID', (e) => e.data.subscription_group_id),
  field('subscription_status', 'string', false, "Subscription status: 'Subscribed' or 'Unsubscribed'", (e) =>
    groupStatus(e.data),
  ),
  field('channel', 'string', true, 'Channel this event belongs to', (e) => e.data.channel),
  time(),
  timezone(),
  appGroupId(),
  appId(),
  unknown('campaign_id', 'API ID of the campaign this event belongs to'),
  unknown('campaign_name', 'Name of the campaign'),
  unknown('message_variation_id', 'API ID of the message variation this user received'),
  unknown('message_variation_name', 'Name of the message variation'),
  unknown('canvas_id', 'API ID of the Canvas this event belongs to'),
  unknown('canvas_name', 'Name of the Canvas'),
  unknown('canvas_variation_id', 'API ID of the Canvas variation this event belongs to'),
  unknown('canvas_variation_name', 'Name of the Canvas variation this user received'),
  unknown('canvas_step_id', 'API ID of the Canvas step this event belongs to'),
  unknown('canvas_step_name', 'Name of the Canvas step'),
  unknown('send_id', 'Message send ID this message belongs to'),
  unknown('dispatch_id', 'ID of the dispatch this message belongs to'),
  // The user's identifier on the group's channel: the address of an email group, the number of an SMS group.
  field('channel_identifier', 'string', true, "[PII] The user's identifier on the channel the event is for", (e) =>
    e.data.channel === 'sms' ? e.data.phone_number : e.data.email_address,
  ),
];

const canvasEntry: Fields<'users.canvas.Entry'> = [
  id(),
  userId(),
  externalUserId(),
  time(),
  timezone(),
  field('canvas_id', 'string', false, 'API ID of the Canvas this event belongs to', (e) => e.data.canvas_id),
  field('canvas_name', 'string', true, 'Name of the Canvas', (e) => e.data.canvas_name),
  // Required by Currents; '' for a canvas sent without variations.
  field(
    'canvas_variation_id',
    'string',
    false,
    'API ID of the Canvas variation this event belongs to',
    (e) => e.data.canvas_variation_id ?? '',
  ),
  unknown('canvas_variation_name', 'Name of the Canvas variation this user received'),
  unknown('canvas_step_id', 'API ID of the Canvas step this event belongs to'),
  unknown('canvas_step_name', 'Name of the Canvas step'),
  field(
    'in_control_group',
    'boolean',
    false,
    'Whether the user was enrolled in the control group',
    (e) => e.data.in_control_group,
  ),
  appGroupId(),
];

// Beyond Currents: identifiers only, for a warehouse to apply erasures and merges downstream.
const deleted: Fields<'users.Deleted'> = [
  id(),
  field('user_id', 'string', false, '[PII] service_id of the deleted user', (e) => e.userId ?? ''),
  field('external_user_id', 'string', true, '[PII] External ID the deleted user had', (e) => e.externalUserId),
  time(),
  appGroupId(),
];

const merged: Fields<'users.Merged'> = [
  id(),
  field('user_id', 'string', false, '[PII] service_id of the kept user', (e) => e.userId ?? ''),
  field('external_user_id', 'string', true, '[PII] External ID of the kept user', (e) => e.externalUserId),
  field(
    'merged_user_id',
    'string',
    false,
    '[PII] service_id the merged (removed) user had',
    (e) => e.data.merged_user_id,
  ),
  field(
    'merged_external_user_id',
    'string',
    true,
    '[PII] External ID the merged (removed) user had',
    (e) => e.data.merged_external_user_id,
  ),
  time(),
  appGroupId(),
];

/** Every type's record: Currents' name and namespace, and its fields in Currents' order. */
export const EVENT_TYPE_SPECS: { [T in EventType]: EventTypeSpec<T> } = {
  'users.behaviors.CustomEvent': {
    name: 'CustomEvent',
    namespace: `${NS}users.behaviors`,
    doc: 'when a user performs a custom event',
    fields: customEvent,
  },
  'users.behaviors.Purchase': {
    name: 'Purchase',
    namespace: `${NS}users.behaviors`,
    doc: 'when a user makes a purchase',
    fields: purchase,
  },
  'users.behaviors.subscription.GlobalStateChange': {
    name: 'GlobalStateChange',
    namespace: `${NS}users.behaviors.subscription`,
    doc: 'when a user is subscribed or unsubscribed globally from a channel such as email',
    fields: globalStateChange,
  },
  'users.behaviors.subscriptiongroup.StateChange': {
    name: 'StateChange',
    namespace: `${NS}users.behaviors.subscriptiongroup`,
    doc: "when a user's state in a subscription group changes",
    fields: groupStateChange,
  },
  'users.behaviors.Uninstall': {
    name: 'Uninstall',
    namespace: `${NS}users.behaviors`,
    doc: 'when a user uninstalls an app',
    fields: uninstall,
  },
  'users.canvas.Entry': {
    name: 'Entry',
    namespace: `${NS}users.canvas`,
    doc: 'when a user enters a Canvas',
    fields: canvasEntry,
  },
  'users.Deleted': {
    name: 'Deleted',
    namespace: `${NS}users`,
    doc: 'when a user is deleted: identifiers only, for erasure downstream',
    fields: deleted,
  },
  'users.Merged': {
    name: 'Merged',
    namespace: `${NS}users`,
    doc: 'when a user is merged into another: identifiers only, for merging downstream',
    fields: merged,
  },
};
