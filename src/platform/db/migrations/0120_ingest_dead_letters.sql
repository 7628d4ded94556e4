-- Objects PostgreSQL refused at apply time (a NUL or a lone surrogate in a string, a number out of range, a
-- payload that is not JSON...): the apply isolates them from the rest of their batch and moves them here, so that
-- one bad object never stalls the other objects of its partition (src/pipelines/ingest/apply/dead-letters.ts). A row is never
-- retried automatically; docs/ingestion.md ("Dead letters") shows how to read one and stage it again once fixed.
-- `payload` is in the staged form ({events, purchases, attributes}, src/profiles/tracked-types.ts), so a fixed row goes back
-- into ingest_staging as it is. It holds personal data, and goes with its workspace.
CREATE TABLE ingest_dead_letters (
  id            bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  -- 'track': a staged /users/track row (staged_id); 'import': a record of a bulk import (import_id, line).
  source        text NOT NULL CHECK (source IN ('track', 'import')),
  workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  staged_id     bigint,
  import_id     uuid REFERENCES imports(id) ON DELETE CASCADE,
  line          bigint,
  part          smallint NOT NULL,
  -- When the request was accepted (track), or when the import read the record.
  accepted_at   timestamptz NOT NULL,
  objects       integer NOT NULL,
  payload       text NOT NULL,
  -- The SQLSTATE PostgreSQL answered (22P05, 22021...), or 'payload' for a row that is not a staged payload at all.
  error_code    text NOT NULL,
  error_message text NOT NULL,
  failed_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX ingest_dead_letters_workspace ON ingest_dead_letters (workspace_id, id);
-- A resumed import writes its whole rejects file again, these records included.
CREATE INDEX ingest_dead_letters_import ON ingest_dead_letters (import_id, line) WHERE import_id IS NOT NULL;

-- A batch takes, for each workspace with rows staged in its partition, that workspace's oldest rows in turn
-- (src/pipelines/ingest/apply/drain-staging.ts), so that one workspace's backlog delays another's rows by one batch at most. The lateral
-- per workspace reads this index; ingest_staging_part (part, id) still serves the drain's other queries.
CREATE INDEX ingest_staging_part_workspace ON ingest_staging (part, workspace_id, id);
