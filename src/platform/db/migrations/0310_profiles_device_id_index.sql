-- /users/export/ids by device_id: an index of each profile's device ids, so that the lookup reads the profiles that
-- hold the device rather than every profile of the workspace (a containment test on each one's devices array).
--
-- GIN over the array of the devices' `device_id` values, with jsonb_path_ops (only containment, `@>`, is asked of it:
-- the smallest GIN there is). The expression is the one src/profiles/lookup.ts matches with, word for word, or the
-- planner would not use it. Only the device ids are indexed, not the devices' other keys (model, carrier, ad ids).
-- The workspace is not in the index (GIN takes no uuid without an extension); device ids are random, so the rows a
-- value finds are those of that device, and the workspace is checked on them.
--
-- An update that leaves `devices` as it was (every /users/track and CDI write: no ingestion path writes devices) stays
-- a HOT update. Building it on 1,000,000 generated profiles took 5.6 s (46 MB; BENCHMARKS.md, export by identifier),
-- under a lock that holds writes to profiles back meanwhile: a migration runs at start-up, before the service serves.
-- Before it, one lookup by device id read the whole table there: 1.5-1.6 s; through it, 0.5 ms.
CREATE INDEX profiles_device_ids ON profiles
  USING gin (jsonb_path_query_array(devices, '$[*].device_id'::jsonpath) jsonb_path_ops);
