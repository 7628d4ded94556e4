import { z } from 'zod';
import type { CdiSchedule, CdiSource } from '../../pipelines/cdi/integrations.js';
import { EVENT_EXPORT_FORMATS } from '../../pipelines/events/event-exports.js';
import { EVENT_TYPES } from '../../profiles/event-log-types.js';
import { EXPORT_LAYOUTS, OUTPUT_FORMATS } from '../../pipelines/exports/key-layout.js';
import {
  EXPORT_FIELDS,
  hasIncrementalKey,
  MAX_PART_TARGET_MB,
  MAX_ROWS_PER_PART,
  MIN_PART_TARGET_MB,
  MIN_ROWS_PER_PART,
  partSizingRefusal,
} from '../../pipelines/exports/request/request-body.js';
import { isPermission, PERMISSIONS } from '../../platform/auth/permissions.js';
import { Permissions as ScimPermissionsBody } from '../scim/schemas.js';
import { SegmentFilterSchema } from '../../profiles/segments/filter.js';
import { Destination } from '../../platform/storage/destination.js';

/**
 * The declarative workspace file (`ces workspace apply FILE`, JSON or YAML): one company, its SCIM tokens and
 * permission sets, and its workspaces with everything they hold. Every object is strict, so a misspelt key is an
 * error naming its path rather than a silently ignored setting. docs/workspace.md documents every key.
 */

export const APP_PLATFORMS = [
  'ios',
  'android',
  'web',
  'tvos',
  'android_tv',
  'roku',
  'kindle',
  'windows',
  'macos',
  'unity',
] as const;
export const CATALOG_FIELD_TYPES = ['string', 'number', 'boolean', 'time', 'object', 'array'] as const;
export const LIVE_ACTIVITY_VALUE_TYPES = ['string', 'number', 'boolean', 'object', 'array'] as const;

const MAX_ITEMS = 10_000;

const Name = z.string().trim().min(1, 'must not be empty').max(255, 'must be at most 255 characters');
/** Identifiers the API exposes (segment, canvas, card, preference center ids): no spaces, so they survive URLs. */
const ApiId = z
  .string()
  .min(1, 'must not be empty')
  .max(255, 'must be at most 255 characters')
  .regex(/^[A-Za-z0-9._:~-]+$/, 'may contain only letters, digits and . _ : ~ -');
const CatalogName = z
  .string()
  .min(1, 'must not be empty')
  .max(250, 'must be at most 250 characters')
  .regex(/^[A-Za-z0-9_-]+$/, 'may contain only letters, digits, hyphens and underscores');
const Tag = Name;
const Tags = z.array(Tag).max(100).default([]);
const IsoTime = z.iso.datetime({ offset: true, error: 'must be an ISO 8601 date-time, e.g. 2026-01-31T09:00:00Z' });
const Secret = z
  .string()
  .min(20, 'must be at least 20 characters')
  .max(200, 'must be at most 200 characters')
  .regex(/^[\x21-\x7e]+$/, 'must be printable ASCII without spaces (it travels in an Authorization header)');
const E164 = z.string().regex(/^\+[1-9]\d{6,14}$/, 'must be an E.164 phone number, e.g. +14155550100');

const RELATIVE_TIME = /^today(?:-(\d{1,4})d)?(?:T([01]\d|2[0-3]):([0-5]\d)(?::([0-5]\d))?Z?)?$/;
/**
 * A record's time: an ISO 8601 date-time, or `today`, `today-3d`, `today-3dT14:30` (UTC, relative to the day the
 * file is applied), so that demo data stays recent.
 */
const RecordTime = z.string().refine((v) => RELATIVE_TIME.test(v) || IsoTime.safeParse(v).success, {
  error: 'must be an ISO 8601 date-time or today[-<days>d][T<HH:MM>]',
});

/** Resolves a record time (see RecordTime) to an ISO string, relative times against `now`'s UTC day. */
export function resolveRecordTime(value: string, now: Date): string {
  const m = RELATIVE_TIME.exec(value);
  if (!m) return new Date(value).toISOString();
  const day = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate());
  const [days, hours, minutes, seconds] = [m[1], m[2], m[3], m[4]].map((x) => Number(x ?? 0)) as [
    number,
    number,
    number,
    number,
  ];
  return new Date(day - days * 86_400_000 + ((hours * 60 + minutes) * 60 + seconds) * 1000).toISOString();
}

