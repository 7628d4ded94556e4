-- Ingestion partitions: a staged /users/track request is split by a hash of each object's user identifier
-- (src/pipelines/ingest/apply/partitions.ts), one row per partition, so that a workspace's partitions apply on separate
-- PostgreSQL backends at once, each deleting its own rows in its own transaction. Rows staged before this
-- migration are partition 0.
ALTER TABLE ingest_staging ADD COLUMN part smallint NOT NULL DEFAULT 0;
CREATE INDEX ingest_staging_part ON ingest_staging (part, id);

-- A bulk import applies each batch as one transaction per partition, at once; each partition keeps its own
-- position and counts, moved in the same transaction as its profile updates, so a resumed import applies each
-- record exactly once even when one partition committed a batch and another did not. `partitions` is fixed at
-- the first run: a record's partition must not change on resume. Counts in `imports` are those of runs before
-- this migration; the status adds the partitions' to them, and its position is the lowest partition's.
ALTER TABLE imports ADD COLUMN partitions smallint;
CREATE TABLE import_partitions (
  import_id        uuid NOT NULL REFERENCES imports(id) ON DELETE CASCADE,
  part             smallint NOT NULL,
  position         bigint NOT NULL,
  events_applied   bigint NOT NULL DEFAULT 0,
  events_unmatched bigint NOT NULL DEFAULT 0,
  -- Refused records are counted by partition 0 alone.
  rejected         bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (import_id, part)
);
