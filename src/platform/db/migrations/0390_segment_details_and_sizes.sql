-- GET /segments/details and /segments/data_series, GET /custom_attributes (docs/read-endpoints.md).

-- What the workspace file may say of a segment beyond its filter: a description in words (the answer's
-- `text_description`; the filter in words, `description`, is generated) and the names of the teams it belongs to.
ALTER TABLE segments
  ADD COLUMN description text,
  ADD COLUMN teams text[] NOT NULL DEFAULT '{}';

-- A segment's size on a UTC day, as the workers' stats pass last counted it that day (each pass overwrites the day's
-- row, so a past day holds the last count taken on it). /segments/data_series reads at most `length` of these.
CREATE TABLE segment_sizes (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  segment_id   uuid NOT NULL REFERENCES segments (id) ON DELETE CASCADE,
  day          date NOT NULL,
  size         bigint NOT NULL CHECK (size >= 0),
  taken_at     timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (segment_id, day)
);
CREATE INDEX segment_sizes_workspace ON segment_sizes (workspace_id, day);

-- The custom attribute names the workers' stats pass has seen on a workspace's profiles, with the JSON type most of
-- them hold: GET /custom_attributes pages through these by name instead of reading every profile. A name stays once
-- seen (as the public API keeps an attribute no profile holds any more); `last_seen_on` says when a pass last found it.
CREATE TABLE custom_attribute_names (
  workspace_id  uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  name          text NOT NULL,
  data_type     text NOT NULL,
  first_seen_on date NOT NULL,
  last_seen_on  date NOT NULL,
  PRIMARY KEY (workspace_id, name)
);