const Permission = z.string().superRefine((v, ctx) => {
  if (!isPermission(v)) ctx.addIssue({ code: 'custom', message: `unknown permission "${v}"` });
});

const Cron = z
  .string()
  .trim()
  .refine((v) => /^(\S+\s+){4}\S+$/.test(v) || /^(\S+\s+){5}\S+$/.test(v), {
    error: 'must be a cron expression of 5 fields (minute hour day month weekday) or 6 (with seconds first)',
  });
const TimeZone = z.string().refine(
  (tz) => {
    try {
      new Intl.DateTimeFormat('en-US', { timeZone: tz });
      return true;
    } catch {
      return false;
    }
  },
  { error: 'must be an IANA time zone, e.g. Europe/Paris' },
);

const JsonObject = z.record(z.string(), z.unknown());

export const AppSchema = z.strictObject({
  name: Name,
  /** The id clients send as app_id; generated on first apply when not given. */
  api_id: ApiId.optional(),
  platform: z.enum(APP_PLATFORMS),
});

export const ApiKeySchema = z.strictObject({
  name: Name,
  /** Stored hashed; without it a secret is generated once, when the key is created, and printed. */
  secret: Secret.optional(),
  /** Permission strings, or `all` for every permission this version knows (re-applying picks up new ones). */
  permissions: z
    .union([z.literal('all'), z.array(Permission).max(200)])
    .default([])
    .transform((p): string[] => (p === 'all' ? [...PERMISSIONS] : p)),
});

export const ScimTokenSchema = z.strictObject({ name: Name, secret: Secret.optional() });

export const SegmentSchema = z.strictObject({
  id: ApiId,
  name: Name,
  tags: Tags,
  analytics_tracking_enabled: z.boolean().default(false),
  archived: z.boolean().default(false),
  filter: SegmentFilterSchema.default({ all: [] }),
  created_at: IsoTime.optional(),
  /** What the segment is for, in words: `text_description` of GET /segments/details. */
  description: z.string().max(10_000).optional(),
  /** Names of teams of this workspace (its `teams` list): `teams` of GET /segments/details. */
  teams: z.array(Name).max(100).default([]),
});

/** The data types GET /custom_attributes answers (the public API's). */
export const CUSTOM_ATTRIBUTE_TYPES = [
  'String',
  'Number',
  'Boolean',
  'Time',
  'Array',
  'Array of objects',
  'Object',
] as const;

/** A custom attribute as GET /custom_attributes describes it; declaring one writes nothing on profiles. */
export const CustomAttributeSchema = z.strictObject({
  name: Name,
  /** Absent: the type most of the profiles' values have. */
  data_type: z.enum(CUSTOM_ATTRIBUTE_TYPES).optional(),
  description: z.string().max(10_000).optional(),
  tags: Tags,
});

export const CatalogSchema = z.strictObject({
  name: CatalogName,
  description: z.string().max(1000).optional(),
  fields: z
    .array(
      z.strictObject({
        name: CatalogName.refine((n) => n !== 'id', { error: '"id" is implicit in every catalog; do not declare it' }),
        type: z.enum(CATALOG_FIELD_TYPES),
      }),
    )
    .max(500)
    .default([]),
});

const UserAlias = z.strictObject({ alias_name: Name, alias_label: Name });
const Recipient = z.strictObject({
  external_user_id: Name.optional(),
  user_alias: UserAlias.optional(),
  trigger_properties: JsonObject.optional(),
  canvas_entry_properties: JsonObject.optional(),
  send_to_existing_only: z.boolean().optional(),
  attributes: JsonObject.optional(),
});

export const CanvasScheduleSchema = z.strictObject({
  /** Without one, an id derived from the workspace, canvas and position is used, so re-applying updates it. */
  schedule_id: ApiId.optional(),
  schedule: z.strictObject({
    time: IsoTime,
    in_local_time: z.boolean().default(false),
    at_optimal_time: z.boolean().optional(),
  }),
  trigger_properties: JsonObject.optional(),
  canvas_entry_properties: JsonObject.optional(),
  /** Send to the canvas's whole audience rather than to `recipients`. */
  broadcast: z.boolean().default(false),
  recipients: z.array(Recipient).max(50).optional(),
  audience: JsonObject.optional(),
});

