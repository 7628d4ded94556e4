-- Analytics rollups (docs/analytics.md): what the series endpoints (/events/data_series, /purchases/*_series,
-- /kpi/{new_users,dau,mau}/data_series) read, so that a series costs at most `length` rows and never a raw event.
-- Written by the statement that writes the event log (src/profiles/event-log.ts), in the transaction that applies the
-- events to the profiles, so that an accepted event is counted exactly when it is logged. They outlive the log's
-- retention (nothing drops them) and hold no identifier of a person, except active_user_days, which an erasure deletes.
--
-- `app_id` '' is the row of every app together (an event without app_id counts only there), and a purchase's
-- `product` '' the row of every product: each is kept rather than summed at read time so that a series reads `length`
-- rows whatever the number of apps and products. Buckets are UTC days and hours of the event's own `time`.

CREATE TABLE event_counts_daily (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  name         text NOT NULL,
  app_id       text NOT NULL,
  day          date NOT NULL,
  count        bigint NOT NULL,
  PRIMARY KEY (workspace_id, name, app_id, day)
);
COMMENT ON TABLE event_counts_daily IS 'Custom events a UTC day, per name and app ('''' = all apps) (docs/analytics.md)';

CREATE TABLE event_counts_hourly (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  name         text NOT NULL,
  app_id       text NOT NULL,
  hour         timestamptz NOT NULL,
  count        bigint NOT NULL,
  PRIMARY KEY (workspace_id, name, app_id, hour)
);

-- Quantity is the sum of purchases' `quantity`; revenue the sum of price x quantity, whatever the currency (as the
-- profile's total_revenue: no exchange rates here, docs/analytics.md), exact in numeric.
CREATE TABLE purchase_counts_daily (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  product      text NOT NULL,
  app_id       text NOT NULL,
  day          date NOT NULL,
  quantity     bigint NOT NULL,
  revenue      numeric NOT NULL,
  PRIMARY KEY (workspace_id, product, app_id, day)
);

CREATE TABLE purchase_counts_hourly (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  product      text NOT NULL,
  app_id       text NOT NULL,
  hour         timestamptz NOT NULL,
  quantity     bigint NOT NULL,
  revenue      numeric NOT NULL,
  PRIMARY KEY (workspace_id, product, app_id, hour)
);

-- The names /events/list, /events and /purchases/product_list list (a custom event's name, a purchase's product id):
-- one row each, added by the first event that carries it. The descriptive columns are Braze's; nothing sets them yet.
CREATE TABLE event_names (
  workspace_id                 uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  name                         text NOT NULL,
  description                  text,
  included_in_analytics_report boolean NOT NULL DEFAULT false,
  status                       text NOT NULL DEFAULT 'Active',
  tag_names                    text[] NOT NULL DEFAULT '{}',
  first_seen_at                timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, name)
);

CREATE TABLE product_names (
  workspace_id  uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  product       text NOT NULL,
  first_seen_at timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (workspace_id, product)
);

-- One row per person, app ('' = any) and UTC day they were active on (a custom event or purchase of theirs accepted
-- for that day): inserted ON CONFLICT DO NOTHING, so that only a person's first activity of a day costs a write and
-- changes the counters below. Deleted with the profile (by the foreign key: an erasure, a merge's merged user, a
-- deletion; docs/privacy.md).
CREATE TABLE active_user_days (
  profile_id bigint NOT NULL REFERENCES profiles (id) ON DELETE CASCADE,
  app_id     text NOT NULL,
  day        date NOT NULL,
  PRIMARY KEY (profile_id, app_id, day)
);

-- Per workspace, app ('' = any) and UTC day: `dau` the people active that day; `new_users` those whose first active
-- day it is; `mau` those active on some day of the 30 ending with it. Each new active day d of a person (between their
-- nearest earlier active day p and later one n) adds 1 to dau[d], 1 to mau[D] for D in [max(d, p + 30), min(d + 29,
-- n - 1)] (the days its 30-day window covers and no other of theirs did), and, when it is their first, 1 to
-- new_users[d] and -1 to new_users[n]. Exact whatever the order events arrive in (docs/analytics.md).
CREATE TABLE user_kpi_daily (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  app_id       text NOT NULL,
  day          date NOT NULL,
  dau          bigint NOT NULL DEFAULT 0,
  new_users    bigint NOT NULL DEFAULT 0,
  mau          bigint NOT NULL DEFAULT 0,
  PRIMARY KEY (workspace_id, app_id, day)
);
