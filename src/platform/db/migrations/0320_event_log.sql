-- The event log (docs/events.md): every custom event and purchase applied to a profile, and every change the event
-- stream delivers (subscription states, uninstalls, canvas entries, deletions, merges), one immutable row each, written
-- in the transaction that applies it to the profile (src/profiles/event-log.ts), so that an accepted event is in the
-- log exactly once. Delivered files are the long-term store: the log keeps EVENT_LOG_RETENTION_DAYS of days.
--
-- Partitioned by the day the event entered the log (`accepted_at`, its transaction's time), so that old days go by DROP
-- rather than DELETE. `xid` is the writing transaction's id (a 64-bit xid8 as bigint, which BRIN can index): a delivery
-- takes the rows of the transactions that have all ended below a bound (pg_snapshot_xmin), so no row of a range it
-- delivered can appear later, whatever the order in which transactions commit. Only BRIN indexes on the insert path
-- (rows arrive in xid order); finding a person's events for an erasure goes by `profile_id`, whose btree costs the
-- writes a little (BENCHMARKS.md).
CREATE TABLE event_log (
  workspace_id     uuid NOT NULL,
  accepted_at      timestamptz NOT NULL DEFAULT now(),
  xid              bigint NOT NULL DEFAULT pg_current_xact_id()::text::bigint,
  id               uuid NOT NULL,
  type             text NOT NULL,
  time             timestamptz NOT NULL,
  profile_id       bigint,
  user_id          text,
  external_user_id text,
  app_id           text,
  name             text,
  properties       jsonb,
  data             jsonb NOT NULL DEFAULT '{}'
) PARTITION BY RANGE (accepted_at);
COMMENT ON TABLE event_log IS 'What happened to people, one row per event, partitioned by day (docs/events.md)';

CREATE INDEX event_log_xid ON event_log USING brin (xid) WITH (pages_per_range = 32);
CREATE INDEX event_log_profile ON event_log (profile_id) WHERE profile_id IS NOT NULL;

-- Makes the day partitions (UTC days) of [from, from + days) that do not exist yet; the reconciler calls it on every
-- pass (days ahead) and a migration here (days around today), so that a write never meets a day without its partition.
CREATE FUNCTION event_log_make_partitions(from_day date, days int) RETURNS int LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
DECLARE
  d date;
  made int := 0;
BEGIN
  FOR i IN 0 .. days - 1 LOOP
    d := from_day + i;
    IF to_regclass(format('event_log_%s', to_char(d, 'YYYYMMDD'))) IS NULL THEN
      EXECUTE format('CREATE TABLE %I PARTITION OF event_log FOR VALUES FROM (%L) TO (%L)',
                     format('event_log_%s', to_char(d, 'YYYYMMDD')), d::timestamp AT TIME ZONE 'UTC',
                     (d + 1)::timestamp AT TIME ZONE 'UTC');
      made := made + 1;
    END IF;
  END LOOP;
  RETURN made;
END
$$;

SELECT event_log_make_partitions((now() AT TIME ZONE 'UTC')::date - 1, 9);
