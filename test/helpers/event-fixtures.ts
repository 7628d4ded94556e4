// Logged events of every type for the event-stream format tests (test/events/formats.test.ts), with the record each
// must become, written out by hand from Braze's Currents glossary (docs/events-schemas.md), not from the mapping code.
import type { EventData, EventType, LoggedEvent } from '../../src/profiles/event-log-types.js';

export const WORKSPACE = '5d2e8a41-7c3b-4f09-9e61-0b4a3c2d1e7f';
/** 2024-05-01T12:34:56.789Z: the records hold the second, 1714566896. */
export const TIME = new Date('2024-05-01T12:34:56.789Z');
export const TIME_S = 1_714_566_896;
const ACCEPTED = new Date('2024-05-01T12:35:00.000Z');

/** Text that JSON and the encoders must carry unchanged: quotes, a backslash, a newline, accents, an emoji. */
export const AWKWARD = 'quote " backslash \\ newline \n tab \t é ü 🚀 \u2028';

/** The record an event must become, as Avro holds it (time in Unix seconds, properties as JSON text). */
export type Expected = Record<string, string | number | boolean | null>;

export interface Fixture {
  event: LoggedEvent;
  expected: Expected;
}

let serial = 0;
function logged<T extends EventType>(
  type: T,
  fields: Partial<Omit<LoggedEvent<T>, 'type' | 'data'>> & { data: EventData[T] },
): LoggedEvent {
  serial++;
  return {
    id: `e0000000-0000-4000-8000-${String(serial).padStart(12, '0')}`,
    type,
    workspaceId: WORKSPACE,
    acceptedAt: ACCEPTED,
    time: TIME,
    userId: '6650f1c0a2b3c4d5e6f7a801',
    externalUserId: 'user-1',
    appId: 'ios-app-1',
    name: null,
    properties: null,
    ...fields,
  } as LoggedEvent;
}

const NONE = {} as Record<string, never>;
const DEVICE = { platform: null, os_version: null, device_model: null, device_id: null };
const ADS = { ad_id: null, ad_id_type: null, ad_tracking_enabled: null };
const CAMPAIGN = {
  campaign_id: null,
  campaign_name: null,
  message_variation_id: null,
  canvas_id: null,
  canvas_name: null,
  canvas_variation_id: null,
  canvas_variation_name: null,
  canvas_step_id: null,
  canvas_step_name: null,
  send_id: null,
};

const PROPERTIES = { sku: 'A-1', price: 9.5, tags: ['x', 'y'], nested: { ok: true, none: null }, note: AWKWARD };

function customEvents(): Fixture[] {
  const full = logged('users.behaviors.CustomEvent', { name: 'added_to_cart', properties: PROPERTIES, data: NONE });
  // No properties, no app, and (a row whose profile was gone) no service_id: Currents requires both strings.
  const bare = logged('users.behaviors.CustomEvent', {
    userId: null,
    externalUserId: null,
    appId: null,
    name: AWKWARD,
    data: NONE,
  });
  const common = { time: TIME_S, timezone: null, ...DEVICE };
  return [
    {
      event: full,
      expected: {
        id: full.id,
        user_id: '6650f1c0a2b3c4d5e6f7a801',
        external_user_id: 'user-1',
        app_id: 'ios-app-1',
        ...common,
        name: 'added_to_cart',
        properties: JSON.stringify(PROPERTIES),
        ...ADS,
        app_group_id: WORKSPACE,
      },
    },
    {
      event: bare,
      expected: {
        id: bare.id,
        user_id: '',
        external_user_id: null,
        app_id: null,
        ...common,
        name: AWKWARD,
        properties: '{}',
        ...ADS,
        app_group_id: WORKSPACE,
      },
    },
  ].map(({ event, expected }) => ({
    event,
    // Currents' order: id, user_id, external_user_id, app_id, time, timezone, device..., name, properties, ads, group.
    expected: pick(expected, [
      'id',
      'user_id',
      'external_user_id',
      'app_id',
      'time',
      'timezone',
      'platform',
      'os_version',
      'device_model',
      'device_id',
      'name',
      'properties',
      'ad_id',
      'ad_id_type',
      'ad_tracking_enabled',
      'app_group_id',
    ]),
  }));
}

function purchases(): Fixture[] {
  const full = logged('users.behaviors.Purchase', {
    name: 'sku-42',
    properties: { color: AWKWARD, size: 42 },
    data: { price: 19.99, currency: 'USD', quantity: 3 },
  });
  // A row of before quantity was logged, no properties, no app, no external id.
  const bare = logged('users.behaviors.Purchase', {
    externalUserId: null,
    appId: null,
    name: 'sku-7',
    data: { price: 0, currency: 'EUR' } as EventData['users.behaviors.Purchase'],
  });
  const record = (e: LoggedEvent, over: Expected): Expected => ({
    id: e.id,
    user_id: '6650f1c0a2b3c4d5e6f7a801',
    external_user_id: 'user-1',
    app_id: 'ios-app-1',
    time: TIME_S,
    ...DEVICE,
    ...over,
  });
  return [
    {
      event: full,
      expected: {
        ...record(full, { product_id: 'sku-42', price: 19.99, currency: 'USD' }),
        properties: JSON.stringify({ color: AWKWARD, size: 42 }),
        ...ADS,
        app_group_id: WORKSPACE,
        quantity: 3,
      },
    },
    {
      event: bare,
      expected: {
        ...record(bare, { external_user_id: null, app_id: null, product_id: 'sku-7', price: 0, currency: 'EUR' }),
        properties: '{}',
        ...ADS,
        app_group_id: WORKSPACE,
        quantity: null,
      },
    },
  ];
}

