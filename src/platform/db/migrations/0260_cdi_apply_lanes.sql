-- A table sync applies a batch on several connections at once (CDI_APPLY_LANES, src/pipelines/cdi/table-sync.ts). Each lane
-- commits, with its rows, the hashes of those rows as one array here, and their UPDATED_AT beside (as the watermark
-- prints it: fixed-width UTC text, ordered as the times are), so that a run stopped between two lanes' commits
-- resumes without applying a row twice or skipping one. When the watermark moves to a time, the entries before it
-- go, those at it join the watermark's hashes, and those past it stay.
CREATE TABLE cdi_lane_rows (
  integration_id uuid NOT NULL REFERENCES cdi_integrations (id) ON DELETE CASCADE,
  id bigint GENERATED ALWAYS AS IDENTITY,
  row_hashes text[] NOT NULL,
  row_times text[] NOT NULL,
  PRIMARY KEY (integration_id, id)
);

-- A refused row's place in the source's order (UPDATED_AT, then hash), so that the rejects file lists a table's
-- refused rows in source order whichever lane refused them; NULL for a bucket's rows, listed in the order recorded.
ALTER TABLE cdi_sync_rejects ADD COLUMN source_order text;

-- A changed source starts over: its lanes' rows, too, mean nothing for the new one.
CREATE OR REPLACE FUNCTION cdi_integrations_source_changed() RETURNS trigger LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
  IF NEW.source IS DISTINCT FROM OLD.source THEN
    NEW.watermark := NULL;
    DELETE FROM cdi_watermark_rows WHERE integration_id = NEW.id;
    DELETE FROM cdi_lane_rows WHERE integration_id = NEW.id;
  END IF;
  RETURN NEW;
END
$$;
