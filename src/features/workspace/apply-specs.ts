import type { FileIssue } from './parse.js';
import type { WorkspaceFile } from './schema.js';
import type { UpsertCounts, UpsertSpec } from './upsert.js';
import type { PoolClient } from '../../platform/db/pool.js';

/** What an apply writes, kind by kind, and the state its steps share (./apply.ts runs them in order). */

export const KINDS = [
  'companies',
  'workspaces',
  'teams',
  'apps',
  'tags',
  'content_blocks',
  'segments',
  'custom_attributes',
  'catalogs',
  'canvases',
  'canvas_schedules',
  'feed_cards',
  'preference_centers',
  'api_keys',
  'scim_tokens',
  'permission_sets',
  'scim_groups',
  'live_activities',
  'scheduled_exports',
  'cdi_integrations',
  'event_exports',
  'subscription_groups',
  'uninstalls',
  'hard_bounces',
  'invalid_phone_numbers',
] as const;
export type Kind = (typeof KINDS)[number];

export interface GeneratedSecret {
  kind: 'api_key' | 'scim_token';
  /** The workspace of an API key; absent for SCIM tokens (company-wide). */
  workspace?: string;
  name: string;
  secret: string;
}

/** A path in the workspace file, for the issues an apply reports. */
export type Path = (string | number)[];

/** A workspace the file declares, with its stored id and its place in the file. */
export interface DeclaredWorkspace {
  decl: WorkspaceFile['workspaces'][number];
  id: string;
  path: Path;
}

/** One apply in progress: its transaction, the file, and what its steps have counted, found wrong and generated. */
export interface ApplyRun {
  client: PoolClient;
  file: WorkspaceFile;
  /** The moment relative record times (`today-3d`) are resolved against. */
  now: Date;
  counts: Record<Kind, UpsertCounts>;
  issues: FileIssue[];
  generatedSecrets: GeneratedSecret[];
  companyId: string;
  workspaces: DeclaredWorkspace[];
}

