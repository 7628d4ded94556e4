-- Event exports (docs/events.md): the workspace file's `event_exports`, each delivering the event log (migration 0320)
-- to a bucket, one file per event type, hour and sequence number, exactly once.
CREATE TABLE event_exports (
  id                  uuid PRIMARY KEY,
  workspace_id        uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  name                text NOT NULL,
  -- Null: the workspace's export destination, else its part of the built-in store.
  destination         jsonb,
  format              text NOT NULL CHECK (format IN ('avro', 'parquet', 'ndjson')),
  -- Null: every type.
  event_types         text[],
  flush_seconds       integer NOT NULL CHECK (flush_seconds BETWEEN 1 AND 3600),
  max_events_per_file integer NOT NULL CHECK (max_events_per_file BETWEEN 1 AND 1000000),
  -- Every event of the log whose transaction id is below this is in a planned file: the next flush plans the rows of
  -- the transactions between it and the oldest one still running (pg_snapshot_xmin). 0: from the log's first row.
  planned_xid         bigint NOT NULL DEFAULT 0,
  created_at          timestamptz NOT NULL DEFAULT now(),
  updated_at          timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_exports_workspace ON event_exports (workspace_id);

-- The files of an export: planned (with exactly the rows they hold: the event type, the hour, the transaction range and
-- the slice of it) before they are written, so that a flush retried after a crash writes the same object again.
CREATE TABLE event_export_files (
  export_id  uuid NOT NULL REFERENCES event_exports (id) ON DELETE CASCADE,
  event_type text NOT NULL,
  hour       timestamptz NOT NULL,
  seq        integer NOT NULL,
  xid_from   bigint NOT NULL,
  xid_to     bigint NOT NULL,
  -- The rows of (type, hour, [xid_from, xid_to)) from (first_xid, first_id) on, in (xid, id) order, up to the next
  -- file's first row: a range that holds more than the export's max_events_per_file is cut where the plan counted,
  -- by row keys rather than offsets, so that rows an erasure removes meanwhile move no other row to another file.
  first_xid  bigint,
  first_id   uuid,
  next_xid   bigint,
  next_id    uuid,
  -- The events planned; a file written after an erasure holds fewer.
  events     integer NOT NULL,
  key        text NOT NULL,
  bytes      bigint,
  planned_at timestamptz NOT NULL DEFAULT now(),
  written_at timestamptz,
  PRIMARY KEY (export_id, event_type, hour, seq)
);
CREATE INDEX event_export_files_unwritten ON event_export_files (export_id) WHERE written_at IS NULL;

-- The hours of an export whose files are all written and to which no event can come any more: `_SUCCESS` is written
-- once per event type and hour, and `success_at` recorded after it.
CREATE TABLE event_export_hours (
  export_id  uuid NOT NULL REFERENCES event_exports (id) ON DELETE CASCADE,
  event_type text NOT NULL,
  hour       timestamptz NOT NULL,
  success_at timestamptz NOT NULL,
  PRIMARY KEY (export_id, event_type, hour)
);
