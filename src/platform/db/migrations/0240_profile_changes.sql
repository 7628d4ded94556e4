-- Incremental exports that cost what changed (docs/export.md#incremental-exports, BENCHMARKS.md "Recording changes").
--
-- 0170 finds a delta's members by reading every member of the segment and comparing its changed_xid with the base's
-- snapshot: the cost follows the segment's size. This log names the profiles each transaction inserted or updated, by
-- workspace and transaction id, so a delta reads the entries its base's snapshot could not see (an index range from
-- the snapshot's xmin) and looks up only those profiles. changed_xid stays: the full comparison remains the way for
-- bases from before this log and for segments whose membership moves with time (src/pipelines/exports/incremental.ts).
--
-- One row per profile per writing statement: a profile written by many transactions has many rows until they are
-- pruned (src/pipelines/exports/incremental.ts forgetExportBases: below the oldest snapshot a kept base holds, per workspace).
-- No primary key and one narrow index keep the insert cheap; the profiles' own updates stay HOT (no indexed column
-- of theirs changes).
CREATE TABLE profile_changes (
  workspace_id  uuid NOT NULL,
  xid           xid8 NOT NULL,
  profile_id    bigint NOT NULL,
  random_bucket integer NOT NULL
);
CREATE INDEX profile_changes_workspace_xid ON profile_changes (workspace_id, xid);

-- Who writes the log: a row trigger logs every insert and update of a profile, by any path (SQL included). The
-- ingestion statements that write many profiles at once log them themselves, set-based, in the same statement (a
-- CTE over its RETURNING, src/profiles/change-log.ts), and set ces.profile_changes = 'logged' for it so that the
-- trigger's WHEN skips their rows. Measured (BENCHMARKS.md "Recording changes"): a statement-level trigger with
-- transition tables cost a 20,000-row rewrite about 10% (the capture of every new row), a row trigger 28%, an
-- index on changed_xid 39% (no update stays HOT), logging in the statement itself nothing measurable.
CREATE FUNCTION profiles_log_change() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  INSERT INTO profile_changes (workspace_id, xid, profile_id, random_bucket) VALUES (NEW.workspace_id, pg_current_xact_id(), NEW.id, NEW.random_bucket);
  RETURN NULL;
END
$$;
CREATE TRIGGER profiles_log_change AFTER INSERT OR UPDATE ON profiles
  FOR EACH ROW WHEN (current_setting('ces.profile_changes', true) IS DISTINCT FROM 'logged') EXECUTE FUNCTION profiles_log_change();

-- Deleted profiles since a snapshot, by the same rule.
CREATE INDEX profile_tombstones_workspace_xid ON profile_tombstones (workspace_id, deleted_xid);

-- The segment filter a shard selected its members with. A delta reads the log only where every base shard it
-- compares with recorded the filter it runs with now (an edited segment is compared in full), so shards that ended
-- before this log existed (NULL) are compared in full too: the log holds none of the changes made before it.
ALTER TABLE export_shards_done ADD COLUMN segment_filter jsonb;

-- The oldest transaction running when an export was recorded: every snapshot its shards take has an xmin at or above
-- it (on a replica too, which reads only once it has replayed past the export's primary_lsn). Pruning the log keeps
-- what an unfinished export's shards may still need, before they record their snapshots. Exports unfinished at this
-- migration get the migration's.
ALTER TABLE exports ADD COLUMN created_xmin xid8;
UPDATE exports SET created_xmin = pg_snapshot_xmin(pg_current_snapshot()) WHERE status IN ('queued', 'running');
ALTER TABLE exports ALTER COLUMN created_xmin SET DEFAULT pg_snapshot_xmin(pg_current_snapshot());

-- Member lists in layers, so that a delta's cost does not grow with the segment to record its own. A full export
-- (and every MAX_MEMBER_LAYERS-th delta of a chain) records its members whole, per random_bucket (export_members); a
-- delta records only the profiles whose membership it changed relative to its base (export_member_changes: joined,
-- is_member true; left or deleted, false). An export's members are its member_layers, newest first: the newest
-- layer that names a profile says whether it is a member; a profile no diff layer names is a member when the last
-- (whole) layer holds it. src/pipelines/exports/member-layers.ts reads them.
CREATE TABLE export_member_changes (
  export_id     uuid NOT NULL REFERENCES exports(id) ON DELETE CASCADE,
  profile_id    bigint NOT NULL,
  random_bucket integer NOT NULL,
  is_member     boolean NOT NULL,
  PRIMARY KEY (export_id, profile_id)
);
CREATE INDEX export_member_changes_profile ON export_member_changes (profile_id);

-- The exports whose member records make up this export's members, newest first, itself included; the last holds
-- whole lists. NULL (exports from before this migration) is the export alone.
ALTER TABLE exports ADD COLUMN member_layers uuid[];
