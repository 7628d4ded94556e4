-- The event log's `properties` as json (the text as written, checked to be JSON) instead of jsonb: nothing reads into
-- them (a delivery hands their text on, src/pipelines/events/formats/json-text.ts), and jsonb's parsing and building
-- of each object was about a fifth of what PostgreSQL spends on a log row (BENCHMARKS.md, issue 42). The writers give
-- JSON.stringify's text. Rows already logged keep jsonb's text of them, which the delivery reads as before.
-- Upgrading rewrites the retained days of the log once (EVENT_LOG_RETENTION_DAYS, 7 by default) under a lock that
-- holds the apply of ingestion meanwhile: requests are still accepted and staged (README, "Running").
ALTER TABLE event_log ALTER COLUMN properties TYPE json USING properties::json;
