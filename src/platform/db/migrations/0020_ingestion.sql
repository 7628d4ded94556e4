-- Ingestion: the durable log of accepted /users/track requests, bulk imports and their progress.

-- Accepted /users/track objects wait here until a worker applies them. The request commits its row before it
-- answers 201, so an accepted object survives any crash of the API, the worker or Redis; a worker deletes the
-- rows it applies in the same transaction as the profile updates, so a retried job never applies them twice.
CREATE TABLE ingest_staging (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  accepted_at   timestamptz NOT NULL DEFAULT now(),
  objects       integer NOT NULL,
  -- {events, attributes, purchases}: the validated, normalized objects (src/profiles/tracked-types.ts), as JSON text.
  payload       text NOT NULL
) WITH (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000, autovacuum_vacuum_cost_delay = 0);

-- A bulk import of an NDJSON or JSON-array file of event objects from a store. `position` counts the records
-- (lines, or array elements) handled and committed; it moves in the same transaction as the profile updates of
-- those records, so a restarted import resumes exactly where the last commit left it.
CREATE TABLE imports (
  id              uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  workspace_id    uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  store           text NOT NULL CHECK (store IN ('local', 's3', 'gcs')),
  object_key      text NOT NULL,
  format          text NOT NULL CHECK (format IN ('ndjson', 'json')),
  status          text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'completed', 'failed')),
  position        bigint NOT NULL DEFAULT 0,
  events_applied  bigint NOT NULL DEFAULT 0,
  events_unmatched bigint NOT NULL DEFAULT 0,
  rejected        bigint NOT NULL DEFAULT 0,
  bytes_total     bigint,
  rejects_key     text NOT NULL,
  error           text,
  requested_by    text,
  attempts        integer NOT NULL DEFAULT 0,
  created_at      timestamptz NOT NULL DEFAULT now(),
  started_at      timestamptz,
  finished_at     timestamptz,
  updated_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX imports_workspace ON imports (workspace_id, created_at DESC);

-- Ingestion rewrites a profile row per batch it touches. Free room in each page lets PostgreSQL keep the new row
-- version on the same page (a HOT update) and skip inserting into the six indexes of profiles: about a third less
-- work per event applied. Existing pages get the room as they are rewritten.
ALTER TABLE profiles SET (fillfactor = 80);
