-- A bucket source's read positions belong to the integration, not to a run (docs/cdi.md): a run that stops in the
-- middle of a file, whatever its end (a crash, a failure for good), leaves the rows it committed applied, and the next
-- run goes on after them instead of reading the file from its first row again. One position per file (key and etag)
-- being read: a run that stopped in one file and finds a new file before it in key order reads that one first.
-- `rows_at` is the time that stamps every row of the file (files carry no UPDATED_AT): when a run began reading it,
-- so the rest of the file is not stamped with a later run's time, which would beat writes made in between.
CREATE TABLE cdi_file_positions (
  integration_id uuid NOT NULL REFERENCES cdi_integrations (id) ON DELETE CASCADE,
  key            text NOT NULL,
  etag           text NOT NULL,
  -- Rows of the file applied (or refused) so far, committed with each batch.
  done           bigint NOT NULL,
  rows_at        timestamptz NOT NULL,
  PRIMARY KEY (integration_id, key, etag)
);

-- The runs' cursors (migration 0200) become the integrations' positions: a run resumed after the upgrade goes on there.
INSERT INTO cdi_file_positions (integration_id, key, etag, done, rows_at)
SELECT integration_id, cursor->>'key', cursor->>'etag', (cursor->>'done')::bigint, started_at
  FROM cdi_sync_jobs WHERE cursor IS NOT NULL AND status = 'running'
ON CONFLICT DO NOTHING;
ALTER TABLE cdi_sync_jobs DROP COLUMN cursor;

-- A changed source starts over: its positions, too, mean nothing for the new one.
CREATE OR REPLACE FUNCTION cdi_integrations_source_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.source IS DISTINCT FROM OLD.source THEN
    NEW.watermark := NULL;
    DELETE FROM cdi_watermark_rows WHERE integration_id = NEW.id;
    DELETE FROM cdi_lane_rows WHERE integration_id = NEW.id;
    DELETE FROM cdi_file_positions WHERE integration_id = NEW.id;
  END IF;
  RETURN NEW;
END
$$;

-- The refused rows of runs that ended before this migration: a run that failed for good kept them (they are source
-- rows verbatim). A run now forgets them when it ends, whatever its end (src/pipelines/cdi/sync-runs.ts, finishJob).
DELETE FROM cdi_sync_rejects r USING cdi_sync_jobs j WHERE j.id = r.job_id AND j.status <> 'running';
