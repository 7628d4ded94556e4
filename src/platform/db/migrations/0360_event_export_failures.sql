-- An event export whose destination refuses writes (docs/events.md, "Operating"): one row while it fails, deleted by
-- the first pass that writes again. The sweep leaves the export alone until `next_attempt_at` (exponential backoff,
-- capped at EVENT_EXPORT_RETRY_MAX_SECONDS) unless the workspace file changed it since; `warned_at` keeps the warning
-- to one line a minute per export, whichever worker fails. `last_error` is the store's message with the
-- destination's credentials removed.
CREATE TABLE event_export_failures (
  export_id       uuid PRIMARY KEY REFERENCES event_exports (id) ON DELETE CASCADE,
  first_failed_at timestamptz NOT NULL,
  last_failed_at  timestamptz NOT NULL,
  failures        integer NOT NULL,
  last_error_code text NOT NULL,
  last_error      text NOT NULL,
  next_attempt_at timestamptz NOT NULL,
  warned_at       timestamptz
);
