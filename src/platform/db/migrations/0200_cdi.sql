-- Cloud Data Ingestion (docs/cdi.md): integrations declared in the workspace file, their sync jobs, and what each has
-- synced so far (a table's watermark, a bucket's files).

CREATE TABLE cdi_integrations (
  -- The workspace file's UUID: the natural key, as the public API's integration ids are.
  id            uuid PRIMARY KEY,
  workspace_id  uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  name          text NOT NULL,
  -- {type: 'postgres', url_env, table} or {type: 'bucket', prefix, format}; the connection string itself is read from
  -- the named environment variable when a sync runs, never stored.
  source        jsonb NOT NULL,
  -- {every_minutes: n} or {cron: '...', time_zone}; null: on demand only.
  schedule      jsonb,
  created_at    timestamptz NOT NULL DEFAULT now(),
  updated_at    timestamptz NOT NULL DEFAULT now(),
  -- A table source's watermark: the latest UPDATED_AT synced (cdi_watermark_rows holds the rows synced at exactly
  -- that time, so that a row sharing the watermark is taken when new, and never twice). Moved by each batch.
  watermark     timestamptz,
  UNIQUE (workspace_id, id)
);

-- The hashes of the rows of a table source synced at its watermark's exact time (see above); replaced when the
-- watermark moves on. Usually a handful; a table loaded in one transaction with one UPDATED_AT puts all its rows here.
CREATE TABLE cdi_watermark_rows (
  integration_id uuid NOT NULL REFERENCES cdi_integrations(id) ON DELETE CASCADE,
  row_hash       text NOT NULL,
  PRIMARY KEY (integration_id, row_hash)
);

-- A changed source starts over: its old watermark, and the files taken from an old prefix, mean nothing for the new one.
CREATE FUNCTION cdi_integrations_source_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.source IS DISTINCT FROM OLD.source THEN
    NEW.watermark := NULL;
    DELETE FROM cdi_watermark_rows WHERE integration_id = NEW.id;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER cdi_integrations_source_changed BEFORE UPDATE OF source ON cdi_integrations
  FOR EACH ROW EXECUTE FUNCTION cdi_integrations_source_changed();

CREATE TABLE cdi_sync_jobs (
  id                uuid PRIMARY KEY DEFAULT gen_random_uuid(),
  integration_id    uuid NOT NULL REFERENCES cdi_integrations(id) ON DELETE CASCADE,
  workspace_id      uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  -- How it was asked for: the API, the integration's schedule, or `ces cdi sync`.
  trigger           text NOT NULL CHECK (trigger IN ('api', 'schedule', 'cli')),
  -- The public API's job_status values.
  status            text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'success', 'partial', 'error', 'config_error')),
  started_at        timestamptz NOT NULL DEFAULT now(),
  finished_at       timestamptz,
  rows_synced       bigint NOT NULL DEFAULT 0,
  rows_failed       bigint NOT NULL DEFAULT 0,
  -- A bucket source's run: the file it is in (key, etag) and the rows of it applied, committed with each batch. A
  -- run resumed after a crash starts there. (A table source resumes from the integration's watermark.)
  cursor            jsonb,
  last_timestamp_synced timestamptz,
  -- The rejects file the run wrote its refused rows to (in the workspace's store), when it refused any.
  rejects_key       text,
  error             text,
  attempts          integer NOT NULL DEFAULT 0
);
-- One run at a time per integration: a second is refused with 429 "Another job is in progress".
CREATE UNIQUE INDEX cdi_sync_jobs_one_running ON cdi_sync_jobs (integration_id) WHERE status = 'running';
CREATE INDEX cdi_sync_jobs_integration ON cdi_sync_jobs (integration_id, started_at DESC, id DESC);

-- Rows a run refused, with why, committed with their batch; written to the run's rejects file in the workspace's store
-- when the run ends, then deleted (they hold personal data).
CREATE TABLE cdi_sync_rejects (
  job_id uuid NOT NULL REFERENCES cdi_sync_jobs(id) ON DELETE CASCADE,
  seq    bigint GENERATED ALWAYS AS IDENTITY,
  line   text NOT NULL,
  PRIMARY KEY (job_id, seq)
);

-- The files of a bucket source taken so far: each (key, etag) once, in key order.
CREATE TABLE cdi_files_synced (
  integration_id uuid NOT NULL REFERENCES cdi_integrations(id) ON DELETE CASCADE,
  key            text NOT NULL,
  etag           text NOT NULL,
  job_id         uuid NOT NULL,
  rows           bigint NOT NULL,
  synced_at      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (integration_id, key, etag)
);
