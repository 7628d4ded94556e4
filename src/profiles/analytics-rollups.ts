/**
 * The analytics rollups (migration 0380, docs/analytics.md), kept by the statement that writes the event log: CTEs over
 * `logged` (the rows that statement inserted), so that an event is counted exactly when it is logged, in the
 * transaction that applies it to the profile, by one statement per batch. Each rollup row a batch touches is
 * aggregated first (ON CONFLICT refuses to touch one row twice in a statement) and written in key order, so that two
 * batches lock shared counter rows in the same order.
 *
 * Activity (DAU, new users, MAU) is exact under one condition, which the apply meets: two transactions never stamp the
 * same profile at once. Every writer of events first UPDATEs the profile's row (its aggregates), so a second batch of
 * the same person waits for the first to commit, and its statement's snapshot then sees the first's stamps.
 */

/** A purchase or custom event counts; the other types of the log (subscription changes, deletions...) do not. */
const COUNTED = `counted AS (
  SELECT workspace_id AS ws, type, time, profile_id, app_id, name, data FROM logged
   WHERE type IN ('users.behaviors.CustomEvent', 'users.behaviors.Purchase'))`;

/** Each event counts in its app's row and in the all-apps row ''. */
const APPS = `CROSS JOIN LATERAL (VALUES (''), (nullif(c.app_id, ''))) AS a(app)`;

const eventCounts = (table: string, bucket: string, bucketSql: string) => `${table} AS (
  INSERT INTO ${table} AS t (workspace_id, name, app_id, ${bucket}, count)
  SELECT c.ws, c.name, a.app, ${bucketSql}, count(*)
    FROM counted c ${APPS}
   WHERE c.type = 'users.behaviors.CustomEvent' AND a.app IS NOT NULL
   GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (workspace_id, name, app_id, ${bucket}) DO UPDATE SET count = t.count + excluded.count)`;

/** A purchase counts in its (app, product) row and in those of all apps '' and all products ''. */
const purchaseCounts = (table: string, bucket: string, bucketSql: string) => `${table} AS (
  INSERT INTO ${table} AS t (workspace_id, product, app_id, ${bucket}, quantity, revenue)
  SELECT c.ws, p.product, a.app, ${bucketSql}, sum((c.data->>'quantity')::bigint),
         sum((c.data->>'price')::numeric * (c.data->>'quantity')::bigint)
    FROM counted c ${APPS} CROSS JOIN LATERAL (VALUES (''), (nullif(c.name, ''))) AS p(product)
   WHERE c.type = 'users.behaviors.Purchase' AND a.app IS NOT NULL AND p.product IS NOT NULL
   GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (workspace_id, product, app_id, ${bucket})
  DO UPDATE SET quantity = t.quantity + excluded.quantity, revenue = t.revenue + excluded.revenue)`;

const NAMES = `event_names_seen AS (
  INSERT INTO event_names (workspace_id, name)
  SELECT DISTINCT ws, name FROM counted WHERE type = 'users.behaviors.CustomEvent' AND name IS NOT NULL ORDER BY 1, 2
  ON CONFLICT DO NOTHING),
product_names_seen AS (
  INSERT INTO product_names (workspace_id, product)
  SELECT DISTINCT ws, name FROM counted WHERE type = 'users.behaviors.Purchase' AND name IS NOT NULL ORDER BY 1, 2
  ON CONFLICT DO NOTHING)`;

const DAY = `(c.time AT TIME ZONE 'UTC')::date`;
const HOUR = `date_trunc('hour', c.time, 'UTC')`;

/**
 * The person's new active days (a stamp inserted, not there before), each with the nearest earlier active day `prev`
 * and later one `next`. The batch's new stamps are taken as if added one by one in day order: `prev` is the latest of
 * the stored days and the batch's earlier new ones; `next` comes from the stored days only (the statement's snapshot
 * does not show its own inserts, which is what that order needs). Then each new day's deltas (migration 0380); the
 * MAU days a new day adds are grouped by their range first (most people's is [d, d + 29]), so that a batch expands
 * each distinct range once, not 30 rows per person.
 */
