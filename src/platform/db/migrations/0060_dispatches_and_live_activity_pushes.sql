-- Scheduled canvas triggers: what each schedule armed, and what each firing did.
-- `version` grows with every update; delayed jobs carry it, so a job armed for an older schedule finds itself
-- stale and does nothing even when it could not be removed from the queue in time.
ALTER TABLE canvas_schedules
  ADD COLUMN version                 integer NOT NULL DEFAULT 1,
  ADD COLUMN broadcast               boolean NOT NULL DEFAULT false,
  ADD COLUMN canvas_entry_properties jsonb,
  -- The UTC instants the current version fires at (one per group of audience time zones sharing a UTC offset
  -- at the local time); NULL until the worker arms the schedule.
  ADD COLUMN fire_times              timestamptz[];
CREATE INDEX canvas_schedules_pending ON canvas_schedules (state) WHERE state IN ('scheduled', 'sending');
CREATE INDEX canvas_schedules_canvas ON canvas_schedules (canvas_id);

-- One row per firing of a schedule (one per fire instant). Claiming the row is what makes a firing happen once.
CREATE TABLE canvas_dispatches (
  id                      bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  schedule_row_id         uuid NOT NULL REFERENCES canvas_schedules(id) ON DELETE CASCADE,
  canvas_id               uuid NOT NULL REFERENCES canvases(id) ON DELETE CASCADE,
  dispatch_id             text NOT NULL,
  version                 integer NOT NULL,
  fire_at                 timestamptz NOT NULL,
  -- IANA zones whose users this firing entered; NULL means every zone (a UTC send).
  time_zones              text[],
  status                  text NOT NULL DEFAULT 'running' CHECK (status IN ('running', 'done', 'skipped')),
  users_entered           bigint NOT NULL DEFAULT 0,
  trigger_properties      jsonb,
  canvas_entry_properties jsonb,
  note                    text,
  started_at              timestamptz NOT NULL DEFAULT now(),
  finished_at             timestamptz,
  UNIQUE (schedule_row_id, version, fire_at)
);
CREATE INDEX canvas_dispatches_dispatch ON canvas_dispatches (dispatch_id);

-- Devices registered for a live activity (many phones may follow one activity_id).
CREATE TABLE live_activity_tokens (
  live_activity_id uuid NOT NULL REFERENCES live_activities(id) ON DELETE CASCADE,
  push_token       text NOT NULL,
  external_id      text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  updated_at       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (live_activity_id, push_token)
);

-- The outbound ActivityKit pushes: written with the accepted update, delivered by the live-activity-push queue.
-- The default delivery adapter only stamps the row, so this table is the record tests and operators read.
CREATE TABLE live_activity_pushes (
  id               bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  live_activity_id uuid NOT NULL REFERENCES live_activities(id) ON DELETE CASCADE,
  event            text NOT NULL CHECK (event IN ('update', 'end')),
  payload          jsonb NOT NULL,
  status           text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'delivered', 'failed')),
  adapter          text,
  tokens           integer,
  error            text,
  created_at       timestamptz NOT NULL DEFAULT now(),
  delivered_at     timestamptz
);
CREATE INDEX live_activity_pushes_activity ON live_activity_pushes (live_activity_id, id);
CREATE INDEX live_activity_pushes_queued ON live_activity_pushes (created_at) WHERE status = 'queued';
