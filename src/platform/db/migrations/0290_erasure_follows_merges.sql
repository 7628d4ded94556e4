-- Erasure that follows the person (docs/privacy.md).
--
-- What a merge folds into the kept profile: the merged profile's identifiers (primary and deprecated external ids,
-- service id, address, phone, and the aliases that did not move), recorded against the kept profile when the merge is
-- applied, and moved on again when that profile is merged in turn. The merged profile's row goes, so nothing else
-- says that copies naming these identifiers (dead letters, Idempotency-Key answers, live activity tokens, consent
-- per address) are the kept person's. An erasure of the kept profile reads them with its own identifiers; copies
-- written after `merged_at` naming a freed identifier belong to whoever took it since, and stay. The rows go with the
-- kept profile (cascade), read first by the erasure.
CREATE TABLE profile_merged_identifiers (
  profile_id   bigint NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
  workspace_id uuid NOT NULL,
  kind         text NOT NULL CHECK (kind IN ('external_id', 'service_id', 'email', 'phone', 'user_alias')),
  value        text NOT NULL,
  -- The alias label of a 'user_alias' (value is its name).
  alias_label  text,
  merged_at    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX profile_merged_identifiers_profile ON profile_merged_identifiers (profile_id);

-- A merge moves the merged profile's uninstall events to the kept one, and an erasure unlinks them: both by profile.
CREATE INDEX uninstall_events_profile ON uninstall_events (profile_id) WHERE profile_id IS NOT NULL;

-- Erasure by index lookup. An erasure used to read every Idempotency-Key answer of the workspace (24 hours of them)
-- with jsonpath once per identifier, and every dead letter with ILIKE, holding the workspace's whole ingestion lock:
-- minutes at a million keys. Now each row records, when written, hashes of the values it names (`names`), and an
-- erasure looks its values' hashes up in a GIN index, then checks the few rows found exactly. The hash: the first 64
-- bits of md5 of the lower-cased value (a collision only adds a row to check). `search_path` is fixed to this schema
-- so that the generated column computes the same in any session. Both indexes are written rarely (a dead letter, an
-- answer that names someone) and read by every erasure: without GIN's pending list (fastupdate), which a lookup reads
-- whole (26 ms a lookup in bench:erase once a few thousand erasures had updated letters, against 1 ms without).
CREATE FUNCTION identifier_hash(value text) RETURNS bigint LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ SELECT ('x' || left(md5(lower(value)), 16))::bit(64)::bigint $$;

-- An answer's string values, but its `message` (every answer's "success"); '{}' when none.
CREATE FUNCTION json_string_hashes(doc jsonb) RETURNS bigint[] LANGUAGE sql IMMUTABLE PARALLEL SAFE
  SET search_path FROM CURRENT
  AS $$ SELECT coalesce(array_agg(DISTINCT identifier_hash(s #>> '{}')), '{}')
          FROM jsonb_path_query(CASE WHEN jsonb_typeof(doc) = 'object' THEN doc - 'message' ELSE doc END,
                                'strict $.** ? (@.type() == "string")') AS s $$;

-- Computed from the answer by PostgreSQL itself, whoever writes it (and for the keys already stored); only answers
-- that name something (a rename's external_ids, an error quoting a value) enter the index: /users/track's plain
-- counts do not.
ALTER TABLE idempotency_keys ADD COLUMN names bigint[] GENERATED ALWAYS AS (json_string_hashes(response)) STORED;
CREATE INDEX idempotency_keys_names ON idempotency_keys USING gin (names) WITH (fastupdate = off) WHERE names <> '{}';

-- Dead letters' payloads are parsed by the writer (src/pipelines/ingest/apply/dead-letters.ts: PostgreSQL cannot read many of
-- them, which is often why they are here): the users each names. NULL for letters written before this migration, and
-- for a payload an operator edits (the trigger below): an erasure reads those whole, and records their names.
ALTER TABLE ingest_dead_letters ADD COLUMN names bigint[];
CREATE INDEX ingest_dead_letters_names ON ingest_dead_letters USING gin (names) WITH (fastupdate = off);
CREATE INDEX ingest_dead_letters_unnamed ON ingest_dead_letters (workspace_id) WHERE names IS NULL;
CREATE FUNCTION ingest_dead_letters_forget_names() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.payload IS DISTINCT FROM OLD.payload AND NEW.names IS NOT DISTINCT FROM OLD.names THEN
    NEW.names := NULL;
  END IF;
  RETURN NEW;
END
$$;
CREATE TRIGGER ingest_dead_letters_forget_names BEFORE UPDATE OF payload ON ingest_dead_letters
  FOR EACH ROW EXECUTE FUNCTION ingest_dead_letters_forget_names();

-- Tokens by the external id they were registered with.
CREATE INDEX live_activity_tokens_external_id ON live_activity_tokens (external_id) WHERE external_id IS NOT NULL;
