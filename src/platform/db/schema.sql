-- The schema as src/platform/db/migrations/ leave it, for reading: the migrations are what runs. Rewritten by
-- `npm run schema:snapshot`; test/platform/schema-snapshot.test.ts fails when it differs from what they build.

CREATE TABLE active_user_days (
  profile_id bigint NOT NULL,
  app_id text NOT NULL,
  day date NOT NULL,
  CONSTRAINT active_user_days_pkey PRIMARY KEY (profile_id, app_id, day)
);

CREATE TABLE api_keys (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  key_hash bytea NOT NULL,
  key_prefix text NOT NULL,
  permissions text[] DEFAULT '{}'::text[] NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  revoked_at timestamp with time zone,
  CONSTRAINT api_keys_pkey PRIMARY KEY (id),
  CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash),
  CONSTRAINT api_keys_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE,
  CONSTRAINT api_keys_workspace_id_name_key UNIQUE (workspace_id, name)
);

CREATE TABLE apps (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  api_id text NOT NULL,
  name text NOT NULL,
  platform text DEFAULT 'ios'::text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT apps_pkey PRIMARY KEY (id),
  CONSTRAINT apps_api_id_key UNIQUE (api_id),
  CONSTRAINT apps_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE,
  CONSTRAINT apps_workspace_id_name_key UNIQUE (workspace_id, name)
);

CREATE TABLE canvas_dispatches (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  schedule_row_id uuid NOT NULL,
  canvas_id uuid NOT NULL,
  dispatch_id text NOT NULL,
  version integer NOT NULL,
  fire_at timestamp with time zone NOT NULL,
  time_zones text[],
  status text DEFAULT 'running'::text NOT NULL,
  users_entered bigint DEFAULT 0 NOT NULL,
  trigger_properties jsonb,
  canvas_entry_properties jsonb,
  note text,
  started_at timestamp with time zone DEFAULT now() NOT NULL,
  finished_at timestamp with time zone,
  CONSTRAINT canvas_dispatches_pkey PRIMARY KEY (id),
  CONSTRAINT canvas_dispatches_canvas_id_fkey FOREIGN KEY (canvas_id) REFERENCES canvases(id) ON DELETE CASCADE,
  CONSTRAINT canvas_dispatches_schedule_row_id_fkey FOREIGN KEY (schedule_row_id) REFERENCES canvas_schedules(id) ON DELETE CASCADE,
  CONSTRAINT canvas_dispatches_schedule_row_id_version_fire_at_key UNIQUE (schedule_row_id, version, fire_at),
  CONSTRAINT canvas_dispatches_status_check CHECK ((status = ANY (ARRAY['running'::text, 'done'::text, 'skipped'::text])))
);
CREATE INDEX canvas_dispatches_dispatch ON canvas_dispatches USING btree (dispatch_id);

CREATE TABLE canvas_schedules (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  canvas_id uuid NOT NULL,
  schedule_id text NOT NULL,
  dispatch_id text NOT NULL,
  schedule jsonb NOT NULL,
  recipients jsonb,
  audience jsonb,
  trigger_properties jsonb,
  state text DEFAULT 'scheduled'::text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  version integer DEFAULT 1 NOT NULL,
  broadcast boolean DEFAULT false NOT NULL,
  canvas_entry_properties jsonb,
  fire_times timestamp with time zone[],
  CONSTRAINT canvas_schedules_pkey PRIMARY KEY (id),
  CONSTRAINT canvas_schedules_canvas_id_fkey FOREIGN KEY (canvas_id) REFERENCES canvases(id) ON DELETE CASCADE,
  CONSTRAINT canvas_schedules_schedule_id_key UNIQUE (schedule_id)
);
CREATE INDEX canvas_schedules_canvas ON canvas_schedules USING btree (canvas_id);
CREATE INDEX canvas_schedules_pending ON canvas_schedules USING btree (state) WHERE (state = ANY (ARRAY['scheduled'::text, 'sending'::text]));

