import { z } from 'zod';
import { isNonPublicAddress, urlHost } from '../../../platform/lib/ip-address.js';
import { EXPORT_LAYOUTS, OUTPUT_FORMATS } from '../key-layout.js';

/** The names the spec allows in fields_to_export. */
export const SPEC_EXPORT_FIELDS = [
  'apps',
  'attributed_campaign',
  'attributed_source',
  'attributed_adgroup',
  'attributed_ad',
  'service_id',
  'country',
  'created_at',
  'custom_attributes',
  'custom_events',
  'devices',
  'dob',
  'email',
  'external_id',
  'first_name',
  'gender',
  'home_city',
  'language',
  'last_coordinates',
  'last_name',
  'phone',
  'purchases',
  'push_tokens',
  'random_bucket',
  'time_zone',
  'total_revenue',
  'uninstalled_at',
  'user_aliases',
] as const;

/**
 * Fields of the spec's "User export record" that its fields_to_export list leaves out. We accept them too, so that
 * the record's documented fields (and the 90-day window rule of campaigns_received and canvases_received) can be
 * exported; see docs/export.md.
 */
export const EXTRA_EXPORT_FIELDS = [
  'campaigns_received',
  'canvases_received',
  'cards_clicked',
  'push_subscribe',
  'email_subscribe',
  'push_opted_in_at',
  // The user's state in each subscription group (docs/subscription-groups.md), beyond the spec's record.
  'subscription_groups',
] as const;

export const EXPORT_FIELDS = [...SPEC_EXPORT_FIELDS, ...EXTRA_EXPORT_FIELDS] as const;
export type ExportField = (typeof EXPORT_FIELDS)[number];
const FIELD_SET: ReadonlySet<string> = new Set(EXPORT_FIELDS);

export const MAX_CUSTOM_ATTRIBUTES_TO_EXPORT = 500;
/** Bounds of the rows_per_part extension: below the lower one a large segment makes a flood of tiny files. */
export const MIN_ROWS_PER_PART = 1_000;
export const MAX_ROWS_PER_PART = 1_000_000;
/** Bounds of the part_target_mb extension, in MiB of the compressed part (Snowflake advises files of 100-250 MB). */
export const MIN_PART_TARGET_MB = 16;
export const MAX_PART_TARGET_MB = 1_024;

function httpUrl(value: string): URL | null {
  try {
    const url = new URL(value);
    return url.protocol === 'http:' || url.protocol === 'https:' ? url : null;
  } catch {
    return null;
  }
}

