-- The data model of every resource in the spec. Forward-only: later changes go in new numbered files.
-- Identifiers the API exposes ("api ids") are text so that ids from the hosted original can be imported unchanged.

-- gen_random_uuid() is built into PostgreSQL 13+; no extension (an extension would live in one schema and
-- be dropped with it, and concurrent installs into several schemas collide).

CREATE TABLE companies (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  name        text NOT NULL UNIQUE,
  created_at  timestamptz NOT NULL DEFAULT now()
);

-- A workspace is the spec's "app group".
CREATE TABLE workspaces (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  company_id         uuid NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
  name               text NOT NULL,
  settings           jsonb NOT NULL DEFAULT '{}',
  -- Export bucket (provider, bucket, region/project, endpoint, credentials). Never returned by the API.
  export_destination jsonb,
  created_at         timestamptz NOT NULL DEFAULT now(),
  UNIQUE (company_id, name)
);

CREATE TABLE teams (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name         text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, name)
);

CREATE TABLE apps (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  api_id       text NOT NULL UNIQUE,
  name         text NOT NULL,
  platform     text NOT NULL DEFAULT 'ios',
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, name)
);

-- Secrets are stored as SHA-256 of the key; the prefix is kept to name a key in logs and errors.
CREATE TABLE api_keys (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name         text NOT NULL,
  key_hash     bytea NOT NULL UNIQUE,
  key_prefix   text NOT NULL,
  permissions  text[] NOT NULL DEFAULT '{}',
  created_at   timestamptz NOT NULL DEFAULT now(),
  revoked_at   timestamptz,
  UNIQUE (workspace_id, name)
);

CREATE TABLE scim_tokens (
  id          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  company_id  uuid NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
  name        text NOT NULL,
  token_hash  bytea NOT NULL UNIQUE,
  key_prefix  text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  revoked_at  timestamptz,
  UNIQUE (company_id, name)
);

-- User profiles. Standard fields are columns (segment filters and lookups use them); nested collections are
-- jsonb in exactly the export record's shape so that an export line is built by PostgreSQL without a join.
CREATE TABLE profiles (
  id                   bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id         uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  service_id           text NOT NULL,
  external_id          text,
  random_bucket        integer NOT NULL CHECK (random_bucket BETWEEN 0 AND 9999),
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  first_name           text,
  last_name            text,
  email                text,
  dob                  date,
  home_city            text,
  country              text,
  phone                text,
  language             text,
  time_zone            text,
  last_coordinates     double precision[],
  gender               text CHECK (gender IN ('M', 'F', 'O', 'N', 'P')),
  total_revenue        double precision,
  attributed_campaign  text,
  attributed_source    text,
  attributed_adgroup   text,
  attributed_ad        text,
  push_subscribe       text CHECK (push_subscribe IN ('opted_in', 'subscribed', 'unsubscribed')),
  email_subscribe      text CHECK (email_subscribe IN ('opted_in', 'subscribed', 'unsubscribed')),
  push_opted_in_at     timestamptz,
  uninstalled_at       timestamptz,
  custom_attributes    jsonb NOT NULL DEFAULT '{}',
  -- [{alias_name, alias_label}], kept in step with profile_aliases (the lookup table).
  user_aliases         jsonb NOT NULL DEFAULT '[]',
  devices              jsonb NOT NULL DEFAULT '[]',
  push_tokens          jsonb NOT NULL DEFAULT '[]',
  apps                 jsonb NOT NULL DEFAULT '[]',
  -- [{name, first, last, count}] over all history; first/last are ISO 8601 UTC strings with milliseconds
  -- ('YYYY-MM-DDTHH:MM:SS.mmmZ') so that they compare correctly as strings in jsonpath.
  custom_events        jsonb NOT NULL DEFAULT '[]',
  purchases            jsonb NOT NULL DEFAULT '[]',
  campaigns_received   jsonb NOT NULL DEFAULT '[]',
  canvases_received    jsonb NOT NULL DEFAULT '[]',
  cards_clicked        jsonb NOT NULL DEFAULT '[]',
  -- Per-attribute time of the last write, for last-write-wins ingestion: {field: iso-time}.
  attribute_times      jsonb NOT NULL DEFAULT '{}'
);

