-- Re-delivering hours of an event export (docs/events.md, "Backfill and erasure"): an hour's files planned again from
-- the log as it is now (after an erasure removed a person's events, or by `ces events backfill`), written at the same
-- keys, and the keys it no longer writes deleted.

-- Hours to re-deliver: an erasure asks for every (export, type, hour) that delivered the person's events, in its own
-- transaction; the export's next pass re-plans them and deletes the request.
CREATE TABLE event_redeliveries (
  export_id    uuid NOT NULL REFERENCES event_exports (id) ON DELETE CASCADE,
  event_type   text NOT NULL,
  hour         timestamptz NOT NULL,
  requested_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (export_id, event_type, hour)
);

-- Objects a re-plan made stale, recorded in its transaction so that a crash cannot leave them in the bucket: an hour's
-- `_SUCCESS` (deleted before its files are rewritten) and files of sequence numbers it no longer writes (after).
CREATE TABLE event_export_stale_keys (
  export_id uuid NOT NULL REFERENCES event_exports (id) ON DELETE CASCADE,
  key       text NOT NULL,
  kind      text NOT NULL CHECK (kind IN ('success', 'file')),
  PRIMARY KEY (export_id, key)
);

-- Erasures the log could not re-deliver everywhere: the person's events in hours older than the log's first day are in
-- delivered files no longer in the log, which only an operator can rewrite. `ces events erasure-report` lists, for
-- each, the export files of those hours; kept TOMBSTONE_RETENTION_DAYS, as the tombstone that names the same ids.
CREATE TABLE event_erasures (
  workspace_id     uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  user_id          text NOT NULL,
  external_user_id text,
  -- The hours that may hold the person's events and are no longer in the log: from their profile's creation to the
  -- log's first day at the erasure.
  since            timestamptz NOT NULL,
  until            timestamptz NOT NULL,
  erased_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_erasures_workspace ON event_erasures (workspace_id, erased_at);
