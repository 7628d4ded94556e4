-- Incremental exports (`changes_since`, docs/export.md#incremental-exports).
--
-- The rule: every shard of an export reads in one REPEATABLE READ transaction, and records that transaction's
-- snapshot (pg_current_snapshot()) with its random_bucket range. A later export of the segment relative to it holds a
-- member when the member's last write is not visible in the snapshot of the earlier shard that covered its bucket, or
-- when the member was not in that earlier export at all. A write committed while an export runs is therefore either
-- visible to the shard that reads its profile (and in this export) or not (and, being invisible to this export's
-- snapshot, in the next one): never in neither, and only once in each.

-- The id of the transaction that last wrote the profile (insert or update, by any path: track, imports, aliases,
-- attributes, SQL). NULL for rows last written before this migration: visible to every snapshot an export can hold.
ALTER TABLE profiles ADD COLUMN changed_xid xid8;

CREATE FUNCTION profiles_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.changed_xid := pg_current_xact_id();
  RETURN NEW;
END
$$;
CREATE TRIGGER profiles_stamp_change BEFORE INSERT OR UPDATE ON profiles FOR EACH ROW EXECUTE FUNCTION profiles_stamp_change();

-- Deleted profiles, so that an incremental export can name those that were members of its base export. Kept while an
-- export of the workspace may still serve as a base (src/pipelines/exports/incremental.ts prunes them). Profiles that go with
-- their workspace leave no tombstone: the workspace row is already gone when the cascade deletes them.
CREATE TABLE profile_tombstones (
  profile_id    bigint PRIMARY KEY,
  workspace_id  uuid NOT NULL,
  random_bucket integer NOT NULL,
  service_id    text NOT NULL,
  external_id   text,
  deleted_xid   xid8 NOT NULL DEFAULT pg_current_xact_id(),
  deleted_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX profile_tombstones_workspace ON profile_tombstones (workspace_id, deleted_at);

-- search_path is fixed to the schema migrated: an operator's DELETE from another search_path still finds the table.
CREATE FUNCTION profiles_keep_tombstones() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO profile_tombstones (profile_id, workspace_id, random_bucket, service_id, external_id)
  SELECT g.id, g.workspace_id, g.random_bucket, g.service_id, g.external_id
    FROM gone g
   WHERE EXISTS (SELECT 1 FROM workspaces w WHERE w.id = g.workspace_id)
  ON CONFLICT (profile_id) DO NOTHING;
  RETURN NULL;
END
$$;
CREATE TRIGGER profiles_keep_tombstones AFTER DELETE ON profiles REFERENCING OLD TABLE AS gone
  FOR EACH STATEMENT EXECUTE FUNCTION profiles_keep_tombstones();

-- The members of every export, per random_bucket: the sorted profile ids as one bigint array, so a member costs about
-- 8 bytes before compression instead of a row's ~40 (BENCHMARKS.md has the measured figure). Written by each shard
-- from the same snapshot as its lines; kept while the export may serve as a base.
CREATE TABLE export_members (
  export_id     uuid NOT NULL REFERENCES exports(id) ON DELETE CASCADE,
  random_bucket integer NOT NULL,
  profile_ids   bigint[] NOT NULL,
  PRIMARY KEY (export_id, random_bucket)
);

-- A shard's random_bucket range and the snapshot it read in (null for shards that ended before this migration: their
-- export cannot be a base).
ALTER TABLE export_shards_done ADD COLUMN bucket_from integer;
ALTER TABLE export_shards_done ADD COLUMN bucket_to integer;
ALTER TABLE export_shards_done ADD COLUMN snapshot pg_snapshot;
ALTER TABLE export_shards_done ADD COLUMN removed bigint NOT NULL DEFAULT 0;

-- Parts of an incremental export are of two kinds: the members that changed or joined (`users`), and the profiles
-- that left the segment or were deleted (`removed`, files named removed-*).
ALTER TABLE export_parts ADD COLUMN kind text NOT NULL DEFAULT 'users' CHECK (kind IN ('users', 'removed'));
ALTER TABLE export_parts DROP CONSTRAINT export_parts_pkey;
ALTER TABLE export_parts ADD PRIMARY KEY (export_id, kind, shard, part_index);
ALTER TABLE export_tails ADD COLUMN kind text NOT NULL DEFAULT 'users' CHECK (kind IN ('users', 'removed'));
ALTER TABLE export_tails DROP CONSTRAINT export_tails_pkey;
ALTER TABLE export_tails ADD PRIMARY KEY (export_id, kind, shard);

-- The export an incremental export is relative to, the profiles it names as removed, and when its member list was
-- dropped (past EXPORT_INCREMENTAL_RETENTION_DAYS and superseded): from then on it cannot be a base.
ALTER TABLE exports ADD COLUMN changes_since uuid;
ALTER TABLE exports ADD COLUMN removed_done bigint NOT NULL DEFAULT 0;
ALTER TABLE exports ADD COLUMN members_forgotten_at timestamptz;