export const CanvasSchema = z.strictObject({
  id: ApiId,
  name: Name,
  tags: Tags,
  status: z.enum(['draft', 'active', 'stopped']).default('active'),
  archived: z.boolean().default(false),
  created_at: IsoTime.optional(),
  last_edited: IsoTime.optional(),
  schedules: z.array(CanvasScheduleSchema).max(100).default([]),
});

export const FeedCardSchema = z.strictObject({
  id: ApiId,
  type: z.enum(['NewsItem', 'CaptionedImage', 'Banner']),
  title: Name,
  tags: Tags,
  archived: z.boolean().default(false),
  created_at: IsoTime.optional(),
});

/**
 * A preference center. The fields it leaves out keep what the API gave them (PUT /preference_center/v1/{id}); a new
 * center gets empty pages, `active` and no options (docs/preference-centers.md).
 */
export const PreferenceCenterSchema = z.strictObject({
  id: ApiId,
  name: Name,
  title: z.string().max(1000).optional(),
  page_html: z.string().max(500_000).optional(),
  confirmation_page_html: z.string().max(500_000).optional(),
  redirect_page_html: z.string().max(500_000).optional(),
  options: z.strictObject({ 'meta-viewport-content': z.string().max(1000).optional() }).default({}),
  state: z.string().min(1).max(50).optional(),
  created_at: IsoTime.optional(),
});

export const LiveActivitySchema = z.strictObject({
  /** The app's name or api id, in this workspace. */
  app: Name,
  activity_id: Name,
  content_state_shape: z.record(Name, z.enum(LIVE_ACTIVITY_VALUE_TYPES)).default({}),
});

const RowsPerPart = z
  .number({ error: `must be a whole number from ${MIN_ROWS_PER_PART} to ${MAX_ROWS_PER_PART}` })
  .int(`must be a whole number from ${MIN_ROWS_PER_PART} to ${MAX_ROWS_PER_PART}`)
  .min(MIN_ROWS_PER_PART, `must be at least ${MIN_ROWS_PER_PART}`)
  .max(MAX_ROWS_PER_PART, `must be at most ${MAX_ROWS_PER_PART}`);

const PartTargetMb = z
  .number({ error: `must be a whole number from ${MIN_PART_TARGET_MB} to ${MAX_PART_TARGET_MB}` })
  .int(`must be a whole number from ${MIN_PART_TARGET_MB} to ${MAX_PART_TARGET_MB}`)
  .min(MIN_PART_TARGET_MB, `must be at least ${MIN_PART_TARGET_MB}`)
  .max(MAX_PART_TARGET_MB, `must be at most ${MAX_PART_TARGET_MB}`);

export const ScheduledExportSchema = z
  .strictObject({
    name: Name,
    /** The segment's api id, in this workspace. */
    segment: ApiId,
    cron: Cron,
    time_zone: TimeZone.default('UTC'),
    fields_to_export: z.array(z.enum(EXPORT_FIELDS)).min(1, 'must list at least one field'),
    custom_attributes_to_export: z.array(Name).max(500).optional(),
    output_format: z.enum(OUTPUT_FORMATS).default('zip'),
    /** Lines per part; absent: the spec's 5,000. */
    rows_per_part: RowsPerPart.optional(),
    /** Parts cut by compressed size (MiB), the alternative to rows_per_part; gzip and zip. */
    part_target_mb: PartTargetMb.optional(),
    /** hive: keys partitioned as segment_id=/export_date=/export_id= (docs/export.md); spec: the spec's layout. */
    layout: z.enum(EXPORT_LAYOUTS).default('spec'),
    /** incremental: each run holds the changes since the schedule's last ready run (changes_since); the first is full. */
    mode: z.enum(['full', 'incremental']).default('full'),
    callback_endpoint: z.url({ protocol: /^https?$/, error: 'must be an http(s) URL' }).optional(),
    enabled: z.boolean().default(true),
  })
  .superRefine((s, ctx) => {
    // The API would refuse every run of these; refuse the declaration instead.
    const sizing = partSizingRefusal(s);
    if (sizing) ctx.addIssue({ code: 'custom', path: ['part_target_mb'], message: sizing });
    // The API refuses such a run (changes_since without a key); refuse the declaration rather than every run.
    if (s.mode === 'incremental' && !hasIncrementalKey(s.fields_to_export)) {
      ctx.addIssue({
        code: 'custom',
        path: ['fields_to_export'],
        message:
          'an incremental schedule (mode: incremental) must export external_id or service_id, so that its lines can be matched to the rows loaded before',
      });
    }
  });