const ACTIVITY = `acts AS (
  SELECT DISTINCT c.ws, c.profile_id, a.app, ${DAY} AS day
    FROM counted c ${APPS}
   WHERE c.profile_id IS NOT NULL AND a.app IS NOT NULL),
stamped AS (
  INSERT INTO active_user_days (profile_id, app_id, day)
  SELECT profile_id, app, day FROM acts ORDER BY 1, 2, 3
  ON CONFLICT DO NOTHING
  RETURNING profile_id, app_id, day),
fresh AS (
  SELECT s.profile_id, s.app_id, s.day, lag(s.day) OVER (PARTITION BY s.profile_id, s.app_id ORDER BY s.day) AS prev_new
    FROM stamped s),
bounds AS (
  SELECT a.ws, f.app_id, f.day,
         GREATEST(f.prev_new, (SELECT max(t.day) FROM active_user_days t
                                WHERE t.profile_id = f.profile_id AND t.app_id = f.app_id AND t.day < f.day)) AS prev,
         (SELECT min(t.day) FROM active_user_days t
           WHERE t.profile_id = f.profile_id AND t.app_id = f.app_id AND t.day > f.day) AS next
    FROM fresh f JOIN acts a ON a.profile_id = f.profile_id AND a.app = f.app_id AND a.day = f.day),
intervals AS (
  SELECT ws, app_id, GREATEST(day, prev + 30) AS lo, LEAST(day + 29, next - 1) AS hi, count(*) AS n
    FROM bounds GROUP BY 1, 2, 3, 4),
deltas AS (
  SELECT ws, app_id, day, count(*) AS dau, count(*) FILTER (WHERE prev IS NULL) AS new_users, 0 AS mau
    FROM bounds GROUP BY 1, 2, 3
  UNION ALL
  SELECT ws, app_id, next, 0, -count(*), 0 FROM bounds WHERE prev IS NULL AND next IS NOT NULL GROUP BY 1, 2, 3
  UNION ALL
  SELECT i.ws, i.app_id, i.lo + g.i, 0, 0, i.n FROM intervals i, generate_series(0, i.hi - i.lo) AS g(i)),
kpi AS (
  INSERT INTO user_kpi_daily AS t (workspace_id, app_id, day, dau, new_users, mau)
  SELECT ws, app_id, day, sum(dau), sum(new_users), sum(mau) FROM deltas GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (workspace_id, app_id, day)
  DO UPDATE SET dau = t.dau + excluded.dau, new_users = t.new_users + excluded.new_users, mau = t.mau + excluded.mau)`;

/** The CTEs that keep every rollup, to follow a `logged AS (INSERT INTO event_log ... RETURNING ...)` CTE. */
export const ROLLUP_CTES = [
  COUNTED,
  NAMES,
  eventCounts('event_counts_daily', 'day', DAY),
  eventCounts('event_counts_hourly', 'hour', HOUR),
  purchaseCounts('purchase_counts_daily', 'day', DAY),
  purchaseCounts('purchase_counts_hourly', 'hour', HOUR),
  ACTIVITY,
].join(',\n');

/** The columns `logged` must return for ROLLUP_CTES. */
export const ROLLUP_RETURNING = 'RETURNING workspace_id, type, time, profile_id, app_id, name, data';

/**
 * FOR BENCHMARKS ONLY (bench/ingest.ts's alternating runs price the rollups on /users/track): when the process starts
 * with CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS=1, the event log is written without its rollups, and every analytics
 * series of what it applied is wrong. Never set it in an install; it is not a configuration setting.
 */
export const ROLLUPS_SKIPPED_FOR_BENCH = process.env.CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS === '1';
