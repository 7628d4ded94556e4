-- Ingestion partitions: a staged /users/track request is split by a hash of each object's user identifier
-- (src/ingest/partitions.ts), one row per partition, so that a workspace's partitions apply on separate
-- PostgreSQL backends at once, each deleting its own rows in its own transaction. Rows staged before this
-- migration are partition 0.
ALTER TABLE ingest_staging ADD COLUMN part smallint NOT NULL DEFAULT 0;
CREATE INDEX ingest_staging_part ON ingest_staging (part, id);