/** A name the service reads from its own environment when a sync runs (the connection string is never in the file). */
const EnvName = z
  .string()
  .regex(
    /^[A-Z_][A-Z0-9_]{0,127}$/,
    'must be an environment variable name (A-Z, 0-9 and _, not starting with a digit)',
  );
/** `[schema.]table`, plain identifiers only: the name goes into SQL (quoted) and must be unambiguous. */
const SqlTable = z
  .string()
  .max(127, 'must be at most 127 characters')
  .regex(
    /^([A-Za-z_][A-Za-z0-9_$]*\.)?[A-Za-z_][A-Za-z0-9_$]*$/,
    'must be a table name, [schema.]table, of letters, digits, _ and $',
  );
/** A key prefix in the workspace's store: relative, no empty, `.` or `..` segments. */
const KeyPrefix = z
  .string()
  .min(1, 'must not be empty')
  .max(512, 'must be at most 512 characters')
  .refine(
    (p) =>
      !p.startsWith('/') &&
      p
        .split('/')
        .slice(0, -1)
        .every((seg) => seg !== '' && seg !== '.' && seg !== '..') &&
      !/[\u0000-\u001f\\]/.test(p),
    {
      error: "must be a relative key prefix without empty, '.' or '..' segments, backslashes or control characters",
    },
  );

export const CdiIntegrationSchema = z.strictObject({
  /** A UUID, as the public API's integration ids are: the natural key, stable across applies. */
  id: z.uuid({ error: 'must be a UUID' }).transform((v) => v.toLowerCase()),
  name: Name,
  source: z.discriminatedUnion(
    'type',
    [
      z.strictObject({ type: z.literal('postgres'), url_env: EnvName, table: SqlTable }),
      z.strictObject({ type: z.literal('bucket'), prefix: KeyPrefix, format: z.enum(['parquet', 'ndjson', 'csv']) }),
    ],
    { error: 'must be {type: postgres, url_env, table} or {type: bucket, prefix, format: parquet|ndjson|csv}' },
  ) satisfies z.ZodType<CdiSource>,
  /** Absent: on demand only (POST .../sync, `ces cdi sync`). */
  schedule: z
    .union(
      [
        z.strictObject({ every_minutes: z.number().int().min(1).max(44_640) }),
        z.strictObject({ cron: Cron, time_zone: TimeZone.default('UTC') }),
      ],
      {
        error: 'must be {every_minutes: n} or {cron: "...", time_zone}',
      },
    )
    .optional() satisfies z.ZodType<CdiSchedule | undefined>,
});

/** An event export (docs/events.md): the event log delivered to a bucket, one file per type, hour and sequence. */
export const EventExportSchema = z.strictObject({
  /** A UUID, as an integration's: the natural key, stable across applies, and part of the Currents file names. */
  id: z.uuid({ error: 'must be a UUID' }).transform((v) => v.toLowerCase()),
  name: Name,
  /** Absent: the workspace's export destination, else its part of the built-in store. */
  destination: Destination.optional(),
  format: z.enum(EVENT_EXPORT_FORMATS, { error: 'must be avro, parquet or ndjson' }),
  /** Absent: every type. */
  event_types: z.array(z.enum(EVENT_TYPES)).min(1).max(EVENT_TYPES.length).optional(),
  flush_seconds: z.number().int().min(1).max(3600).default(300),
  max_events_per_file: z.number().int().min(1).max(1_000_000).default(15_000),
});

