import type { ExportField } from '../request/request-body.js';

/**
 * The typed columns of a Parquet part. The shapes of the nested values are the spec's "User export record" as this
 * service stores them (src/platform/db/migrations/0001_core.sql, src/features/synthetic-users/,
 * src/features/canvases/fire.ts) and src/pipelines/exports/shard/line-query.ts prints them.
 */

/** A leaf type. `timestamp` is TIMESTAMP(isAdjustedToUTC) and `json` a string column holding a JSON text. */
export type ParquetScalar = 'string' | 'int64' | 'double' | 'boolean' | 'timestamp' | 'date' | 'json';
export type ParquetType = ParquetScalar | { list: ParquetType } | { struct: ParquetColumns } | { map: ParquetScalar };
/** One column or struct member; every one is nullable (an export line omits what is absent). */
export interface ParquetColumn {
  name: string;
  type: ParquetType;
}
/** Columns of a Parquet part, in order. */
export type ParquetColumns = readonly ParquetColumn[];

const struct = (members: Record<string, ParquetType>): ParquetType => ({
  struct: Object.entries(members).map(([name, type]) => ({ name, type })),
});
const listOf = (members: Record<string, ParquetType>): ParquetType => ({ list: struct(members) });

/** custom_events and purchases: `first` and `last` over all history (first) and the window (last). */
const HISTORY = listOf({ name: 'string', first: 'timestamp', last: 'timestamp', count: 'int64' });

/** The type of each export field. Nested keys not named here are dropped from the Parquet file. */
export const FIELD_TYPES: Record<ExportField, ParquetType> = {
  apps: listOf({
    name: 'string',
    platform: 'string',
    version: 'string',
    sessions: 'int64',
    first_used: 'timestamp',
    last_used: 'timestamp',
  }),
  attributed_campaign: 'string',
  attributed_source: 'string',
  attributed_adgroup: 'string',
  attributed_ad: 'string',
  service_id: 'string',
  country: 'string',
  created_at: 'timestamp',
  custom_attributes: 'json',
  custom_events: HISTORY,
  devices: listOf({
    model: 'string',
    os: 'string',
    carrier: 'string',
    idfv: 'string',
    idfa: 'string',
    device_id: 'string',
    store_ad_id: 'string',
    tv_ad_id: 'string',
    ad_tracking_enabled: 'boolean',
  }),
  dob: 'date',
  email: 'string',
  external_id: 'string',
  first_name: 'string',
  gender: 'string',
  home_city: 'string',
  language: 'string',
  // [longitude, latitude]
  last_coordinates: { list: 'double' },
  last_name: 'string',
  phone: 'string',
  purchases: HISTORY,
  push_tokens: listOf({
    app: 'string',
    platform: 'string',
    token: 'string',
    device_id: 'string',
    notifications_enabled: 'boolean',
  }),
  random_bucket: 'int64',
  time_zone: 'string',
  total_revenue: 'double',
  uninstalled_at: 'timestamp',
  user_aliases: listOf({ alias_name: 'string', alias_label: 'string' }),
  campaigns_received: listOf({
    name: 'string',
    api_campaign_id: 'string',
    last_received: 'timestamp',
    engaged: struct({
      opened_email: 'boolean',
      opened_push: 'boolean',
      clicked_email: 'boolean',
      clicked_triggered_in_app_message: 'boolean',
    }),
    converted: 'boolean',
    // Keyed by conversion-event name, which each campaign defines: a MAP, not a struct.
    multiple_converted: { map: 'boolean' },
    variation_name: 'string',
    variation_api_id: 'string',
    in_control: 'boolean',
  }),
  canvases_received: listOf({
    name: 'string',
    api_canvas_id: 'string',
    last_received_message: 'timestamp',
    last_entered: 'timestamp',
    variation_name: 'string',
    in_control: 'boolean',
    last_entered_control_at: 'timestamp',
    last_exited: 'timestamp',
    steps_received: listOf({ name: 'string', api_canvas_step_id: 'string', last_received: 'timestamp' }),
  }),
  cards_clicked: listOf({ name: 'string' }),
  push_subscribe: 'string',
  email_subscribe: 'string',
  push_opted_in_at: 'timestamp',
  subscription_groups: listOf({ subscription_group_id: 'string', subscription_state: 'string' }),
};

/**
 * The typed columns of a users part for these export fields (in the request's order; custom_attributes appended when
 * customAttributes is set and the field was not requested, exactly as src/pipelines/exports/shard/line-query.ts
 * exportLineSelect does).
 */
export function usersParquetColumns(spec: {
  fields: readonly ExportField[];
  customAttributes: string[] | null;
}): ParquetColumns {
  const fields =
    spec.customAttributes && !spec.fields.includes('custom_attributes')
      ? [...spec.fields, 'custom_attributes' as const]
      : spec.fields;
  return [...new Set(fields)].map((name) => ({ name, type: FIELD_TYPES[name] }));
}

/** The columns of a `removed-` part: external_id (string, nullable), service_id (string). */
export const REMOVED_PARQUET_COLUMNS: ParquetColumns = [
  { name: 'external_id', type: 'string' },
  { name: 'service_id', type: 'string' },
];
