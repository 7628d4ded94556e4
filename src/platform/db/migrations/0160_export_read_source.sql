-- Exports that read from a hot standby (EXPORT_DATABASE_URL).
--   exports.primary_lsn: the primary's WAL position when the export was requested. A shard reads from the standby
--     once the standby has replayed up to it, so an export never misses what was committed before it was requested.
--   export_shards_done.read_from / replay_lsn / replay_at: where each shard read its members and, for a standby,
--     how far it had replayed (position, and the primary's commit time of the last replayed transaction). The
--     manifest reports the oldest, so a warehouse knows how fresh the export is.
ALTER TABLE exports ADD COLUMN primary_lsn pg_lsn;
ALTER TABLE export_shards_done ADD COLUMN read_from text NOT NULL DEFAULT 'primary' CHECK (read_from IN ('primary', 'replica'));
ALTER TABLE export_shards_done ADD COLUMN replay_lsn pg_lsn;
ALTER TABLE export_shards_done ADD COLUMN replay_at timestamptz;
