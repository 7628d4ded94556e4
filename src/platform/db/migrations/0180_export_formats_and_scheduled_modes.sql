-- Parquet exports and warehouse-friendly scheduled exports (docs/export.md).
--
-- Scheduled exports may write Parquet, pick their part size (rows_per_part, NULL: the spec's 5,000) and run as
-- incremental exports: each run relative to the schedule's last ready run of the same segment (the first run, and a
-- run whose base is gone, is full).
ALTER TABLE scheduled_exports DROP CONSTRAINT scheduled_exports_output_format_check;
ALTER TABLE scheduled_exports ADD CONSTRAINT scheduled_exports_output_format_check CHECK (output_format IN ('zip', 'gzip', 'parquet'));
ALTER TABLE scheduled_exports ADD COLUMN mode text NOT NULL DEFAULT 'full' CHECK (mode IN ('full', 'incremental'));
ALTER TABLE scheduled_exports ADD COLUMN rows_per_part integer CHECK (rows_per_part > 0);
