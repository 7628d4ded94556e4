-- The user-data endpoints (docs/user-data.md): export by identifier, delete, alias/new, identify, merge, and the
-- renaming of external ids.

-- A profile's deprecated external ids (POST /users/external_ids/rename): the old id keeps naming its profile, for
-- /users/track and every lookup by external_id, until POST /users/external_ids/remove takes it away. An id is either
-- a profile's primary id (profiles.external_id) or a deprecated one here, never both: src/profiles/commands/external-ids.ts
-- checks both under the workspace's ingestion lock, which every writer of external ids holds.
CREATE TABLE profile_external_ids (
  workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  external_id   text NOT NULL,
  profile_id    bigint NOT NULL REFERENCES profiles(id) ON DELETE CASCADE,
  deprecated_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, external_id)
);
CREATE INDEX profile_external_ids_profile ON profile_external_ids (profile_id);

-- User-data commands (delete, merge, identify, alias/new, renames) are staged in ingest_staging like tracked objects,
-- as rows of their own with part = -1, and applied in acceptance order relative to the workspace's tracked objects
-- (src/pipelines/ingest/apply/command-rows.ts). The drain finds them, and the rows they hold back, through ingest_staging_part_workspace.
COMMENT ON COLUMN ingest_staging.part IS 'ingestion partition of the tracked objects (0..INGEST_PARTITIONS-1), or -1 for a row of user-data commands';

-- GET /email/unsubscribes lists the workspace's unsubscribed profiles by time: this index holds only those, and names
-- no column that ingestion's updates change (a changed indexed column would make every such update non-HOT).
CREATE INDEX profiles_unsubscribed ON profiles (workspace_id) WHERE email_subscribe = 'unsubscribed' AND email IS NOT NULL;
CREATE INDEX email_subscriptions_unsubscribed ON email_subscriptions (workspace_id, updated_at DESC) WHERE state = 'unsubscribed';