/** A subscription group (docs/subscription-groups.md): users' states in it are set through the API and /users/track. */
export const SubscriptionGroupSchema = z.strictObject({
  /** A UUID, as the public API's group ids are: the natural key, stable across applies, and what the API names. */
  id: z.uuid({ error: 'must be a UUID' }).transform((v) => v.toLowerCase()),
  name: Name,
  channel: z.enum(['email', 'sms'], { error: 'must be email or sms' }),
});

export const RecordsSchema = z.strictObject({
  uninstalls: z
    .array(z.strictObject({ app: Name, at: RecordTime, count: z.number().int().min(1).max(100_000).default(1) }))
    .max(MAX_ITEMS)
    .default([]),
  hard_bounces: z
    .array(z.strictObject({ email: z.email(), at: RecordTime }))
    .max(MAX_ITEMS)
    .default([]),
  invalid_phone_numbers: z
    .array(z.strictObject({ phone: E164, reason: z.enum(['provider_error', 'deactivated']), at: RecordTime }))
    .max(MAX_ITEMS)
    .default([]),
});

export const WorkspaceSchema = z.strictObject({
  name: Name,
  /** Absent: the stored settings stay; given: its keys replace the stored ones, the others stay. */
  settings: z.strictObject({ should_inline_css: z.boolean().optional() }).optional(),
  apps: z.array(AppSchema).max(100).default([]),
  teams: z
    .array(z.strictObject({ name: Name }))
    .max(1000)
    .default([]),
  api_keys: z.array(ApiKeySchema).max(1000).default([]),
  /** Absent: the stored destination stays; null: none, exports go to the built-in local bucket. */
  export_destination: Destination.nullable().optional(),
  tags: z.array(Tag).max(MAX_ITEMS).default([]),
  content_blocks: z
    .array(z.strictObject({ name: Name, content: z.string().max(500_000) }))
    .max(MAX_ITEMS)
    .default([]),
  segments: z.array(SegmentSchema).max(MAX_ITEMS).default([]),
  custom_attributes: z.array(CustomAttributeSchema).max(MAX_ITEMS).default([]),
  catalogs: z.array(CatalogSchema).max(1000).default([]),
  canvases: z.array(CanvasSchema).max(MAX_ITEMS).default([]),
  feed_cards: z.array(FeedCardSchema).max(MAX_ITEMS).default([]),
  preference_centers: z.array(PreferenceCenterSchema).max(1000).default([]),
  live_activities: z.array(LiveActivitySchema).max(MAX_ITEMS).default([]),
  scheduled_exports: z.array(ScheduledExportSchema).max(1000).default([]),
  cdi_integrations: z.array(CdiIntegrationSchema).max(1000).default([]),
  event_exports: z.array(EventExportSchema).max(100).default([]),
  subscription_groups: z.array(SubscriptionGroupSchema).max(450).default([]),
  records: RecordsSchema.optional(),
});

const WorkspaceFileFields = z.strictObject({
  company: z.strictObject({
    name: Name,
    settings: z
      .strictObject({
        /** Extend the built-in SCIM department and permission lists. */
        scim: z
          .strictObject({
            departments: z.array(Name).max(1000).optional(),
            // A plain list extends every level; an object extends each level (company, workspace, team) apart.
            permissions: z
              .union([
                z.array(Name).max(1000),
                z.strictObject({
                  company: z.array(Name).max(1000).optional(),
                  workspace: z.array(Name).max(1000).optional(),
                  team: z.array(Name).max(1000).optional(),
                }),
              ])
              .optional(),
          })
          .optional(),
      })
      // Absent: the stored settings stay (a file naming the company to declare something else must not wipe them).
      .optional(),
  }),
  scim_tokens: z.array(ScimTokenSchema).max(100).default([]),
  permission_sets: z
    .array(z.strictObject({ name: Name, permissions: z.array(Name).max(500).default([]) }))
    .max(1000)
    .default([]),
  /**
   * SCIM groups and the roles they carry (docs/scim.md "Groups"): Okta's Group Push and Entra ID send a group's
   * displayName and members only, so the role of a group the identity provider will push is declared here. The
   * group is created when absent (the provider then finds it by displayName and links it); its members stay the
   * provider's.
   */
  scim_groups: z
    .array(z.strictObject({ display_name: Name, permissions: ScimPermissionsBody }))
    .max(1000)
    .default([]),
  workspaces: z.array(WorkspaceSchema).max(100).default([]),
});

