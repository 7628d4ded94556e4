-- MAU counted by spans instead of day by day (issue 43: the rollups' cost on events at times spread over months).
--
-- Each new active day d of a person adds 1 to MAU on the days [max(d, p + 30), min(d + 29, n - 1)] (migration 0380):
-- written as 1 to each of up to 30 `user_kpi_daily.mau` rows, which for events spread over many days was most of what
-- the rollups cost (every distinct range its 30 rows, bench:ingest's default shape). Now the range itself is counted:
-- `n` ranges beginning on `day` and `length` days long (1 to 30). A MAU point D sums the ranges that hold it, which
-- all begin on D - 29 .. D (src/features/analytics/series.ts): at most 30 x 30 rows a point, by this key's order. The
-- `mau` rows written before stay, and are added to what the ranges give.
CREATE TABLE user_kpi_spans (
  workspace_id uuid NOT NULL REFERENCES workspaces (id) ON DELETE CASCADE,
  app_id       text NOT NULL,
  day          date NOT NULL,
  length       smallint NOT NULL CHECK (length BETWEEN 1 AND 30),
  n            bigint NOT NULL,
  PRIMARY KEY (workspace_id, app_id, day, length)
);
COMMENT ON TABLE user_kpi_spans IS
  'MAU by ranges: n people newly active on each day of [day, day + length - 1] (migration 0470, docs/analytics.md)';
