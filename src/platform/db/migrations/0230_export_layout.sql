-- Hive-style key layout on request (docs/export.md "Where the files go"): a scheduled export's runs use the layout
-- its schedule declares. 'spec' is the spec's layout.
ALTER TABLE scheduled_exports ADD COLUMN layout text NOT NULL DEFAULT 'spec' CHECK (layout IN ('spec', 'hive'));