CREATE TABLE canvases (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  api_id text NOT NULL,
  name text NOT NULL,
  tags text[] DEFAULT '{}'::text[] NOT NULL,
  status text DEFAULT 'active'::text NOT NULL,
  archived boolean DEFAULT false NOT NULL,
  api_triggered boolean DEFAULT true NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  last_edited timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT canvases_pkey PRIMARY KEY (id),
  CONSTRAINT canvases_status_check CHECK ((status = ANY (ARRAY['draft'::text, 'active'::text, 'stopped'::text]))),
  CONSTRAINT canvases_workspace_id_api_id_key UNIQUE (workspace_id, api_id),
  CONSTRAINT canvases_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX canvases_list ON canvases USING btree (workspace_id, created_at, id);

CREATE TABLE catalog_batches (
  version bigint NOT NULL,
  workspace_id uuid NOT NULL,
  catalog_id uuid NOT NULL,
  op text NOT NULL,
  payload jsonb NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  applied_at timestamp with time zone,
  CONSTRAINT catalog_batches_pkey PRIMARY KEY (version),
  CONSTRAINT catalog_batches_op_check CHECK ((op = ANY (ARRAY['replace'::text, 'delete'::text, 'create'::text, 'update'::text, 'add_fields'::text, 'delete_field'::text, 'create_selection'::text, 'delete_selection'::text]))),
  CONSTRAINT catalog_batches_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX catalog_batches_waiting ON catalog_batches USING btree (created_at) WHERE (applied_at IS NULL);

CREATE TABLE catalog_items (
  catalog_id uuid NOT NULL,
  item_id text NOT NULL,
  data jsonb NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  version bigint DEFAULT 0 NOT NULL,
  deleted boolean DEFAULT false NOT NULL,
  CONSTRAINT catalog_items_pkey PRIMARY KEY (catalog_id, item_id),
  CONSTRAINT catalog_items_catalog_id_fkey FOREIGN KEY (catalog_id) REFERENCES catalogs(id) ON DELETE CASCADE
);

CREATE TABLE catalog_selections (
  catalog_id uuid NOT NULL,
  name text NOT NULL,
  definition jsonb NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT catalog_selections_pkey PRIMARY KEY (catalog_id, name),
  CONSTRAINT catalog_selections_catalog_id_fkey FOREIGN KEY (catalog_id) REFERENCES catalogs(id) ON DELETE CASCADE
);

CREATE TABLE catalogs (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  description text,
  fields jsonb DEFAULT '[]'::jsonb NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT catalogs_pkey PRIMARY KEY (id),
  CONSTRAINT catalogs_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE,
  CONSTRAINT catalogs_workspace_id_name_key UNIQUE (workspace_id, name)
);

CREATE TABLE cdi_file_positions (
  integration_id uuid NOT NULL,
  key text NOT NULL,
  etag text NOT NULL,
  done bigint NOT NULL,
  rows_at timestamp with time zone NOT NULL,
  CONSTRAINT cdi_file_positions_pkey PRIMARY KEY (integration_id, key, etag),
  CONSTRAINT cdi_file_positions_integration_id_fkey FOREIGN KEY (integration_id) REFERENCES cdi_integrations(id) ON DELETE CASCADE
);

CREATE TABLE cdi_files_synced (
  integration_id uuid NOT NULL,
  key text NOT NULL,
  etag text NOT NULL,
  job_id uuid NOT NULL,
  rows bigint NOT NULL,
  synced_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT cdi_files_synced_pkey PRIMARY KEY (integration_id, key, etag),
  CONSTRAINT cdi_files_synced_integration_id_fkey FOREIGN KEY (integration_id) REFERENCES cdi_integrations(id) ON DELETE CASCADE
);

CREATE TABLE cdi_integrations (
  id uuid NOT NULL,
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  source jsonb NOT NULL,
  schedule jsonb,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  watermark timestamp with time zone,
  CONSTRAINT cdi_integrations_pkey PRIMARY KEY (id),
  CONSTRAINT cdi_integrations_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE,
  CONSTRAINT cdi_integrations_workspace_id_id_key UNIQUE (workspace_id, id)
);
CREATE TRIGGER cdi_integrations_source_changed BEFORE UPDATE OF source ON cdi_integrations FOR EACH ROW EXECUTE FUNCTION cdi_integrations_source_changed();

CREATE TABLE cdi_lane_rows (
  integration_id uuid NOT NULL,
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  row_hashes text[] NOT NULL,
  row_times text[] NOT NULL,
  CONSTRAINT cdi_lane_rows_pkey PRIMARY KEY (integration_id, id),
  CONSTRAINT cdi_lane_rows_integration_id_fkey FOREIGN KEY (integration_id) REFERENCES cdi_integrations(id) ON DELETE CASCADE
);

CREATE TABLE cdi_sync_jobs (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  integration_id uuid NOT NULL,
  workspace_id uuid NOT NULL,
  trigger text NOT NULL,
  status text DEFAULT 'running'::text NOT NULL,
  started_at timestamp with time zone DEFAULT now() NOT NULL,
  finished_at timestamp with time zone,
  rows_synced bigint DEFAULT 0 NOT NULL,
  rows_failed bigint DEFAULT 0 NOT NULL,
  last_timestamp_synced timestamp with time zone,
  rejects_key text,
  error text,
  attempts integer DEFAULT 0 NOT NULL,
  CONSTRAINT cdi_sync_jobs_pkey PRIMARY KEY (id),
  CONSTRAINT cdi_sync_jobs_integration_id_fkey FOREIGN KEY (integration_id) REFERENCES cdi_integrations(id) ON DELETE CASCADE,
  CONSTRAINT cdi_sync_jobs_status_check CHECK ((status = ANY (ARRAY['running'::text, 'success'::text, 'partial'::text, 'error'::text, 'config_error'::text]))),
  CONSTRAINT cdi_sync_jobs_trigger_check CHECK ((trigger = ANY (ARRAY['api'::text, 'schedule'::text, 'cli'::text]))),
  CONSTRAINT cdi_sync_jobs_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX cdi_sync_jobs_integration ON cdi_sync_jobs USING btree (integration_id, started_at DESC, id DESC);
CREATE UNIQUE INDEX cdi_sync_jobs_one_running ON cdi_sync_jobs USING btree (integration_id) WHERE (status = 'running'::text);

CREATE TABLE cdi_sync_rejects (
  job_id uuid NOT NULL,
  seq bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  line text NOT NULL,
  source_order text,
  CONSTRAINT cdi_sync_rejects_pkey PRIMARY KEY (job_id, seq),
  CONSTRAINT cdi_sync_rejects_job_id_fkey FOREIGN KEY (job_id) REFERENCES cdi_sync_jobs(id) ON DELETE CASCADE
);

CREATE TABLE cdi_watermark_rows (
  integration_id uuid NOT NULL,
  row_hash text NOT NULL,
  CONSTRAINT cdi_watermark_rows_pkey PRIMARY KEY (integration_id, row_hash),
  CONSTRAINT cdi_watermark_rows_integration_id_fkey FOREIGN KEY (integration_id) REFERENCES cdi_integrations(id) ON DELETE CASCADE
);

CREATE TABLE companies (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  name text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  settings jsonb DEFAULT '{}'::jsonb NOT NULL,
  CONSTRAINT companies_pkey PRIMARY KEY (id),
  CONSTRAINT companies_name_key UNIQUE (name)
);

CREATE TABLE content_blocks (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  content text DEFAULT ''::text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  description text,
  state text DEFAULT 'active'::text NOT NULL,
  tags text[] DEFAULT '{}'::text[] NOT NULL,
  CONSTRAINT content_blocks_pkey PRIMARY KEY (id),
  CONSTRAINT content_blocks_state_check CHECK ((state = ANY (ARRAY['active'::text, 'draft'::text]))),
  CONSTRAINT content_blocks_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE,
  CONSTRAINT content_blocks_workspace_id_name_key UNIQUE (workspace_id, name)
);
CREATE INDEX content_blocks_list ON content_blocks USING btree (workspace_id, updated_at, id);

CREATE TABLE custom_attribute_names (
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  data_type text,
  first_seen_on date,
  last_seen_on date,
  declared_type text,
  description text,
  tags text[] DEFAULT '{}'::text[] NOT NULL,
  CONSTRAINT custom_attribute_names_pkey PRIMARY KEY (workspace_id, name),
  CONSTRAINT custom_attribute_names_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE dashboard_user_audit (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  company_id uuid NOT NULL,
  dashboard_user_id uuid NOT NULL,
  actor text NOT NULL,
  action text NOT NULL,
  changes jsonb NOT NULL,
  at timestamp with time zone DEFAULT now() NOT NULL,
  scim_token_id uuid,
  request_origin text,
  CONSTRAINT dashboard_user_audit_pkey PRIMARY KEY (id),
  CONSTRAINT dashboard_user_audit_action_check CHECK ((action = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text, 'deactivate'::text, 'reactivate'::text, 'join_group'::text, 'leave_group'::text, 'group_grants'::text]))),
  CONSTRAINT dashboard_user_audit_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies(id) ON DELETE CASCADE
);
CREATE INDEX dashboard_user_audit_company ON dashboard_user_audit USING btree (company_id, at);
CREATE INDEX dashboard_user_audit_user ON dashboard_user_audit USING btree (company_id, dashboard_user_id, at);

CREATE TABLE dashboard_users (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  company_id uuid NOT NULL,
  user_name text NOT NULL,
  given_name text NOT NULL,
  family_name text NOT NULL,
  department text,
  permissions jsonb,
  last_sign_in_at timestamp with time zone,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  active boolean DEFAULT true NOT NULL,
  external_id text,
  emails jsonb DEFAULT '[]'::jsonb NOT NULL,
  display_name text,
  CONSTRAINT dashboard_users_pkey PRIMARY KEY (id),
  CONSTRAINT dashboard_users_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies(id) ON DELETE CASCADE
);
CREATE INDEX dashboard_users_external_id ON dashboard_users USING btree (company_id, external_id) WHERE (external_id IS NOT NULL);
CREATE INDEX dashboard_users_list ON dashboard_users USING btree (company_id, created_at, id);
CREATE UNIQUE INDEX dashboard_users_user_name ON dashboard_users USING btree (company_id, lower(user_name));

CREATE TABLE email_spam (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  workspace_id uuid NOT NULL,
  email text NOT NULL,
  reported_at timestamp with time zone NOT NULL,
  CONSTRAINT email_spam_pkey PRIMARY KEY (id),
  CONSTRAINT email_spam_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX email_spam_email ON email_spam USING btree (workspace_id, lower(email), reported_at DESC, id DESC);
CREATE INDEX email_spam_list ON email_spam USING btree (workspace_id, reported_at DESC, id DESC);

CREATE TABLE email_subscriptions (
  workspace_id uuid NOT NULL,
  email text NOT NULL,
  state text NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT email_subscriptions_pkey PRIMARY KEY (workspace_id, email),
  CONSTRAINT email_subscriptions_state_check CHECK ((state = ANY (ARRAY['opted_in'::text, 'subscribed'::text, 'unsubscribed'::text]))),
  CONSTRAINT email_subscriptions_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX email_subscriptions_unsubscribed ON email_subscriptions USING btree (workspace_id, updated_at DESC) WHERE (state = 'unsubscribed'::text);

CREATE TABLE email_templates (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  api_id text NOT NULL,
  template_name text NOT NULL,
  subject text NOT NULL,
  body text NOT NULL,
  plaintext_body text,
  preheader text,
  tags text[] DEFAULT '{}'::text[] NOT NULL,
  should_inline_css boolean,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT email_templates_pkey PRIMARY KEY (id),
  CONSTRAINT email_templates_workspace_id_api_id_key UNIQUE (workspace_id, api_id),
  CONSTRAINT email_templates_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

-- Custom events a UTC day, per name and app ('' = all apps) (docs/analytics.md)
CREATE TABLE event_counts_daily (
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  app_id text NOT NULL,
  day date NOT NULL,
  count bigint NOT NULL,
  CONSTRAINT event_counts_daily_pkey PRIMARY KEY (workspace_id, name, app_id, day),
  CONSTRAINT event_counts_daily_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE event_counts_hourly (
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  app_id text NOT NULL,
  hour timestamp with time zone NOT NULL,
  count bigint NOT NULL,
  CONSTRAINT event_counts_hourly_pkey PRIMARY KEY (workspace_id, name, app_id, hour),
  CONSTRAINT event_counts_hourly_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE event_erasures (
  workspace_id uuid NOT NULL,
  user_id text NOT NULL,
  external_user_id text,
  since timestamp with time zone NOT NULL,
  until timestamp with time zone NOT NULL,
  erased_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT event_erasures_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX event_erasures_workspace ON event_erasures USING btree (workspace_id, erased_at);

CREATE TABLE event_export_failures (
  export_id uuid NOT NULL,
  first_failed_at timestamp with time zone NOT NULL,
  last_failed_at timestamp with time zone NOT NULL,
  failures integer NOT NULL,
  last_error_code text NOT NULL,
  last_error text NOT NULL,
  next_attempt_at timestamp with time zone NOT NULL,
  warned_at timestamp with time zone,
  CONSTRAINT event_export_failures_pkey PRIMARY KEY (export_id),
  CONSTRAINT event_export_failures_export_id_fkey FOREIGN KEY (export_id) REFERENCES event_exports(id) ON DELETE CASCADE
);

CREATE TABLE event_export_files (
  export_id uuid NOT NULL,
  event_type text NOT NULL,
  hour timestamp with time zone NOT NULL,
  seq integer NOT NULL,
  xid_from bigint NOT NULL,
  xid_to bigint NOT NULL,
  first_xid bigint,
  first_id uuid,
  next_xid bigint,
  next_id uuid,
  events integer NOT NULL,
  key text NOT NULL,
  bytes bigint,
  planned_at timestamp with time zone DEFAULT now() NOT NULL,
  written_at timestamp with time zone,
  CONSTRAINT event_export_files_pkey PRIMARY KEY (export_id, event_type, hour, seq),
  CONSTRAINT event_export_files_export_id_fkey FOREIGN KEY (export_id) REFERENCES event_exports(id) ON DELETE CASCADE
);
CREATE INDEX event_export_files_unwritten ON event_export_files USING btree (export_id) WHERE (written_at IS NULL);

CREATE TABLE event_export_hours (
  export_id uuid NOT NULL,
  event_type text NOT NULL,
  hour timestamp with time zone NOT NULL,
  success_at timestamp with time zone NOT NULL,
  CONSTRAINT event_export_hours_pkey PRIMARY KEY (export_id, event_type, hour),
  CONSTRAINT event_export_hours_export_id_fkey FOREIGN KEY (export_id) REFERENCES event_exports(id) ON DELETE CASCADE
);

CREATE TABLE event_export_stale_keys (
  export_id uuid NOT NULL,
  key text NOT NULL,
  kind text NOT NULL,
  CONSTRAINT event_export_stale_keys_pkey PRIMARY KEY (export_id, key),
  CONSTRAINT event_export_stale_keys_export_id_fkey FOREIGN KEY (export_id) REFERENCES event_exports(id) ON DELETE CASCADE,
  CONSTRAINT event_export_stale_keys_kind_check CHECK ((kind = ANY (ARRAY['success'::text, 'file'::text])))
);

CREATE TABLE event_exports (
  id uuid NOT NULL,
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  destination jsonb,
  format text NOT NULL,
  event_types text[],
  flush_seconds integer NOT NULL,
  max_events_per_file integer NOT NULL,
  planned_xid bigint DEFAULT 0 NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT event_exports_pkey PRIMARY KEY (id),
  CONSTRAINT event_exports_flush_seconds_check CHECK (((flush_seconds >= 1) AND (flush_seconds <= 3600))),
  CONSTRAINT event_exports_format_check CHECK ((format = ANY (ARRAY['avro'::text, 'parquet'::text, 'ndjson'::text]))),
  CONSTRAINT event_exports_max_events_per_file_check CHECK (((max_events_per_file >= 1) AND (max_events_per_file <= 1000000))),
  CONSTRAINT event_exports_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX event_exports_workspace ON event_exports USING btree (workspace_id);

-- What happened to people, one row per event, partitioned by day (docs/events.md)
CREATE TABLE event_log (
  workspace_id uuid NOT NULL,
  accepted_at timestamp with time zone DEFAULT now() NOT NULL,
  xid bigint DEFAULT ((pg_current_xact_id())::text)::bigint NOT NULL,
  id uuid NOT NULL,
  type text NOT NULL,
  "time" timestamp with time zone NOT NULL,
  profile_id bigint,
  user_id text,
  external_user_id text,
  app_id text,
  name text,
  properties json,
  data jsonb DEFAULT '{}'::jsonb NOT NULL
) PARTITION BY RANGE (accepted_at);
CREATE INDEX event_log_accepted_at ON ONLY event_log USING brin (accepted_at) WITH (pages_per_range='32');
CREATE INDEX event_log_profile ON ONLY event_log USING btree (profile_id) WHERE ((profile_id IS NOT NULL) AND (type <> ALL (ARRAY['users.behaviors.CustomEvent'::text, 'users.behaviors.Purchase'::text])));
CREATE INDEX event_log_xid ON ONLY event_log USING brin (xid) WITH (pages_per_range='32');

CREATE TABLE event_log_merged_profiles (
  merged_profile_id bigint NOT NULL,
  profile_id bigint NOT NULL,
  merged_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT event_log_merged_profiles_pkey PRIMARY KEY (merged_profile_id),
  CONSTRAINT event_log_merged_profiles_profile_id_fkey FOREIGN KEY (profile_id) REFERENCES profiles(id) ON DELETE CASCADE
);
CREATE INDEX event_log_merged_profiles_profile ON event_log_merged_profiles USING btree (profile_id);

CREATE TABLE event_names (
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  description text,
  included_in_analytics_report boolean DEFAULT false NOT NULL,
  status text DEFAULT 'Active'::text NOT NULL,
  tag_names text[] DEFAULT '{}'::text[] NOT NULL,
  first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT event_names_pkey PRIMARY KEY (workspace_id, name),
  CONSTRAINT event_names_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE event_redeliveries (
  export_id uuid NOT NULL,
  event_type text NOT NULL,
  hour timestamp with time zone NOT NULL,
  requested_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT event_redeliveries_pkey PRIMARY KEY (export_id, event_type, hour),
  CONSTRAINT event_redeliveries_export_id_fkey FOREIGN KEY (export_id) REFERENCES event_exports(id) ON DELETE CASCADE
);

CREATE TABLE export_member_changes (
  export_id uuid NOT NULL,
  profile_id bigint NOT NULL,
  random_bucket integer NOT NULL,
  is_member boolean NOT NULL,
  CONSTRAINT export_member_changes_pkey PRIMARY KEY (export_id, profile_id),
  CONSTRAINT export_member_changes_export_id_fkey FOREIGN KEY (export_id) REFERENCES exports(id) ON DELETE CASCADE
);
CREATE INDEX export_member_changes_profile ON export_member_changes USING btree (profile_id);

CREATE TABLE export_members (
  export_id uuid NOT NULL,
  random_bucket integer NOT NULL,
  profile_ids bigint[] NOT NULL,
  CONSTRAINT export_members_pkey PRIMARY KEY (export_id, random_bucket),
  CONSTRAINT export_members_export_id_fkey FOREIGN KEY (export_id) REFERENCES exports(id) ON DELETE CASCADE
);

CREATE TABLE export_parts (
  export_id uuid NOT NULL,
  shard integer NOT NULL,
  part_index integer NOT NULL,
  object_key text NOT NULL,
  users integer NOT NULL,
  bytes bigint NOT NULL,
  sha256 text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  kind text DEFAULT 'users'::text NOT NULL,
  CONSTRAINT export_parts_pkey PRIMARY KEY (export_id, kind, shard, part_index),
  CONSTRAINT export_parts_export_id_fkey FOREIGN KEY (export_id) REFERENCES exports(id) ON DELETE CASCADE,
  CONSTRAINT export_parts_kind_check CHECK ((kind = ANY (ARRAY['users'::text, 'removed'::text])))
);

CREATE TABLE export_shards_done (
  export_id uuid NOT NULL,
  shard integer NOT NULL,
  users bigint NOT NULL,
  done_at timestamp with time zone DEFAULT now() NOT NULL,
  read_from text DEFAULT 'primary'::text NOT NULL,
  replay_lsn pg_lsn,
  replay_at timestamp with time zone,
  bucket_from integer,
  bucket_to integer,
  snapshot pg_snapshot,
  removed bigint DEFAULT 0 NOT NULL,
  segment_filter jsonb,
  CONSTRAINT export_shards_done_pkey PRIMARY KEY (export_id, shard),
  CONSTRAINT export_shards_done_export_id_fkey FOREIGN KEY (export_id) REFERENCES exports(id) ON DELETE CASCADE,
  CONSTRAINT export_shards_done_read_from_check CHECK ((read_from = ANY (ARRAY['primary'::text, 'replica'::text])))
);

CREATE TABLE export_tails (
  export_id uuid NOT NULL,
  shard integer NOT NULL,
  users integer NOT NULL,
  data bytea NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  kind text DEFAULT 'users'::text NOT NULL,
  CONSTRAINT export_tails_pkey PRIMARY KEY (export_id, kind, shard),
  CONSTRAINT export_tails_export_id_fkey FOREIGN KEY (export_id) REFERENCES exports(id) ON DELETE CASCADE,
  CONSTRAINT export_tails_kind_check CHECK ((kind = ANY (ARRAY['users'::text, 'removed'::text]))),
  CONSTRAINT export_tails_users_check CHECK ((users > 0))
);

CREATE TABLE exports (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  object_prefix text NOT NULL,
  company_id uuid NOT NULL,
  workspace_id uuid NOT NULL,
  segment_id uuid NOT NULL,
  status text DEFAULT 'queued'::text NOT NULL,
  request jsonb NOT NULL,
  destination text NOT NULL,
  key_prefix text,
  users_done bigint DEFAULT 0 NOT NULL,
  parts_done integer DEFAULT 0 NOT NULL,
  error text,
  scheduled_by text,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  started_at timestamp with time zone,
  finished_at timestamp with time zone,
  url_expires_at timestamp with time zone,
  shard_count integer,
  local_shared_root boolean DEFAULT false NOT NULL,
  shard_buckets integer,
  users_progress bigint DEFAULT 0 NOT NULL,
  callback_state text,
  public_base_url text,
  primary_lsn pg_lsn,
  changes_since uuid,
  removed_done bigint DEFAULT 0 NOT NULL,
  members_forgotten_at timestamp with time zone,
  created_xmin xid8 DEFAULT pg_snapshot_xmin(pg_current_snapshot()),
  member_layers uuid[],
  CONSTRAINT exports_pkey PRIMARY KEY (id),
  CONSTRAINT exports_callback_state_check CHECK ((callback_state = ANY (ARRAY['pending'::text, 'delivered'::text, 'abandoned'::text]))),
  CONSTRAINT exports_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies(id) ON DELETE CASCADE,
  CONSTRAINT exports_destination_check CHECK ((destination = ANY (ARRAY['local'::text, 's3'::text, 'gcs'::text]))),
  CONSTRAINT exports_object_prefix_key UNIQUE (object_prefix),
  CONSTRAINT exports_segment_id_fkey FOREIGN KEY (segment_id) REFERENCES segments(id) ON DELETE CASCADE,
  CONSTRAINT exports_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'ready'::text, 'failed'::text]))),
  CONSTRAINT exports_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX exports_one_unfinished_per_segment ON exports USING btree (segment_id) WHERE (status = ANY (ARRAY['queued'::text, 'running'::text]));
CREATE INDEX exports_segment ON exports USING btree (segment_id, created_at DESC);
CREATE INDEX exports_unfinished ON exports USING btree (company_id) WHERE (status = ANY (ARRAY['queued'::text, 'running'::text]));
CREATE INDEX exports_workspace ON exports USING btree (workspace_id, created_at DESC);

CREATE TABLE feed_cards (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  api_id text NOT NULL,
  type text NOT NULL,
  title text NOT NULL,
  tags text[] DEFAULT '{}'::text[] NOT NULL,
  archived boolean DEFAULT false NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT feed_cards_pkey PRIMARY KEY (id),
  CONSTRAINT feed_cards_type_check CHECK ((type = ANY (ARRAY['NewsItem'::text, 'CaptionedImage'::text, 'Banner'::text]))),
  CONSTRAINT feed_cards_workspace_id_api_id_key UNIQUE (workspace_id, api_id),
  CONSTRAINT feed_cards_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX feed_cards_list ON feed_cards USING btree (workspace_id, created_at, id);

CREATE TABLE hard_bounces (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  workspace_id uuid NOT NULL,
  email text NOT NULL,
  bounced_at timestamp with time zone NOT NULL,
  CONSTRAINT hard_bounces_pkey PRIMARY KEY (id),
  CONSTRAINT hard_bounces_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX hard_bounces_email ON hard_bounces USING btree (workspace_id, lower(email), bounced_at DESC, id DESC);
CREATE INDEX hard_bounces_list ON hard_bounces USING btree (workspace_id, bounced_at DESC, id DESC);

CREATE TABLE idempotency_keys (
  workspace_id uuid NOT NULL,
  key text NOT NULL,
  request_hash bytea NOT NULL,
  status_code integer,
  response jsonb,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  completed_at timestamp with time zone,
  names bigint[] GENERATED ALWAYS AS (json_string_hashes(response)) STORED,
  CONSTRAINT idempotency_keys_pkey PRIMARY KEY (workspace_id, key),
  CONSTRAINT idempotency_keys_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX idempotency_keys_created ON idempotency_keys USING btree (created_at);
CREATE INDEX idempotency_keys_names ON idempotency_keys USING gin (names) WITH (fastupdate=off) WHERE (names <> '{}'::bigint[]);

CREATE TABLE import_partitions (
  import_id uuid NOT NULL,
  part smallint NOT NULL,
  "position" bigint NOT NULL,
  events_applied bigint DEFAULT 0 NOT NULL,
  events_unmatched bigint DEFAULT 0 NOT NULL,
  rejected bigint DEFAULT 0 NOT NULL,
  CONSTRAINT import_partitions_pkey PRIMARY KEY (import_id, part),
  CONSTRAINT import_partitions_import_id_fkey FOREIGN KEY (import_id) REFERENCES imports(id) ON DELETE CASCADE
);

CREATE TABLE imports (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  store text NOT NULL,
  object_key text NOT NULL,
  format text NOT NULL,
  status text DEFAULT 'queued'::text NOT NULL,
  "position" bigint DEFAULT 0 NOT NULL,
  events_applied bigint DEFAULT 0 NOT NULL,
  events_unmatched bigint DEFAULT 0 NOT NULL,
  rejected bigint DEFAULT 0 NOT NULL,
  bytes_total bigint,
  rejects_key text NOT NULL,
  error text,
  requested_by text,
  attempts integer DEFAULT 0 NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  started_at timestamp with time zone,
  finished_at timestamp with time zone,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  partitions smallint,
  via_queue boolean DEFAULT true NOT NULL,
  CONSTRAINT imports_pkey PRIMARY KEY (id),
  CONSTRAINT imports_format_check CHECK ((format = ANY (ARRAY['ndjson'::text, 'json'::text]))),
  CONSTRAINT imports_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'running'::text, 'completed'::text, 'failed'::text]))),
  CONSTRAINT imports_store_check CHECK ((store = ANY (ARRAY['local'::text, 's3'::text, 'gcs'::text]))),
  CONSTRAINT imports_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX imports_workspace ON imports USING btree (workspace_id, created_at DESC);

CREATE TABLE ingest_dead_letters (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  source text NOT NULL,
  workspace_id uuid NOT NULL,
  staged_id bigint,
  import_id uuid,
  line bigint,
  part smallint NOT NULL,
  accepted_at timestamp with time zone NOT NULL,
  objects integer NOT NULL,
  payload text NOT NULL,
  error_code text NOT NULL,
  error_message text NOT NULL,
  failed_at timestamp with time zone DEFAULT now() NOT NULL,
  names bigint[],
  CONSTRAINT ingest_dead_letters_pkey PRIMARY KEY (id),
  CONSTRAINT ingest_dead_letters_import_id_fkey FOREIGN KEY (import_id) REFERENCES imports(id) ON DELETE CASCADE,
  CONSTRAINT ingest_dead_letters_source_check CHECK ((source = ANY (ARRAY['track'::text, 'import'::text]))),
  CONSTRAINT ingest_dead_letters_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX ingest_dead_letters_import ON ingest_dead_letters USING btree (import_id, line) WHERE (import_id IS NOT NULL);
CREATE INDEX ingest_dead_letters_names ON ingest_dead_letters USING gin (names) WITH (fastupdate=off);
CREATE INDEX ingest_dead_letters_staged ON ingest_dead_letters USING btree (staged_id) WHERE (staged_id IS NOT NULL);
CREATE INDEX ingest_dead_letters_unnamed ON ingest_dead_letters USING btree (workspace_id) WHERE (names IS NULL);
CREATE INDEX ingest_dead_letters_workspace ON ingest_dead_letters USING btree (workspace_id, id);
CREATE TRIGGER ingest_dead_letters_forget_names BEFORE UPDATE OF payload ON ingest_dead_letters FOR EACH ROW EXECUTE FUNCTION ingest_dead_letters_forget_names();

CREATE TABLE ingest_staging (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  workspace_id uuid NOT NULL,
  accepted_at timestamp with time zone DEFAULT now() NOT NULL,
  objects integer NOT NULL,
  payload text NOT NULL,
  part smallint DEFAULT 0 NOT NULL,
  CONSTRAINT ingest_staging_pkey PRIMARY KEY (id),
  CONSTRAINT ingest_staging_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX ingest_staging_part ON ingest_staging USING btree (part, id);
CREATE INDEX ingest_staging_part_workspace ON ingest_staging USING btree (part, workspace_id, id);

CREATE TABLE invalid_phone_numbers (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  workspace_id uuid NOT NULL,
  phone text NOT NULL,
  reason text NOT NULL,
  detected_at timestamp with time zone NOT NULL,
  CONSTRAINT invalid_phone_numbers_pkey PRIMARY KEY (id),
  CONSTRAINT invalid_phone_numbers_reason_check CHECK ((reason = ANY (ARRAY['provider_error'::text, 'deactivated'::text]))),
  CONSTRAINT invalid_phone_numbers_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX invalid_phone_numbers_list ON invalid_phone_numbers USING btree (workspace_id, detected_at DESC, id DESC);
CREATE INDEX invalid_phone_numbers_phone ON invalid_phone_numbers USING btree (workspace_id, phone, detected_at DESC, id DESC);

CREATE TABLE live_activities (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  app_id uuid NOT NULL,
  activity_id text NOT NULL,
  content_state_shape jsonb DEFAULT '{}'::jsonb NOT NULL,
  content_state jsonb,
  push_token text,
  state text DEFAULT 'running'::text NOT NULL,
  stale_date timestamp with time zone,
  dismissal_date timestamp with time zone,
  ended_at timestamp with time zone,
  removed_at timestamp with time zone,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT live_activities_pkey PRIMARY KEY (id),
  CONSTRAINT live_activities_app_id_activity_id_key UNIQUE (app_id, activity_id),
  CONSTRAINT live_activities_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps(id) ON DELETE CASCADE,
  CONSTRAINT live_activities_state_check CHECK ((state = ANY (ARRAY['running'::text, 'ended'::text, 'removed'::text])))
);

CREATE TABLE live_activity_pushes (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  live_activity_id uuid NOT NULL,
  event text NOT NULL,
  payload jsonb NOT NULL,
  status text DEFAULT 'queued'::text NOT NULL,
  adapter text,
  tokens integer,
  error text,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  delivered_at timestamp with time zone,
  CONSTRAINT live_activity_pushes_pkey PRIMARY KEY (id),
  CONSTRAINT live_activity_pushes_event_check CHECK ((event = ANY (ARRAY['update'::text, 'end'::text]))),
  CONSTRAINT live_activity_pushes_live_activity_id_fkey FOREIGN KEY (live_activity_id) REFERENCES live_activities(id) ON DELETE CASCADE,
  CONSTRAINT live_activity_pushes_status_check CHECK ((status = ANY (ARRAY['queued'::text, 'delivered'::text, 'failed'::text])))
);
CREATE INDEX live_activity_pushes_activity ON live_activity_pushes USING btree (live_activity_id, id);
CREATE INDEX live_activity_pushes_queued ON live_activity_pushes USING btree (created_at) WHERE (status = 'queued'::text);

CREATE TABLE live_activity_tokens (
  live_activity_id uuid NOT NULL,
  push_token text NOT NULL,
  external_id text,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT live_activity_tokens_pkey PRIMARY KEY (live_activity_id, push_token),
  CONSTRAINT live_activity_tokens_live_activity_id_fkey FOREIGN KEY (live_activity_id) REFERENCES live_activities(id) ON DELETE CASCADE
);
CREATE INDEX live_activity_tokens_external_id ON live_activity_tokens USING btree (external_id) WHERE (external_id IS NOT NULL);

CREATE TABLE permission_sets (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  company_id uuid NOT NULL,
  name text NOT NULL,
  permissions text[] DEFAULT '{}'::text[] NOT NULL,
  CONSTRAINT permission_sets_pkey PRIMARY KEY (id),
  CONSTRAINT permission_sets_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies(id) ON DELETE CASCADE,
  CONSTRAINT permission_sets_company_id_name_key UNIQUE (company_id, name)
);

CREATE TABLE preference_centers (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  api_id text NOT NULL,
  name text NOT NULL,
  title text DEFAULT ''::text NOT NULL,
  page_html text DEFAULT ''::text NOT NULL,
  confirmation_page_html text DEFAULT ''::text NOT NULL,
  redirect_page_html text,
  options jsonb DEFAULT '{}'::jsonb NOT NULL,
  state text DEFAULT 'active'::text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT preference_centers_pkey PRIMARY KEY (id),
  CONSTRAINT preference_centers_workspace_id_api_id_key UNIQUE (workspace_id, api_id),
  CONSTRAINT preference_centers_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE product_names (
  workspace_id uuid NOT NULL,
  product text NOT NULL,
  first_seen_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT product_names_pkey PRIMARY KEY (workspace_id, product),
  CONSTRAINT product_names_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE profile_aliases (
  workspace_id uuid NOT NULL,
  alias_label text NOT NULL,
  alias_name text NOT NULL,
  profile_id bigint NOT NULL,
  CONSTRAINT profile_aliases_pkey PRIMARY KEY (workspace_id, alias_label, alias_name),
  CONSTRAINT profile_aliases_profile_id_fkey FOREIGN KEY (profile_id) REFERENCES profiles(id) ON DELETE CASCADE,
  CONSTRAINT profile_aliases_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX profile_aliases_profile ON profile_aliases USING btree (profile_id);

CREATE TABLE profile_changes (
  workspace_id uuid NOT NULL,
  xid xid8 NOT NULL,
  profile_id bigint NOT NULL,
  random_bucket integer NOT NULL
);
CREATE INDEX profile_changes_workspace_xid ON profile_changes USING btree (workspace_id, xid);

CREATE TABLE profile_external_ids (
  workspace_id uuid NOT NULL,
  external_id text NOT NULL,
  profile_id bigint NOT NULL,
  deprecated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT profile_external_ids_pkey PRIMARY KEY (workspace_id, external_id),
  CONSTRAINT profile_external_ids_profile_id_fkey FOREIGN KEY (profile_id) REFERENCES profiles(id) ON DELETE CASCADE,
  CONSTRAINT profile_external_ids_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX profile_external_ids_profile ON profile_external_ids USING btree (profile_id);

CREATE TABLE profile_merged_identifiers (
  profile_id bigint NOT NULL,
  workspace_id uuid NOT NULL,
  kind text NOT NULL,
  value text NOT NULL,
  alias_label text,
  merged_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT profile_merged_identifiers_kind_check CHECK ((kind = ANY (ARRAY['external_id'::text, 'service_id'::text, 'email'::text, 'phone'::text, 'user_alias'::text]))),
  CONSTRAINT profile_merged_identifiers_profile_id_fkey FOREIGN KEY (profile_id) REFERENCES profiles(id) ON DELETE CASCADE
);
CREATE INDEX profile_merged_identifiers_profile ON profile_merged_identifiers USING btree (profile_id);

CREATE TABLE profile_tombstones (
  profile_id bigint NOT NULL,
  workspace_id uuid NOT NULL,
  random_bucket integer NOT NULL,
  service_id text NOT NULL,
  external_id text,
  deleted_xid xid8 DEFAULT pg_current_xact_id() NOT NULL,
  deleted_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT profile_tombstones_pkey PRIMARY KEY (profile_id)
);
CREATE INDEX profile_tombstones_workspace ON profile_tombstones USING btree (workspace_id, deleted_at);
CREATE INDEX profile_tombstones_workspace_xid ON profile_tombstones USING btree (workspace_id, deleted_xid);

CREATE TABLE profiles (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  workspace_id uuid NOT NULL,
  service_id text NOT NULL,
  external_id text,
  random_bucket integer NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  first_name text,
  last_name text,
  email text,
  dob date,
  home_city text,
  country text,
  phone text,
  language text,
  time_zone text,
  last_coordinates double precision[],
  gender text,
  total_revenue double precision,
  attributed_campaign text,
  attributed_source text,
  attributed_adgroup text,
  attributed_ad text,
  push_subscribe text,
  email_subscribe text,
  push_opted_in_at timestamp with time zone,
  uninstalled_at timestamp with time zone,
  custom_attributes jsonb DEFAULT '{}'::jsonb NOT NULL,
  user_aliases jsonb DEFAULT '[]'::jsonb NOT NULL,
  devices jsonb DEFAULT '[]'::jsonb NOT NULL,
  push_tokens jsonb DEFAULT '[]'::jsonb NOT NULL,
  apps jsonb DEFAULT '[]'::jsonb NOT NULL,
  custom_events jsonb DEFAULT '{}'::jsonb NOT NULL,
  purchases jsonb DEFAULT '{}'::jsonb NOT NULL,
  campaigns_received jsonb DEFAULT '[]'::jsonb NOT NULL,
  canvases_received jsonb DEFAULT '[]'::jsonb NOT NULL,
  cards_clicked jsonb DEFAULT '[]'::jsonb NOT NULL,
  attribute_times jsonb DEFAULT '{}'::jsonb NOT NULL,
  changed_xid xid8,
  event_log_hours integer[],
  CONSTRAINT profiles_pkey PRIMARY KEY (id),
  CONSTRAINT profiles_email_subscribe_check CHECK ((email_subscribe = ANY (ARRAY['opted_in'::text, 'subscribed'::text, 'unsubscribed'::text]))),
  CONSTRAINT profiles_gender_check CHECK ((gender = ANY (ARRAY['M'::text, 'F'::text, 'O'::text, 'N'::text, 'P'::text]))),
  CONSTRAINT profiles_push_subscribe_check CHECK ((push_subscribe = ANY (ARRAY['opted_in'::text, 'subscribed'::text, 'unsubscribed'::text]))),
  CONSTRAINT profiles_random_bucket_check CHECK (((random_bucket >= 0) AND (random_bucket <= 9999))),
  CONSTRAINT profiles_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX profiles_bucket ON profiles USING btree (workspace_id, random_bucket, id);
CREATE INDEX profiles_device_ids ON profiles USING gin (jsonb_path_query_array(devices, '$[*]."device_id"'::jsonpath) jsonb_path_ops);
CREATE INDEX profiles_email ON profiles USING btree (workspace_id, lower(email)) WHERE (email IS NOT NULL);
CREATE UNIQUE INDEX profiles_external_id ON profiles USING btree (workspace_id, external_id) WHERE (external_id IS NOT NULL);
CREATE INDEX profiles_phone ON profiles USING btree (workspace_id, phone) WHERE (phone IS NOT NULL);
CREATE UNIQUE INDEX profiles_service_id ON profiles USING btree (workspace_id, service_id);
CREATE INDEX profiles_unsubscribed ON profiles USING btree (workspace_id) WHERE ((email_subscribe = 'unsubscribed'::text) AND (email IS NOT NULL));
CREATE TRIGGER profiles_forget_active_days AFTER DELETE ON profiles REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION profiles_forget_active_days();
CREATE TRIGGER profiles_keep_tombstones AFTER DELETE ON profiles REFERENCING OLD TABLE AS gone FOR EACH STATEMENT EXECUTE FUNCTION profiles_keep_tombstones();
CREATE TRIGGER profiles_log_change AFTER INSERT OR UPDATE ON profiles FOR EACH ROW WHEN ((current_setting('ces.profile_changes'::text, true) IS DISTINCT FROM 'logged'::text)) EXECUTE FUNCTION profiles_log_change();
CREATE TRIGGER profiles_stamp_change BEFORE INSERT OR UPDATE ON profiles FOR EACH ROW EXECUTE FUNCTION profiles_stamp_change();

CREATE TABLE purchase_counts_daily (
  workspace_id uuid NOT NULL,
  product text NOT NULL,
  app_id text NOT NULL,
  day date NOT NULL,
  quantity bigint NOT NULL,
  revenue numeric NOT NULL,
  CONSTRAINT purchase_counts_daily_pkey PRIMARY KEY (workspace_id, product, app_id, day),
  CONSTRAINT purchase_counts_daily_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE purchase_counts_hourly (
  workspace_id uuid NOT NULL,
  product text NOT NULL,
  app_id text NOT NULL,
  hour timestamp with time zone NOT NULL,
  quantity bigint NOT NULL,
  revenue numeric NOT NULL,
  CONSTRAINT purchase_counts_hourly_pkey PRIMARY KEY (workspace_id, product, app_id, hour),
  CONSTRAINT purchase_counts_hourly_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE reconciler_state (
  id boolean DEFAULT true NOT NULL,
  last_pass_at timestamp with time zone NOT NULL,
  CONSTRAINT reconciler_state_pkey PRIMARY KEY (id),
  CONSTRAINT reconciler_state_id_check CHECK (id)
);

CREATE TABLE scheduled_exports (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  segment_id uuid NOT NULL,
  cron text NOT NULL,
  time_zone text DEFAULT 'UTC'::text NOT NULL,
  fields_to_export text[] NOT NULL,
  custom_attributes_to_export text[],
  output_format text DEFAULT 'gzip'::text NOT NULL,
  callback_endpoint text,
  enabled boolean DEFAULT true NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  mode text DEFAULT 'full'::text NOT NULL,
  rows_per_part integer,
  layout text DEFAULT 'spec'::text NOT NULL,
  part_target_mb integer,
  CONSTRAINT scheduled_exports_pkey PRIMARY KEY (id),
  CONSTRAINT scheduled_exports_layout_check CHECK ((layout = ANY (ARRAY['spec'::text, 'hive'::text]))),
  CONSTRAINT scheduled_exports_mode_check CHECK ((mode = ANY (ARRAY['full'::text, 'incremental'::text]))),
  CONSTRAINT scheduled_exports_output_format_check CHECK ((output_format = ANY (ARRAY['zip'::text, 'gzip'::text, 'parquet'::text]))),
  CONSTRAINT scheduled_exports_part_target_mb_check CHECK (((part_target_mb >= 16) AND (part_target_mb <= 1024))),
  CONSTRAINT scheduled_exports_rows_per_part_check CHECK ((rows_per_part > 0)),
  CONSTRAINT scheduled_exports_segment_id_fkey FOREIGN KEY (segment_id) REFERENCES segments(id) ON DELETE CASCADE,
  CONSTRAINT scheduled_exports_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE,
  CONSTRAINT scheduled_exports_workspace_id_name_key UNIQUE (workspace_id, name)
);

CREATE TABLE scim_group_audit (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  company_id uuid NOT NULL,
  group_id uuid NOT NULL,
  actor text NOT NULL,
  action text NOT NULL,
  changes jsonb NOT NULL,
  scim_token_id uuid,
  request_origin text,
  at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT scim_group_audit_pkey PRIMARY KEY (id),
  CONSTRAINT scim_group_audit_action_check CHECK ((action = ANY (ARRAY['create'::text, 'update'::text, 'delete'::text]))),
  CONSTRAINT scim_group_audit_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies(id) ON DELETE CASCADE
);
CREATE INDEX scim_group_audit_group ON scim_group_audit USING btree (company_id, group_id, at);

CREATE TABLE scim_group_members (
  group_id uuid NOT NULL,
  user_id uuid NOT NULL,
  display text,
  added_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT scim_group_members_pkey PRIMARY KEY (group_id, user_id),
  CONSTRAINT scim_group_members_group_id_fkey FOREIGN KEY (group_id) REFERENCES scim_groups(id) ON DELETE CASCADE,
  CONSTRAINT scim_group_members_user_id_fkey FOREIGN KEY (user_id) REFERENCES dashboard_users(id) ON DELETE CASCADE
);
CREATE INDEX scim_group_members_user ON scim_group_members USING btree (user_id);

CREATE TABLE scim_groups (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  company_id uuid NOT NULL,
  display_name text NOT NULL,
  external_id text,
  grants jsonb,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT scim_groups_pkey PRIMARY KEY (id),
  CONSTRAINT scim_groups_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies(id) ON DELETE CASCADE
);
CREATE UNIQUE INDEX scim_groups_display_name ON scim_groups USING btree (company_id, lower(display_name));
CREATE INDEX scim_groups_external_id ON scim_groups USING btree (company_id, external_id) WHERE (external_id IS NOT NULL);
CREATE INDEX scim_groups_list ON scim_groups USING btree (company_id, created_at, id);

CREATE TABLE scim_tokens (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  company_id uuid NOT NULL,
  name text NOT NULL,
  token_hash bytea NOT NULL,
  key_prefix text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  revoked_at timestamp with time zone,
  CONSTRAINT scim_tokens_pkey PRIMARY KEY (id),
  CONSTRAINT scim_tokens_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies(id) ON DELETE CASCADE,
  CONSTRAINT scim_tokens_company_id_name_key UNIQUE (company_id, name),
  CONSTRAINT scim_tokens_token_hash_key UNIQUE (token_hash)
);

CREATE TABLE segment_sizes (
  workspace_id uuid NOT NULL,
  segment_id uuid NOT NULL,
  day date NOT NULL,
  size bigint NOT NULL,
  taken_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT segment_sizes_pkey PRIMARY KEY (segment_id, day),
  CONSTRAINT segment_sizes_segment_id_fkey FOREIGN KEY (segment_id) REFERENCES segments(id) ON DELETE CASCADE,
  CONSTRAINT segment_sizes_size_check CHECK ((size >= 0)),
  CONSTRAINT segment_sizes_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX segment_sizes_workspace ON segment_sizes USING btree (workspace_id, day);

CREATE TABLE segments (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  api_id text NOT NULL,
  name text NOT NULL,
  analytics_tracking_enabled boolean DEFAULT false NOT NULL,
  tags text[] DEFAULT '{}'::text[] NOT NULL,
  filter jsonb DEFAULT '{"all": []}'::jsonb NOT NULL,
  archived boolean DEFAULT false NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  description text,
  teams text[] DEFAULT '{}'::text[] NOT NULL,
  CONSTRAINT segments_pkey PRIMARY KEY (id),
  CONSTRAINT segments_workspace_id_api_id_key UNIQUE (workspace_id, api_id),
  CONSTRAINT segments_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX segments_list ON segments USING btree (workspace_id, created_at, id) WHERE (NOT archived);

CREATE TABLE subscription_group_states (
  profile_id bigint NOT NULL,
  group_id uuid NOT NULL,
  workspace_id uuid NOT NULL,
  state text NOT NULL,
  set_at timestamp with time zone NOT NULL,
  CONSTRAINT subscription_group_states_pkey PRIMARY KEY (profile_id, group_id),
  CONSTRAINT subscription_group_states_profile_id_fkey FOREIGN KEY (profile_id) REFERENCES profiles(id) ON DELETE CASCADE,
  CONSTRAINT subscription_group_states_state_check CHECK ((state = ANY (ARRAY['subscribed'::text, 'unsubscribed'::text]))),
  CONSTRAINT subscription_group_states_workspace_id_group_id_fkey FOREIGN KEY (workspace_id, group_id) REFERENCES subscription_groups(workspace_id, id) ON DELETE CASCADE
);
CREATE INDEX subscription_group_states_group ON subscription_group_states USING btree (workspace_id, group_id);

CREATE TABLE subscription_groups (
  id uuid NOT NULL,
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  channel text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  updated_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT subscription_groups_pkey PRIMARY KEY (id),
  CONSTRAINT subscription_groups_channel_check CHECK ((channel = ANY (ARRAY['email'::text, 'sms'::text]))),
  CONSTRAINT subscription_groups_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE,
  CONSTRAINT subscription_groups_workspace_id_id_key UNIQUE (workspace_id, id)
);

CREATE TABLE tags (
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT tags_pkey PRIMARY KEY (workspace_id, name),
  CONSTRAINT tags_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE teams (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  workspace_id uuid NOT NULL,
  name text NOT NULL,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT teams_pkey PRIMARY KEY (id),
  CONSTRAINT teams_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE,
  CONSTRAINT teams_workspace_id_name_key UNIQUE (workspace_id, name)
);

CREATE TABLE uninstall_events (
  id bigint GENERATED ALWAYS AS IDENTITY NOT NULL,
  workspace_id uuid NOT NULL,
  app_id uuid NOT NULL,
  profile_id bigint,
  occurred_at timestamp with time zone NOT NULL,
  CONSTRAINT uninstall_events_pkey PRIMARY KEY (id),
  CONSTRAINT uninstall_events_app_id_fkey FOREIGN KEY (app_id) REFERENCES apps(id) ON DELETE CASCADE,
  CONSTRAINT uninstall_events_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);
CREATE INDEX uninstall_events_app ON uninstall_events USING btree (app_id, occurred_at);
CREATE INDEX uninstall_events_profile ON uninstall_events USING btree (profile_id) WHERE (profile_id IS NOT NULL);
CREATE INDEX uninstall_events_series ON uninstall_events USING btree (workspace_id, occurred_at);

CREATE TABLE user_kpi_daily (
  workspace_id uuid NOT NULL,
  app_id text NOT NULL,
  day date NOT NULL,
  dau bigint DEFAULT 0 NOT NULL,
  new_users bigint DEFAULT 0 NOT NULL,
  mau bigint DEFAULT 0 NOT NULL,
  CONSTRAINT user_kpi_daily_pkey PRIMARY KEY (workspace_id, app_id, day),
  CONSTRAINT user_kpi_daily_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

-- MAU by ranges: n people newly active on each day of [day, day + length - 1] (migration 0470, docs/analytics.md)
CREATE TABLE user_kpi_spans (
  workspace_id uuid NOT NULL,
  app_id text NOT NULL,
  day date NOT NULL,
  length smallint NOT NULL,
  n bigint NOT NULL,
  CONSTRAINT user_kpi_spans_pkey PRIMARY KEY (workspace_id, app_id, day, length),
  CONSTRAINT user_kpi_spans_length_check CHECK (((length >= 1) AND (length <= 30))),
  CONSTRAINT user_kpi_spans_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces(id) ON DELETE CASCADE
);

CREATE TABLE workspaces (
  id uuid DEFAULT gen_random_uuid() NOT NULL,
  company_id uuid NOT NULL,
  name text NOT NULL,
  settings jsonb DEFAULT '{}'::jsonb NOT NULL,
  export_destination jsonb,
  created_at timestamp with time zone DEFAULT now() NOT NULL,
  CONSTRAINT workspaces_pkey PRIMARY KEY (id),
  CONSTRAINT workspaces_company_id_fkey FOREIGN KEY (company_id) REFERENCES companies(id) ON DELETE CASCADE,
  CONSTRAINT workspaces_company_id_name_key UNIQUE (company_id, name)
);

CREATE OR REPLACE FUNCTION cdi_integrations_source_changed()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>', 'public'
AS $function$
BEGIN
  IF NEW.source IS DISTINCT FROM OLD.source THEN
    NEW.watermark := NULL;
    DELETE FROM cdi_watermark_rows WHERE integration_id = NEW.id;
    DELETE FROM cdi_lane_rows WHERE integration_id = NEW.id;
    DELETE FROM cdi_file_positions WHERE integration_id = NEW.id;
  END IF;
  RETURN NEW;
END
$function$
;

CREATE OR REPLACE FUNCTION event_log_make_partitions(from_day date, days integer)
 RETURNS integer
 LANGUAGE plpgsql
 SET search_path TO '<schema>', 'public'
AS $function$
DECLARE
  d date;
  made int := 0;
BEGIN
  FOR i IN 0 .. days - 1 LOOP
    d := from_day + i;
    IF to_regclass(format('event_log_%s', to_char(d, 'YYYYMMDD'))) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF event_log FOR VALUES FROM (%L) TO (%L)',
                     format('event_log_%s', to_char(d, 'YYYYMMDD')), d::timestamp AT TIME ZONE 'UTC',
                     (d + 1)::timestamp AT TIME ZONE 'UTC');
      made := made + 1;
    END IF;
  END LOOP;
  RETURN made;
END
$function$
;

CREATE OR REPLACE FUNCTION event_log_start()
 RETURNS timestamp with time zone
 LANGUAGE sql
 STABLE
 SET search_path TO '<schema>', 'public'
AS $function$
  SELECT min(to_date(substr(c.relname, 11), 'YYYYMMDD'))::timestamp AT TIME ZONE 'UTC'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = 'event_log'::regclass AND c.relname ~ '^event_log_[0-9]{8}$'
$function$
;

CREATE OR REPLACE FUNCTION identifier_hash(value text)
 RETURNS bigint
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE STRICT
AS $function$ SELECT ('x' || left(md5(lower(value)), 16))::bit(64)::bigint $function$
;

CREATE OR REPLACE FUNCTION ingest_dead_letters_forget_names()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  IF NEW.payload IS DISTINCT FROM OLD.payload AND NEW.names IS NOT DISTINCT FROM OLD.names THEN
    NEW.names := NULL;
  END IF;
  RETURN NEW;
END
$function$
;

CREATE OR REPLACE FUNCTION json_string_hashes(doc jsonb)
 RETURNS bigint[]
 LANGUAGE sql
 IMMUTABLE PARALLEL SAFE
 SET search_path TO '<schema>', 'public'
AS $function$ SELECT coalesce(array_agg(DISTINCT identifier_hash(s #>> '{}')), '{}')
          FROM jsonb_path_query(CASE WHEN jsonb_typeof(doc) = 'object' THEN doc - 'message' ELSE doc END,
                                'strict $.** ? (@.type() == "string")') AS s $function$
;

CREATE OR REPLACE FUNCTION profiles_forget_active_days()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>', 'public'
AS $function$
BEGIN
  DELETE FROM active_user_days d USING gone g WHERE d.profile_id = g.id;
  RETURN NULL;
END
$function$
;

CREATE OR REPLACE FUNCTION profiles_keep_tombstones()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>', 'public'
AS $function$
BEGIN
  INSERT INTO profile_tombstones (profile_id, workspace_id, random_bucket, service_id, external_id)
  SELECT g.id, g.workspace_id, g.random_bucket, g.service_id, g.external_id
    FROM gone g
   WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = g.workspace_id)
  ON CONFLICT (profile_id) DO NOTHING;
  RETURN NULL;
END
$function$
;

CREATE OR REPLACE FUNCTION profiles_log_change()
 RETURNS trigger
 LANGUAGE plpgsql
 SET search_path TO '<schema>', 'public'
AS $function$
BEGIN
  INSERT INTO profile_changes (workspace_id, xid, profile_id, random_bucket) VALUES (NEW.workspace_id, pg_current_xact_id(), NEW.id, NEW.random_bucket);
  RETURN NULL;
END
$function$
;

CREATE OR REPLACE FUNCTION profiles_stamp_change()
 RETURNS trigger
 LANGUAGE plpgsql
AS $function$
BEGIN
  NEW.changed_xid := pg_current_xact_id();
  RETURN NEW;
END
$function$
;
