-- Segment export shards: each shard uploads its full 5,000-line parts and leaves its last, shorter run of lines
-- here (gzip-compressed NDJSON); the export's finishing job merges these tails into full parts plus at most one
-- short final part, so that every part but the last has exactly 5,000 lines.
CREATE TABLE export_tails (
  export_id  uuid NOT NULL REFERENCES exports(id) ON DELETE CASCADE,
  shard      integer NOT NULL,
  users      integer NOT NULL CHECK (users > 0),
  data       bytea NOT NULL,
  created_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (export_id, shard)
);

-- Shards the export was cut into (the finishing job's parts are numbered as shard `shard_count`).
ALTER TABLE exports ADD COLUMN shard_count integer;
-- Scheduled exports and the status read look exports up by workspace.
CREATE INDEX exports_workspace ON exports (workspace_id, created_at DESC);
