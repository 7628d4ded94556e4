-- Idempotency-Key on the requests that enqueue work (/users/track, catalog batches, segment exports, imports). A key
-- is claimed (status_code null) before the work, and answered in the same transaction as the work it did, so that
-- a repeat within 24 hours gets the first answer and does nothing again, even after a crash or a Redis loss.
CREATE TABLE idempotency_keys (
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  key          text NOT NULL,
  -- SHA-256 of the method, route, path parameters and body: the same key with another request is refused.
  request_hash bytea NOT NULL,
  status_code  integer,
  response     jsonb,
  created_at   timestamptz NOT NULL DEFAULT now(),
  completed_at timestamptz,
  PRIMARY KEY (workspace_id, key)
);
CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at);