type ParsedFile = z.output<typeof WorkspaceFileFields>;
type Path = (string | number)[];

/**
 * Names, ids and secrets that must be unique: within their list, within their workspace, or across the whole file
 * (and so across the store). Every duplicate is reported, against the index of its first occurrence.
 */
export const WorkspaceFileSchema = WorkspaceFileFields.superRefine((file, ctx) => {
  checkCompanyNames(file, ctx);
  reportDuplicateField(ctx, file.workspaces, 'name', ['workspaces'], 'workspace name');
  checkSecretsAcrossFile(file, ctx);
  checkIdsAcrossWorkspaces(file, ctx);
  file.workspaces.forEach((w, wi) => checkWorkspaceNames(w, wi, ctx));
});

/** Adds an issue for every item whose key an earlier item already had; items without a key are skipped. */
function reportDuplicates<T>(
  ctx: z.RefinementCtx,
  items: T[],
  key: (t: T) => string | undefined,
  path: (i: number) => Path,
  what: string,
): void {
  const seen = new Map<string, number>();
  items.forEach((item, i) => {
    const k = key(item);
    if (k === undefined) return;
    const first = seen.get(k);
    if (first === undefined) seen.set(k, i);
    else
      ctx.addIssue({
        code: 'custom',
        path: path(i),
        message: `duplicate ${what} "${k}" (first at index ${first})`,
      });
  });
}

/** reportDuplicates over one string field of the items, with the issue at `[...listPath, index, field]`. */
function reportDuplicateField<F extends string, T extends Record<F, string>>(
  ctx: z.RefinementCtx,
  items: T[],
  field: F,
  listPath: Path,
  what: string,
): void {
  reportDuplicates(
    ctx,
    items,
    (item) => item[field],
    (i) => [...listPath, i, field],
    what,
  );
}

/** SCIM token names, permission set names and SCIM group display names, each unique in its list. */
function checkCompanyNames(file: ParsedFile, ctx: z.RefinementCtx): void {
  reportDuplicateField(ctx, file.scim_tokens, 'name', ['scim_tokens'], 'SCIM token name');
  reportDuplicateField(ctx, file.permission_sets, 'name', ['permission_sets'], 'permission set name');
  // displayName is unique ignoring letter case, as the SCIM endpoints compare it.
  reportDuplicates(
    ctx,
    file.scim_groups,
    (g) => g.display_name.toLowerCase(),
    (i) => ['scim_groups', i, 'display_name'],
    'SCIM group display_name',
  );
}

/** Secrets are unique across the whole store, so across the whole file too. */
function checkSecretsAcrossFile(file: ParsedFile, ctx: z.RefinementCtx): void {
  const secrets = [
    ...file.scim_tokens.map((t, i) => ({ v: t.secret, path: ['scim_tokens', i, 'secret'] })),
    ...file.workspaces.flatMap((w, wi) =>
      w.api_keys.map((k, ki) => ({ v: k.secret, path: ['workspaces', wi, 'api_keys', ki, 'secret'] })),
    ),
  ];
  const seenSecret = new Set<string>();
  for (const s of secrets) {
    if (s.v === undefined) continue;
    if (seenSecret.has(s.v))
      ctx.addIssue({
        code: 'custom',
        path: s.path,
        message: 'this secret is already used by another key or token in the file',
      });
    seenSecret.add(s.v);
  }
}

