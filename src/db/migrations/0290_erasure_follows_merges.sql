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