function stateChanges(): Fixture[] {
  type Data = EventData['users.behaviors.subscription.GlobalStateChange'];
  const change = (data: Data, over: Partial<LoggedEvent> = {}) =>
    logged('users.behaviors.subscription.GlobalStateChange', { appId: null, ...over, data });
  const cases: [LoggedEvent, Expected][] = [
    [
      change(
        {
          subscription_status: 'opted_in',
          channel: 'email',
          email_address: 'ann@example.com',
          state_change_source: 'email_status',
        },
        { appId: 'web-app' },
      ),
      { email: 'ann@example.com', source: 'email_status', status: 'Opted In', app: 'web-app' },
    ],
    [
      change(
        { subscription_status: 'unsubscribed', channel: 'email', email_address: null, state_change_source: 'bounce' },
        { externalUserId: null },
      ),
      { email: null, source: 'bounce', status: 'Unsubscribed', app: null },
    ],
    [
      change({
        subscription_status: 'subscribed',
        channel: 'email',
        email_address: AWKWARD,
        state_change_source: 'api',
      }),
      { email: AWKWARD, source: 'api', status: 'Subscribed', app: null },
    ],
  ];
  return cases.map(([event, c]) => ({
    event,
    expected: {
      id: event.id,
      user_id: '6650f1c0a2b3c4d5e6f7a801',
      external_user_id: event.externalUserId,
      email_address: c.email!,
      state_change_source: c.source!,
      subscription_status: c.status!,
      channel: 'email',
      time: TIME_S,
      timezone: null,
      app_group_id: WORKSPACE,
      app_id: c.app!,
      ...CAMPAIGN,
      channel_identifier: c.email!,
    },
  }));
}

function groupStateChanges(): Fixture[] {
  type Data = EventData['users.behaviors.subscriptiongroup.StateChange'];
  const GROUP = '3f1c2b7e-5d4a-4c1b-9e8f-0a1b2c3d4e5f';
  const change = (data: Data, over: Partial<LoggedEvent> = {}) =>
    logged('users.behaviors.subscriptiongroup.StateChange', { appId: null, ...over, data });
  const base = { subscription_group_id: GROUP, email_address: null, phone_number: null };
  const cases: [LoggedEvent, Expected][] = [
    [
      change({
        ...base,
        subscription_status: 'subscribed',
        channel: 'email',
        email_address: 'ann@example.com',
        state_change_source: 'subscription_status',
      }),
      { email: 'ann@example.com', phone: null, source: 'subscription_status', status: 'Subscribed', channel: 'email' },
    ],
    [
      change(
        {
          ...base,
          subscription_status: 'unsubscribed',
          channel: 'sms',
          phone_number: '+15555550123',
          state_change_source: 'api',
        },
        { externalUserId: null },
      ),
      { email: null, phone: '+15555550123', source: 'api', status: 'Unsubscribed', channel: 'sms' },
    ],
    [
      change({
        ...base,
        subscription_status: 'subscribed',
        channel: 'email',
        email_address: AWKWARD,
        state_change_source: 'api',
      }),
      { email: AWKWARD, phone: null, source: 'api', status: 'Subscribed', channel: 'email' },
    ],
  ];
  return cases.map(([event, c]) => ({
    event,
    expected: {
      id: event.id,
      user_id: '6650f1c0a2b3c4d5e6f7a801',
      external_user_id: event.externalUserId,
      email_address: c.email!,
      phone_number: c.phone!,
      state_change_source: c.source!,
      subscription_group_id: GROUP,
      subscription_status: c.status!,
      channel: c.channel!,
      time: TIME_S,
      timezone: null,
      app_group_id: WORKSPACE,
      app_id: null,
      campaign_id: null,
      campaign_name: null,
      message_variation_id: null,
      message_variation_name: null,
      canvas_id: null,
      canvas_name: null,
      canvas_variation_id: null,
      canvas_variation_name: null,
      canvas_step_id: null,
      canvas_step_name: null,
      send_id: null,
      dispatch_id: null,
      channel_identifier: c.channel === 'sms' ? c.phone! : c.email!,
    },
  }));
}

function uninstalls(): Fixture[] {
  const full = logged('users.behaviors.Uninstall', { appId: 'android-app', data: NONE });
  // Currents requires app_id: '' when the uninstall names no app.
  const bare = logged('users.behaviors.Uninstall', { appId: null, externalUserId: null, data: NONE });
  const record = (e: LoggedEvent, externalUserId: string | null, appId: string): Expected => ({
    id: e.id,
    user_id: '6650f1c0a2b3c4d5e6f7a801',
    external_user_id: externalUserId,
    device_id: null,
    app_id: appId,
    time: TIME_S,
    app_group_id: WORKSPACE,
  });
  return [
    { event: full, expected: record(full, 'user-1', 'android-app') },
    { event: bare, expected: record(bare, null, '') },
  ];
}