/** App ids, canvas schedule ids and CDI integration ids are unique across the store, so across the workspaces. */
function checkIdsAcrossWorkspaces(file: ParsedFile, ctx: z.RefinementCtx): void {
  const appIds = file.workspaces.flatMap((w, wi) =>
    w.apps.map((a, ai) => ({ id: a.api_id, path: ['workspaces', wi, 'apps', ai, 'api_id'] })),
  );
  reportDuplicates(
    ctx,
    appIds,
    (a) => a.id,
    (i) => appIds[i]!.path,
    'app api_id',
  );
  const scheduleIds = file.workspaces.flatMap((w, wi) =>
    w.canvases.flatMap((c, ci) =>
      c.schedules.map((s, si) => ({
        id: s.schedule_id,
        path: ['workspaces', wi, 'canvases', ci, 'schedules', si, 'schedule_id'],
      })),
    ),
  );
  reportDuplicates(
    ctx,
    scheduleIds,
    (s) => s.id,
    (i) => scheduleIds[i]!.path,
    'schedule_id',
  );
  const integrationIds = file.workspaces.flatMap((w, wi) =>
    w.cdi_integrations.map((c, ci) => ({ id: c.id, path: ['workspaces', wi, 'cdi_integrations', ci, 'id'] })),
  );
  reportDuplicates(
    ctx,
    integrationIds,
    (c) => c.id,
    (i) => integrationIds[i]!.path,
    'CDI integration id',
  );
  const eventExportIds = file.workspaces.flatMap((w, wi) =>
    w.event_exports.map((e, ei) => ({ id: e.id, path: ['workspaces', wi, 'event_exports', ei, 'id'] })),
  );
  reportDuplicates(
    ctx,
    eventExportIds,
    (e) => e.id,
    (i) => eventExportIds[i]!.path,
    'event export id',
  );
  const groupIds = file.workspaces.flatMap((w, wi) =>
    w.subscription_groups.map((g, gi) => ({ id: g.id, path: ['workspaces', wi, 'subscription_groups', gi, 'id'] })),
  );
  reportDuplicates(
    ctx,
    groupIds,
    (g) => g.id,
    (i) => groupIds[i]!.path,
    'subscription group id',
  );
}

/** The names and ids unique within one workspace, and the field names within each of its catalogs. */
function checkWorkspaceNames(w: ParsedFile['workspaces'][number], wi: number, ctx: z.RefinementCtx): void {
  const at = (list: string): Path => ['workspaces', wi, list];
  reportDuplicateField(ctx, w.apps, 'name', at('apps'), 'app name');
  reportDuplicateField(ctx, w.teams, 'name', at('teams'), 'team name');
  reportDuplicateField(ctx, w.api_keys, 'name', at('api_keys'), 'API key name');
  reportDuplicateField(ctx, w.content_blocks, 'name', at('content_blocks'), 'content block name');
  reportDuplicateField(ctx, w.segments, 'id', at('segments'), 'segment id');
  reportDuplicateField(ctx, w.custom_attributes, 'name', at('custom_attributes'), 'custom attribute name');
  reportDuplicateField(ctx, w.catalogs, 'name', at('catalogs'), 'catalog name');
  reportDuplicateField(ctx, w.canvases, 'id', at('canvases'), 'canvas id');
  reportDuplicateField(ctx, w.feed_cards, 'id', at('feed_cards'), 'feed card id');
  reportDuplicateField(ctx, w.preference_centers, 'id', at('preference_centers'), 'preference center id');
  reportDuplicateField(ctx, w.preference_centers, 'name', at('preference_centers'), 'preference center name');
  reportDuplicateField(ctx, w.scheduled_exports, 'name', at('scheduled_exports'), 'scheduled export name');
  reportDuplicateField(ctx, w.event_exports, 'name', at('event_exports'), 'event export name');
  const teams = new Set(w.teams.map((t) => t.name));
  w.segments.forEach((s, si) =>
    s.teams.forEach((team, ti) => {
      if (!teams.has(team))
        ctx.addIssue({
          code: 'custom',
          path: [...at('segments'), si, 'teams', ti],
          message: `team ${JSON.stringify(team)} is not among this workspace's teams`,
        });
    }),
  );
  reportDuplicateField(ctx, w.subscription_groups, 'name', at('subscription_groups'), 'subscription group name');
  w.catalogs.forEach((c, ci) =>
    reportDuplicateField(ctx, c.fields, 'name', ['workspaces', wi, 'catalogs', ci, 'fields'], 'field name'),
  );
  // Two declarations of one live activity would fight over its shape.
  reportDuplicates(
    ctx,
    w.live_activities,
    (l) => `${l.app}/${l.activity_id}`,
    (i) => [...at('live_activities'), i, 'activity_id'],
    'live activity (app/activity_id)',
  );
}

export type WorkspaceFile = z.infer<typeof WorkspaceFileSchema>;
export type WorkspaceDecl = WorkspaceFile['workspaces'][number];