/** The body of POST /users/export/segment. An unknown key is refused for every body (src/platform/http/body-keys.ts). */
export const ExportRequestSchema = z.object({
  segment_id: z
    .string({ error: 'segment_id is required and must be a string' })
    .min(1, 'segment_id must not be empty')
    .max(255, 'segment_id is at most 255 characters'),
  callback_endpoint: z
    .string({ error: 'callback_endpoint must be a string (an http or https URL)' })
    .max(2048, 'callback_endpoint is at most 2048 characters')
    .refine((v) => httpUrl(v) !== null, 'callback_endpoint must be an http or https URL')
    .nullish(),
  fields_to_export: z
    .array(z.string({ error: 'fields_to_export must be an array of strings' }), {
      error: 'fields_to_export is required: a non-empty array of field names',
    })
    .min(1, 'fields_to_export must name at least one field')
    .max(EXPORT_FIELDS.length * 2, 'fields_to_export names too many fields')
    .superRefine((fields, ctx) => {
      const unknown = [...new Set(fields.filter((f) => !FIELD_SET.has(f)))];
      if (unknown.length > 0) {
        ctx.addIssue({
          code: 'custom',
          message: `unknown field${unknown.length > 1 ? 's' : ''} in fields_to_export: ${unknown.slice(0, 20).join(', ')} (allowed: ${EXPORT_FIELDS.join(', ')})`,
        });
      }
    })
    .describe(`Fields of each exported user, from: ${EXPORT_FIELDS.join(', ')}`),
  custom_attributes_to_export: z
    .array(
      z
        .string({ error: 'custom_attributes_to_export must be an array of strings' })
        .min(1, 'custom attribute names must not be empty')
        .max(255),
      { error: 'custom_attributes_to_export must be an array of strings' },
    )
    .max(
      MAX_CUSTOM_ATTRIBUTES_TO_EXPORT,
      `custom_attributes_to_export may name at most ${MAX_CUSTOM_ATTRIBUTES_TO_EXPORT} custom attributes`,
    )
    .nullish(),
  output_format: z
    .enum(OUTPUT_FORMATS, { error: "output_format must be 'zip', 'gzip' or 'parquet'" })
    .nullish()
    .describe(
      'zip (the default) or gzip: NDJSON parts; parquet (an extension): one typed Parquet file per part (docs/export.md#parquet)',
    ),
  rows_per_part: z
    .number({ error: `rows_per_part must be a whole number from ${MIN_ROWS_PER_PART} to ${MAX_ROWS_PER_PART}` })
    .int(`rows_per_part must be a whole number from ${MIN_ROWS_PER_PART} to ${MAX_ROWS_PER_PART}`)
    .min(MIN_ROWS_PER_PART, `rows_per_part must be at least ${MIN_ROWS_PER_PART}`)
    .max(MAX_ROWS_PER_PART, `rows_per_part must be at most ${MAX_ROWS_PER_PART}`)
    .nullish()
    .describe(
      `Extension: lines per part, ${MIN_ROWS_PER_PART} to ${MAX_ROWS_PER_PART}, for warehouses that prefer fewer, larger files. Without it, parts hold the spec's 5,000 lines and only the export's last part is short; with it, the last part of each shard may be short.`,
    ),
  part_target_mb: z
    .number({ error: `part_target_mb must be a whole number from ${MIN_PART_TARGET_MB} to ${MAX_PART_TARGET_MB}` })
    .int(`part_target_mb must be a whole number from ${MIN_PART_TARGET_MB} to ${MAX_PART_TARGET_MB}`)
    .min(MIN_PART_TARGET_MB, `part_target_mb must be at least ${MIN_PART_TARGET_MB}`)
    .max(MAX_PART_TARGET_MB, `part_target_mb must be at most ${MAX_PART_TARGET_MB}`)
    .nullish()
    .describe(
      `Extension, the alternative to rows_per_part: parts cut by size, each about this many MiB compressed (${MIN_PART_TARGET_MB} to ${MAX_PART_TARGET_MB}; within 10%, but the last part of each shard), for loaders that want files of a given size (Snowflake: 100-250 MB). gzip and zip only.`,
    ),
  layout: z
    .enum(EXPORT_LAYOUTS, { error: "layout must be 'spec' or 'hive'" })
    .nullish()
    .describe(
      "Extension: 'hive' writes the files under segment_id=<id>/export_date=<YYYY-MM-DD>/export_id=<object_prefix>/part-<NNNNN>.<ext>, so a segment's prefix reads as one partitioned table (DuckDB hive_partitioning, Spark, BigQuery external tables); 'spec' (the default) is the spec's layout (docs/export.md#where-the-files-go).",
    ),
  changes_since: z
    .string({ error: 'changes_since must be a string: the object_prefix of an earlier ready export of this segment' })
    .min(1, 'changes_since must not be empty')
    .max(255, 'changes_since is at most 255 characters')
    .nullish()
    .describe(
      'Extension: the object_prefix of an earlier ready export of the same segment. The export then holds only the members that changed or joined since that export read them, plus removed-* parts naming those that left the segment or were deleted (docs/export.md#incremental-exports).',
    ),
});
export type ExportRequestBody = z.infer<typeof ExportRequestSchema>;

/**
 * Whether these fields let an incremental export's lines be matched to rows loaded before (external_id or
 * service_id): applying a delta needs a key, so an incremental export (or schedule) without one is refused.
 */
export const hasIncrementalKey = (fields: readonly string[]) =>
  fields.includes('external_id') || fields.includes('service_id');

/**
 * Why these part settings cannot go together, or null: rows_per_part and part_target_mb are alternatives, and a
 * Parquet part's size is known only once DuckDB has written it, so it cannot be cut by size while it is read.
 */
