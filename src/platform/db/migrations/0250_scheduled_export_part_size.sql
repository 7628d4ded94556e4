-- Parts cut by compressed size (part_target_mb, docs/export.md "Part size"): a scheduled export may ask for it too.
-- NULL: cut by lines (rows_per_part, or the spec's 5,000). The two are alternatives (the workspace file refuses both).
ALTER TABLE scheduled_exports ADD COLUMN part_target_mb integer CHECK (part_target_mb BETWEEN 16 AND 1024);