/** How each kind is upserted by its natural key (./upsert.ts). */
export const SPECS = {
  companies: { table: 'companies', key: { name: 'text' }, set: { settings: 'jsonb' } },
  workspaces: {
    table: 'workspaces',
    key: { company_id: 'uuid', name: 'text' },
    set: { settings: 'jsonb', export_destination: 'jsonb' },
  },
  teams: { table: 'teams', key: { workspace_id: 'uuid', name: 'text' } },
  apps: {
    table: 'apps',
    key: { workspace_id: 'uuid', name: 'text' },
    set: { platform: 'text' },
    optional: { api_id: 'text' },
    insertDefaults: { api_id: 'gen_random_uuid()::text' },
  },
  tags: { table: 'tags', key: { workspace_id: 'uuid', name: 'text' } },
  content_blocks: {
    table: 'content_blocks',
    key: { workspace_id: 'uuid', name: 'text' },
    set: { content: 'text' },
    touch: 'updated_at',
  },
  segments: {
    table: 'segments',
    key: { workspace_id: 'uuid', api_id: 'text' },
    set: {
      name: 'text',
      tags: 'text[]',
      analytics_tracking_enabled: 'boolean',
      archived: 'boolean',
      filter: 'jsonb',
      description: 'text',
      teams: 'text[]',
    },
    optional: { created_at: 'timestamptz' },
    insertDefaults: { created_at: 'now()' },
    touch: 'updated_at',
  },
  custom_attributes: {
    table: 'custom_attribute_names',
    key: { workspace_id: 'uuid', name: 'text' },
    set: { declared_type: 'text', description: 'text', tags: 'text[]' },
  },
  catalogs: {
    table: 'catalogs',
    key: { workspace_id: 'uuid', name: 'text' },
    // A description the file leaves out keeps the one the API gave.
    set: { fields: 'jsonb' },
    optional: { description: 'text' },
    touch: 'updated_at',
  },
  canvases: {
    table: 'canvases',
    key: { workspace_id: 'uuid', api_id: 'text' },
    set: { name: 'text', tags: 'text[]', status: 'text', archived: 'boolean' },
    optional: { created_at: 'timestamptz', last_edited: 'timestamptz' },
    insertDefaults: { created_at: 'now()', last_edited: 'now()' },
    touch: 'last_edited',
  },
  canvas_schedules: {
    table: 'canvas_schedules',
    key: { schedule_id: 'text' },
    set: {
      canvas_id: 'uuid',
      schedule: 'jsonb',
      recipients: 'jsonb',
      audience: 'jsonb',
      trigger_properties: 'jsonb',
      canvas_entry_properties: 'jsonb',
      broadcast: 'boolean',
    },
    insertOnly: { dispatch_id: 'text' },
    touch: 'updated_at',
    // A changed schedule is a new version: jobs armed for the old one find themselves stale, and the worker re-arms.
    onUpdate: ['version = t.version + 1', 'fire_times = NULL'],
  },
  feed_cards: {
    table: 'feed_cards',
    key: { workspace_id: 'uuid', api_id: 'text' },
    set: { type: 'text', title: 'text', tags: 'text[]', archived: 'boolean' },
    optional: { created_at: 'timestamptz' },
    insertDefaults: { created_at: 'now()' },
  },
  preference_centers: {
    table: 'preference_centers',
    key: { workspace_id: 'uuid', api_id: 'text' },
    // The file is the truth for what it gives; what it leaves out keeps what the API gave (options are merged before:
    // ./apply-objects.ts).
    set: { name: 'text', redirect_page_html: 'text', options: 'jsonb' },
    optional: {
      title: 'text',
      page_html: 'text',
      confirmation_page_html: 'text',
      state: 'text',
      created_at: 'timestamptz',
    },
    insertDefaults: {
      title: `''`,
      page_html: `''`,
      confirmation_page_html: `''`,
      state: `'active'`,
      created_at: 'now()',
    },
    touch: 'updated_at',
  },
  api_keys: {
    table: 'api_keys',
    key: { workspace_id: 'uuid', name: 'text' },
    set: { permissions: 'text[]' },
    // A key declared without a secret keeps the one it has.
    optional: { key_hash: { type: 'text', expr: `decode(i.key_hash, 'hex')` }, key_prefix: 'text' },
  },
  scim_tokens: {
    table: 'scim_tokens',
    key: { company_id: 'uuid', name: 'text' },
    optional: { token_hash: { type: 'text', expr: `decode(i.token_hash, 'hex')` }, key_prefix: 'text' },
  },
  permission_sets: {
    table: 'permission_sets',
    key: { company_id: 'uuid', name: 'text' },
    set: { permissions: 'text[]' },
  },
  live_activities: {
    table: 'live_activities',
    key: { app_id: 'uuid', activity_id: 'text' },
    set: { content_state_shape: 'jsonb' },
    touch: 'updated_at',
  },
  scheduled_exports: {
    table: 'scheduled_exports',
    key: { workspace_id: 'uuid', name: 'text' },
    set: {
      segment_id: 'uuid',
      cron: 'text',
      time_zone: 'text',
      fields_to_export: 'text[]',
      custom_attributes_to_export: 'text[]',
      output_format: 'text',
      rows_per_part: 'integer',
      part_target_mb: 'integer',
      layout: 'text',
      mode: 'text',
      callback_endpoint: 'text',
      enabled: 'boolean',
    },
    touch: 'updated_at',
  },
  cdi_integrations: {
    table: 'cdi_integrations',
    key: { workspace_id: 'uuid', id: 'uuid' },
    set: { name: 'text', source: 'jsonb', schedule: 'jsonb' },
    touch: 'updated_at',
  },
  event_exports: {
    table: 'event_exports',
    key: { workspace_id: 'uuid', id: 'uuid' },
    set: {
      name: 'text',
      destination: 'jsonb',
      format: 'text',
      event_types: 'text[]',
      flush_seconds: 'integer',
      max_events_per_file: 'integer',
    },
    touch: 'updated_at',
  },
  subscription_groups: {
    table: 'subscription_groups',
    key: { workspace_id: 'uuid', id: 'uuid' },
    set: { name: 'text', channel: 'text' },
    touch: 'updated_at',
  },
} satisfies Partial<Record<Kind, UpsertSpec>>;