CREATE UNIQUE INDEX profiles_service_id ON profiles (workspace_id, service_id);
CREATE UNIQUE INDEX profiles_external_id ON profiles (workspace_id, external_id) WHERE external_id IS NOT NULL;
CREATE INDEX profiles_email ON profiles (workspace_id, lower(email)) WHERE email IS NOT NULL;
CREATE INDEX profiles_phone ON profiles (workspace_id, phone) WHERE phone IS NOT NULL;
-- Segment scans and export shards walk a workspace by random_bucket range, then id.
CREATE INDEX profiles_bucket ON profiles (workspace_id, random_bucket, id);

CREATE TABLE profile_aliases (
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  alias_label  text NOT NULL,
  alias_name   text NOT NULL,
  profile_id   bigint NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  PRIMARY KEY (workspace_id, alias_label, alias_name)
);
CREATE INDEX profile_aliases_profile ON profile_aliases (profile_id);

-- Segment membership is `filter` (see src/profiles/segments/filter.ts) compiled to a SQL predicate over profiles.
CREATE TABLE segments (
  id                          uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id                uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  api_id                      text NOT NULL,
  name                        text NOT NULL,
  analytics_tracking_enabled  boolean NOT NULL DEFAULT false,
  tags                        text[] NOT NULL DEFAULT '{}',
  filter                      jsonb NOT NULL DEFAULT '{"all": []}',
  archived                    boolean NOT NULL DEFAULT false,
  created_at                  timestamptz NOT NULL DEFAULT now(),
  updated_at                  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, api_id)
);
CREATE INDEX segments_list ON segments (workspace_id, created_at, id) WHERE NOT archived;

CREATE TABLE tags (
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name         text NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, name)
);

CREATE TABLE content_blocks (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name         text NOT NULL,
  content      text NOT NULL DEFAULT '',
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, name)
);

-- fields: [{name, type}] with type one of string, number, boolean, time, object, array.
CREATE TABLE catalogs (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name         text NOT NULL,
  description  text,
  fields       jsonb NOT NULL DEFAULT '[]',
  created_at   timestamptz NOT NULL DEFAULT now(),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, name)
);

CREATE TABLE catalog_items (
  catalog_id  uuid NOT NULL REFERENCES catalogs(id) ON DELETE CASCADE,
  item_id     text NOT NULL,
  data        jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  updated_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (catalog_id, item_id)
);

CREATE TABLE email_templates (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id       uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  api_id             text NOT NULL,
  template_name      text NOT NULL,
  subject            text NOT NULL,
  body               text NOT NULL,
  plaintext_body     text,
  preheader          text,
  tags               text[] NOT NULL DEFAULT '{}',
  should_inline_css  boolean,
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, api_id)
);

CREATE TABLE canvases (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  api_id       text NOT NULL,
  name         text NOT NULL,
  tags         text[] NOT NULL DEFAULT '{}',
  -- draft, active, stopped; archived is separate because a stopped canvas can also be archived.
  status       text NOT NULL DEFAULT 'active' CHECK (status IN ('draft', 'active', 'stopped')),
  archived     boolean NOT NULL DEFAULT false,
  api_triggered boolean NOT NULL DEFAULT true,
  created_at   timestamptz NOT NULL DEFAULT now(),
  last_edited  timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, api_id)
);
CREATE INDEX canvases_list ON canvases (workspace_id, created_at, id);

CREATE TABLE canvas_schedules (
  id                 uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  canvas_id          uuid NOT NULL REFERENCES canvases(id) ON DELETE CASCADE,
  schedule_id        text NOT NULL UNIQUE,
  dispatch_id        text NOT NULL,
  -- {time, in_local_time, ...}: replaced whole by an update.
  schedule           jsonb NOT NULL,
  recipients         jsonb,
  audience           jsonb,
  trigger_properties jsonb,
  -- scheduled, sending, sent, cancelled
  state              text NOT NULL DEFAULT 'scheduled',
  created_at         timestamptz NOT NULL DEFAULT now(),
  updated_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE feed_cards (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  api_id       text NOT NULL,
  type         text NOT NULL CHECK (type IN ('NewsItem', 'CaptionedImage', 'Banner')),
  title        text NOT NULL,
  tags         text[] NOT NULL DEFAULT '{}',
  archived     boolean NOT NULL DEFAULT false,
  created_at   timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, api_id)
);
CREATE INDEX feed_cards_list ON feed_cards (workspace_id, created_at, id);

CREATE TABLE preference_centers (
  id                      uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id            uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  api_id                  text NOT NULL,
  name                    text NOT NULL,
  title                   text NOT NULL DEFAULT '',
  page_html               text NOT NULL DEFAULT '',
  confirmation_page_html  text NOT NULL DEFAULT '',
  redirect_page_html      text,
  options                 jsonb NOT NULL DEFAULT '{}',
  state                   text NOT NULL DEFAULT 'active',
  created_at              timestamptz NOT NULL DEFAULT now(),
  updated_at              timestamptz NOT NULL DEFAULT now(),
  UNIQUE (workspace_id, api_id)
);

