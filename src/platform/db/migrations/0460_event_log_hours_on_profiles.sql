-- Finding a person's events in the log without a btree entry per event (issue 42: the log's cost on ingestion).
--
-- The btree on event_log.profile_id took one random insert per logged event: in isolation 1.6 µs of a row's 3.4 µs,
-- and on a day partition at 20,000 events/s an index of about 40 GB written at random. Only an erasure and a merge
-- read it. Now the profile says in which hours of the log its custom events and purchases are (`event_log_hours`,
-- hours since the Unix epoch, UTC, of the transactions that logged them): the apply's profile rewrite stamps the hour,
-- at no cost of its own row, and an erasure reads those hours by a BRIN range on `accepted_at`
-- (src/profiles/commands/erase.ts), which it re-delivers whole anyway. The other types are rarer, and written by
-- writers that do not rewrite the profile: a partial btree keeps finding them by profile.
ALTER TABLE profiles ADD COLUMN event_log_hours int[];
COMMENT ON COLUMN profiles.event_log_hours IS
  'Hours (since the Unix epoch, UTC) in which the event log took custom events or purchases of this profile, within its retention (migration 0460)';

CREATE INDEX event_log_accepted_at ON event_log USING brin (accepted_at) WITH (pages_per_range = 32);

UPDATE profiles p SET event_log_hours = s.hours
  FROM (SELECT profile_id, array_agg(DISTINCT hour ORDER BY hour) AS hours
          FROM (SELECT profile_id, floor(extract(epoch FROM accepted_at) / 3600)::int AS hour FROM event_log
                 WHERE type IN ('users.behaviors.CustomEvent', 'users.behaviors.Purchase') AND profile_id IS NOT NULL) l
         GROUP BY profile_id) s
 WHERE p.id = s.profile_id;

DROP INDEX event_log_profile;
CREATE INDEX event_log_profile ON event_log (profile_id)
  WHERE profile_id IS NOT NULL AND type NOT IN ('users.behaviors.CustomEvent', 'users.behaviors.Purchase');

-- Log rows are no longer re-pointed by a merge (that took the btree too): the merged profile's rows keep its id, and
-- this says whose they are now, for an erasure of the kept profile and for series filtered by segment. A merge of the
-- kept profile in turn moves its rows here on; they go with the kept profile, and once the log holds nothing from
-- before `merged_at` (the reconciler's pass, src/profiles/event-log.ts).
CREATE TABLE event_log_merged_profiles (
  merged_profile_id bigint PRIMARY KEY,
  profile_id        bigint NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
  merged_at         timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX event_log_merged_profiles_profile ON event_log_merged_profiles (profile_id);

-- The start of the log's oldest day partition (what it still holds), or null when it has none: for the stamps'
-- trimming, the series by segment and an erasure's report.
CREATE FUNCTION event_log_start() RETURNS timestamptz LANGUAGE sql STABLE SET search_path FROM CURRENT AS $$
  SELECT min(to_date(substr(c.relname, 11), 'YYYYMMDD'))::timestamp AT TIME ZONE 'UTC'
    FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
   WHERE i.inhparent = 'event_log'::regclass AND c.relname ~ '^event_log_[0-9]{8}$'
$$;