function canvasEntries(): Fixture[] {
  const full = logged('users.canvas.Entry', {
    data: { canvas_id: 'cv-1', canvas_name: AWKWARD, canvas_variation_id: 'var-1', in_control_group: false },
  });
  // Currents requires canvas_variation_id: '' for a canvas without variations.
  const bare = logged('users.canvas.Entry', {
    externalUserId: null,
    data: { canvas_id: 'cv-2', canvas_name: null, canvas_variation_id: null, in_control_group: true },
  });
  const record = (e: LoggedEvent, over: Expected): Expected => ({
    id: e.id,
    user_id: '6650f1c0a2b3c4d5e6f7a801',
    external_user_id: e.externalUserId,
    time: TIME_S,
    timezone: null,
    canvas_id: over.canvas_id!,
    canvas_name: over.canvas_name!,
    canvas_variation_id: over.canvas_variation_id!,
    canvas_variation_name: null,
    canvas_step_id: null,
    canvas_step_name: null,
    in_control_group: over.in_control_group!,
    app_group_id: WORKSPACE,
  });
  return [
    {
      event: full,
      expected: record(full, {
        canvas_id: 'cv-1',
        canvas_name: AWKWARD,
        canvas_variation_id: 'var-1',
        in_control_group: false,
      }),
    },
    {
      event: bare,
      expected: record(bare, { canvas_id: 'cv-2', canvas_name: null, canvas_variation_id: '', in_control_group: true }),
    },
  ];
}

function deletions(): Fixture[] {
  const full = logged('users.Deleted', { appId: null, data: NONE });
  const bare = logged('users.Deleted', { appId: null, externalUserId: null, data: NONE });
  const record = (e: LoggedEvent): Expected => ({
    id: e.id,
    user_id: '6650f1c0a2b3c4d5e6f7a801',
    external_user_id: e.externalUserId,
    time: TIME_S,
    app_group_id: WORKSPACE,
  });
  return [full, bare].map((event) => ({ event, expected: record(event) }));
}

function merges(): Fixture[] {
  const full = logged('users.Merged', {
    appId: null,
    data: { merged_user_id: '6650f1c0a2b3c4d5e6f7a802', merged_external_user_id: 'user-2' },
  });
  const bare = logged('users.Merged', {
    appId: null,
    externalUserId: null,
    data: { merged_user_id: '6650f1c0a2b3c4d5e6f7a803', merged_external_user_id: null },
  });
  const record = (e: LoggedEvent): Expected => {
    const data = e.data as EventData['users.Merged'];
    return {
      id: e.id,
      user_id: '6650f1c0a2b3c4d5e6f7a801',
      external_user_id: e.externalUserId,
      merged_user_id: data.merged_user_id,
      merged_external_user_id: data.merged_external_user_id,
      time: TIME_S,
      app_group_id: WORKSPACE,
    };
  };
  return [full, bare].map((event) => ({ event, expected: record(event) }));
}

function pick(o: Expected, keys: string[]): Expected {
  if (keys.length !== Object.keys(o).length) throw new Error('pick: the key list does not cover the record');
  return Object.fromEntries(keys.map((k) => [k, o[k]!]));
}

// What each format holds for a record of the Avro view (time in Unix seconds, properties as JSON text).
const isoOf = (seconds: number) => new Date(seconds * 1000).toISOString().replace('.000Z', 'Z');
/** As avsc reads it: Currents' price is a 32-bit float. */
export const asAvro = (e: Expected): Expected =>
  typeof e.price === 'number' ? { ...e, price: Math.fround(e.price) } : e;
/** As JSON.parse reads an NDJSON line: time in RFC 3339, properties an object. */
export const asNdjson = (e: Expected): Record<string, unknown> => ({
  ...e,
  time: isoOf(e.time as number),
  ...('properties' in e ? { properties: JSON.parse(e.properties as string) } : {}),
});
/** As DuckDB's read_parquet gives it: time an instant, quantity a BIGINT. */
export const asParquet = (e: Expected): Record<string, unknown> => ({
  ...e,
  time: new Date((e.time as number) * 1000),
  ...('quantity' in e ? { quantity: e.quantity === null ? null : BigInt(e.quantity) } : {}),
});

/** Each type's fixtures: one with every field the log fills, and ones with the nullable ones null. */
export const FIXTURES: Record<EventType, Fixture[]> = {
  'users.behaviors.CustomEvent': customEvents(),
  'users.behaviors.Purchase': purchases(),
  'users.behaviors.subscription.GlobalStateChange': stateChanges(),
  'users.behaviors.subscriptiongroup.StateChange': groupStateChanges(),
  'users.behaviors.Uninstall': uninstalls(),
  'users.canvas.Entry': canvasEntries(),
  'users.Deleted': deletions(),
  'users.Merged': merges(),
};