export function partSizingRefusal(s: {
  rows_per_part?: number | null;
  part_target_mb?: number | null;
  output_format?: string | null;
}): string | null {
  if (s.part_target_mb == null) return null;
  if (s.rows_per_part != null) return 'rows_per_part and part_target_mb are alternatives: give at most one';
  if (s.output_format === 'parquet')
    return 'part_target_mb applies to gzip and zip exports: a Parquet part is cut by rows_per_part';
  return null;
}

/** What an export job needs of the request, normalised (stored in exports.request). */
export const ExportSpecSchema = z.object({
  fields: z.array(z.enum(EXPORT_FIELDS)).min(1),
  customAttributes: z.array(z.string()).nullable(),
  outputFormat: z.enum(OUTPUT_FORMATS),
  callbackEndpoint: z.string().nullable(),
  /** Null: the spec's 5,000-line parts (exports recorded before this was kept have none). */
  rowsPerPart: z.number().int().nullable().default(null),
  /** Parts cut by compressed size instead (MiB); null: by lines. */
  partTargetMb: z.number().int().nullable().default(null),
  /** The key layout; exports recorded before layouts existed have the spec's. */
  layout: z.enum(EXPORT_LAYOUTS).default('spec'),
  /** The export this one is relative to (changes_since), resolved when requested; null for a full export. */
  changesSince: z.object({ exportId: z.string(), objectPrefix: z.string() }).nullable().default(null),
});
export type ExportSpec = z.infer<typeof ExportSpecSchema>;

export function normaliseRequest(body: ExportRequestBody): ExportSpec {
  return {
    fields: [...new Set(body.fields_to_export)] as ExportField[],
    customAttributes: body.custom_attributes_to_export?.length ? [...new Set(body.custom_attributes_to_export)] : null,
    outputFormat: body.output_format ?? 'zip',
    callbackEndpoint: body.callback_endpoint ?? null,
    rowsPerPart: body.rows_per_part ?? null,
    partTargetMb: body.part_target_mb ?? null,
    layout: body.layout ?? 'spec',
    // Resolved against the database by createExport.
    changesSince: null,
  };
}

/** Who the operator lets callbacks reach (from CALLBACK_ALLOW_PRIVATE and CALLBACK_ALLOWED_HOSTS). */
export interface CallbackPolicy {
  allowPrivate: boolean;
  allowedHosts: ReadonlySet<string>;
}

export function callbackPolicy(config: {
  CALLBACK_ALLOW_PRIVATE: boolean;
  CALLBACK_ALLOWED_HOSTS: string;
}): CallbackPolicy {
  return {
    allowPrivate: config.CALLBACK_ALLOW_PRIVATE,
    allowedHosts: new Set(
      config.CALLBACK_ALLOWED_HOSTS.split(',')
        .map((h) => h.trim().toLowerCase())
        .filter(Boolean),
    ),
  };
}

/**
 * True for an IP literal outside public unicast space, in any spelling: loopback, private, link-local, unique-local,
 * CGNAT, documentation, multicast, unspecified, and IPv6 forms carrying such an IPv4 address (see
 * src/platform/lib/ip-address.ts).
 */
export function isPrivateAddress(address: string): boolean {
  return isNonPublicAddress(address);
}

/**
 * Refusal reason when a callback URL names a host the operator does not allow, judged from the URL alone (literal
 * addresses in any spelling, localhost and *.localhost); names are checked again against what they resolve to, and
 * the address connected to once more, when the callback is sent.
 */
export function callbackRefusal(endpoint: string, policy: CallbackPolicy): string | null {
  const url = httpUrl(endpoint);
  if (!url) return 'callback_endpoint must be an http or https URL';
  if (url.username || url.password) return 'callback_endpoint must not carry credentials';
  const host = urlHost(url);
  if (policy.allowPrivate || policy.allowedHosts.has(host)) return null;
  if (host === 'localhost' || host.endsWith('.localhost') || isPrivateAddress(host)) {
    return `callback_endpoint ${url.hostname} is a private or loopback address, which this service does not call back`;
  }
  return null;
}
