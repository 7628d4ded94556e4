-- Custom attributes declared in the workspace file (docs/workspace.md): a description, tags and a data type that
-- GET /custom_attributes answers, and a name listed before any profile holds it (as the public API's dashboard
-- pre-populates attributes). A declared name no pass has seen yet has no seen type and no seen days.
ALTER TABLE custom_attribute_names
  ALTER COLUMN data_type DROP NOT NULL,
  ALTER COLUMN first_seen_on DROP NOT NULL,
  ALTER COLUMN last_seen_on DROP NOT NULL,
  ADD COLUMN declared_type text,
  ADD COLUMN description text,
  ADD COLUMN tags text[] NOT NULL DEFAULT '{}';