-- A live activity declared for an app: the shape its content_state must keep ({attribute: type}).
CREATE TABLE live_activities (
  id                   uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  app_id               uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  activity_id          text NOT NULL,
  content_state_shape  jsonb NOT NULL DEFAULT '{}',
  content_state        jsonb,
  push_token           text,
  state                text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'ended', 'removed')),
  stale_date           timestamptz,
  dismissal_date       timestamptz,
  ended_at             timestamptz,
  removed_at           timestamptz,
  created_at           timestamptz NOT NULL DEFAULT now(),
  updated_at           timestamptz NOT NULL DEFAULT now(),
  UNIQUE (app_id, activity_id)
);

-- Subscription state by address, also for addresses no profile carries yet; applied when one does.
CREATE TABLE email_subscriptions (
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  email        text NOT NULL,  -- lower-cased
  state        text NOT NULL CHECK (state IN ('opted_in', 'subscribed', 'unsubscribed')),
  updated_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, email)
);

CREATE TABLE invalid_phone_numbers (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  phone        text NOT NULL,
  reason       text NOT NULL CHECK (reason IN ('provider_error', 'deactivated')),
  detected_at  timestamptz NOT NULL
);
CREATE INDEX invalid_phone_numbers_list ON invalid_phone_numbers (workspace_id, detected_at DESC, id DESC);

CREATE TABLE hard_bounces (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  email        text NOT NULL,
  bounced_at   timestamptz NOT NULL
);
CREATE INDEX hard_bounces_list ON hard_bounces (workspace_id, bounced_at DESC, id DESC);

CREATE TABLE uninstall_events (
  id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  app_id       uuid NOT NULL REFERENCES apps(id) ON DELETE CASCADE,
  profile_id   bigint,
  occurred_at  timestamptz NOT NULL
);
CREATE INDEX uninstall_events_series ON uninstall_events (workspace_id, occurred_at);

-- SCIM dashboard users (company-wide), the permission sets they may reference, and their audit trail.
CREATE TABLE permission_sets (
  id           uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  company_id   uuid NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
  name         text NOT NULL,
  permissions  text[] NOT NULL DEFAULT '{}',
  UNIQUE (company_id, name)
);

CREATE TABLE dashboard_users (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  company_id      uuid NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
  user_name       text NOT NULL,
  given_name      text NOT NULL,
  family_name     text NOT NULL,
  department      text NOT NULL,
  permissions     jsonb NOT NULL,
  last_sign_in_at timestamptz,
  created_at      timestamptz NOT NULL DEFAULT now(),
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX dashboard_users_user_name ON dashboard_users (company_id, lower(user_name));

CREATE TABLE dashboard_user_audit (
  id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  company_id      uuid NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
  dashboard_user_id uuid NOT NULL,
  actor           text NOT NULL,  -- the SCIM token's name and the X-Request-Origin
  action          text NOT NULL CHECK (action IN ('create', 'update', 'delete')),
  changes         jsonb NOT NULL,
  at              timestamptz NOT NULL DEFAULT now()
);

-- Segment exports and the parts they wrote.
CREATE TABLE exports (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  object_prefix   text NOT NULL UNIQUE,
  company_id      uuid NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
  workspace_id    uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  segment_id      uuid NOT NULL REFERENCES segments(id) ON DELETE CASCADE,
  status          text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'ready', 'failed')),
  request         jsonb NOT NULL,
  destination     text NOT NULL CHECK (destination IN ('local', 's3', 'gcs')),
  key_prefix      text,
  users_done      bigint NOT NULL DEFAULT 0,
  parts_done      integer NOT NULL DEFAULT 0,
  error           text,
  scheduled_by    text,
  created_at      timestamptz NOT NULL DEFAULT now(),
  started_at      timestamptz,
  finished_at     timestamptz,
  url_expires_at  timestamptz
);
CREATE INDEX exports_segment ON exports (segment_id, created_at DESC);

CREATE TABLE export_parts (
  export_id   uuid NOT NULL REFERENCES exports(id) ON DELETE CASCADE,
  shard       integer NOT NULL,
  part_index  integer NOT NULL,
  object_key  text NOT NULL,
  users       integer NOT NULL,
  bytes       bigint NOT NULL,
  sha256      text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (export_id, shard, part_index)
);
