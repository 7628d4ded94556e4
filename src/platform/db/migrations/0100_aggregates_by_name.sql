-- custom_events and purchases are kept as objects keyed by name, each value still the whole
-- {name, first, last, count} entry, instead of arrays sorted by name. Merging a batch's aggregates into an array
-- took every stored entry apart, joined, sorted and rebuilt them for each profile written; into an object it looks
-- up only the batch's names and concatenates (src/pipelines/ingest/apply.ts). Over 50,000 profiles of the ingestion benchmark
-- (ten to twenty entries each), one UPDATE merging one event into each: 3.1-3.2 s as arrays, 1.9-2.1 s as objects,
-- against 0.8 s to rewrite the same rows with no merge. Exports and segment filters read the entries through
-- `$.*` instead of `$[*]`; an export lists them in jsonb's key order (shorter names first) instead of by name.
-- Existing profiles are rewritten once here.
ALTER TABLE profiles ALTER COLUMN custom_events SET DEFAULT '{}', ALTER COLUMN purchases SET DEFAULT '{}';
UPDATE profiles SET
  custom_events = CASE WHEN jsonb_typeof(custom_events) = 'array'
    THEN (SELECT coalesce(jsonb_object_agg(e->>'name', e), '{}') FROM jsonb_array_elements(custom_events) AS e) ELSE custom_events END,
  purchases = CASE WHEN jsonb_typeof(purchases) = 'array'
    THEN (SELECT coalesce(jsonb_object_agg(e->>'name', e), '{}') FROM jsonb_array_elements(purchases) AS e) ELSE purchases END
WHERE jsonb_typeof(custom_events) = 'array' OR jsonb_typeof(purchases) = 'array';
