import type { EventEntry } from './event-log-types.js';

/**
 * The analytics rollups (migration 0380, docs/analytics.md), kept by one statement of CTEs that `logEvents` runs right
 * after the log's COPY, in the transaction that applies the events to the profiles, so that an event is counted
 * exactly when it is logged. The batch is counted here first, in the process (`rollupParams`): the counter rows it
 * touches with their increments, its names, its distinct active days; the statement only writes them. (Counted in SQL,
 * over an INSERT's RETURNING, the grouping and sorting of every event cost more than the writes.) The COPY writes every
 * entry it is given, so counting the entries counts what is logged. Counter rows are sent in key order, so that two
 * batches lock shared rows in the same order.
 *
 * Activity (DAU, new users, MAU) is exact under one condition, which the apply meets: two transactions never stamp the
 * same profile at once. Every writer of events first UPDATEs the profile's row (its aggregates), so a second batch of
 * the same person waits for the first to commit, and its statement's snapshot then sees the first's stamps.
 */

/** The first parameter number of the rollups' arrays (their statement has no other). */
const P = 1;
const $ = (i: number) => `$${P + i}`;

const eventCounts = (table: string, bucket: string, type: string, first: number) => `${table} AS (
  INSERT INTO ${table} AS t (workspace_id, name, app_id, ${bucket}, count)
  SELECT * FROM unnest(${$(first)}::uuid[], ${$(first + 1)}::text[], ${$(first + 2)}::text[], ${$(first + 3)}::${type}[],
                       ${$(first + 4)}::bigint[])
  ON CONFLICT (workspace_id, name, app_id, ${bucket}) DO UPDATE SET count = t.count + excluded.count)`;

/**
 * Purchases are summed here, in numeric (exact for any price), from their rows: a purchase counts in its (app,
 * product) row and in those of all apps '' and all products ''.
 */
const PURCHASES = `purchases AS (
  SELECT * FROM unnest(${$(10)}::uuid[], ${$(11)}::text[], ${$(12)}::text[], ${$(13)}::timestamptz[], ${$(14)}::numeric[],
                       ${$(15)}::bigint[]) AS c(ws, name, app_id, time, price, quantity))`;
const purchaseCounts = (table: string, bucket: string, bucketSql: string) => `${table} AS (
  INSERT INTO ${table} AS t (workspace_id, product, app_id, ${bucket}, quantity, revenue)
  SELECT c.ws, p.product, a.app, ${bucketSql}, sum(c.quantity), sum(c.price * c.quantity)
    FROM purchases c CROSS JOIN LATERAL (VALUES (''), (nullif(c.app_id, ''))) AS a(app)
         CROSS JOIN LATERAL (VALUES (''), (nullif(c.name, ''))) AS p(product)
   WHERE a.app IS NOT NULL AND p.product IS NOT NULL
   GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (workspace_id, product, app_id, ${bucket})
  DO UPDATE SET quantity = t.quantity + excluded.quantity, revenue = t.revenue + excluded.revenue)`;

const NAMES = `event_names_seen AS (
  INSERT INTO event_names (workspace_id, name) SELECT * FROM unnest(${$(16)}::uuid[], ${$(17)}::text[])
  ON CONFLICT DO NOTHING),
product_names_seen AS (
  INSERT INTO product_names (workspace_id, product) SELECT * FROM unnest(${$(18)}::uuid[], ${$(19)}::text[])
  ON CONFLICT DO NOTHING)`;

/** The batch's distinct (workspace, profile, app, day) of activity: its app's and all apps' ''. */
const ACTS = `acts AS (
  SELECT * FROM unnest(${$(20)}::uuid[], ${$(21)}::bigint[], ${$(22)}::text[], ${$(23)}::date[]) AS a(ws, profile_id, app, day))`;

const DAY = `(c.time AT TIME ZONE 'UTC')::date`;
const HOUR = `date_trunc('hour', c.time, 'UTC')`;

/**
 * The person's new active days (a stamp inserted, not there before), each with the nearest earlier active day `prev`
 * and later one `next`. The batch's new stamps are taken as if added one by one in day order: `prev` is the latest of
 * the stored days and the batch's earlier new ones; `next` comes from the stored days only (the statement's snapshot
 * does not show its own inserts, which is what that order needs). Then each new day's deltas (migration 0380), and the
 * range of days its MAU grows on, counted as a range (migration 0470: one row per distinct range, where writing its
 * days one by one was up to 30 rows).
 */
const ACTIVITY = `${ACTS},
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
spans AS (
  INSERT INTO user_kpi_spans AS t (workspace_id, app_id, day, length, n)
  SELECT ws, app_id, lo, hi - lo + 1, count(*)
    FROM (SELECT ws, app_id, GREATEST(day, prev + 30) AS lo, LEAST(day + 29, next - 1) AS hi FROM bounds) r
   WHERE hi >= lo GROUP BY 1, 2, 3, 4 ORDER BY 1, 2, 3, 4
  ON CONFLICT (workspace_id, app_id, day, length) DO UPDATE SET n = t.n + excluded.n),
deltas AS (
  SELECT ws, app_id, day, count(*) AS dau, count(*) FILTER (WHERE prev IS NULL) AS new_users
    FROM bounds GROUP BY 1, 2, 3
  UNION ALL
  SELECT ws, app_id, next, 0, -count(*) FROM bounds WHERE prev IS NULL AND next IS NOT NULL GROUP BY 1, 2, 3),
kpi AS (
  INSERT INTO user_kpi_daily AS t (workspace_id, app_id, day, dau, new_users)
  SELECT ws, app_id, day, sum(dau), sum(new_users) FROM deltas GROUP BY 1, 2, 3 ORDER BY 1, 2, 3
  ON CONFLICT (workspace_id, app_id, day)
  DO UPDATE SET dau = t.dau + excluded.dau, new_users = t.new_users + excluded.new_users)`;

/** The CTEs that keep every rollup, of one statement in the transaction that logs the events; rollupParams' values. */
export const ROLLUP_CTES = [
  eventCounts('event_counts_daily', 'day', 'date', 0),
  eventCounts('event_counts_hourly', 'hour', 'timestamptz', 5),
  PURCHASES,
  purchaseCounts('purchase_counts_daily', 'day', DAY),
  purchaseCounts('purchase_counts_hourly', 'hour', HOUR),
  NAMES,
  ACTIVITY,
].join(',\n');

/** A canonical event time (`YYYY-MM-DDTHH:MM:SS.mmmZ`, src/profiles/validation/event-time.ts): its UTC day and hour. */
const CANONICAL = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/;
function buckets(time: string): { day: string; hour: string } {
  const iso = CANONICAL.test(time) ? time : new Date(time).toISOString();
  if (!CANONICAL.test(iso)) throw new Error(`event time out of the rollups' range: ${iso}`);
  return { day: iso.slice(0, 10), hour: `${iso.slice(0, 13)}:00:00Z` };
}

/**
 * Counts per (workspace, name, app, bucket), in nested maps (no key string made per event: that and its hashing were
 * most of what counting a batch cost). `columns` gives them sorted field by field, so that two batches lock counter
 * rows alike.
 */
class Tally {
  private readonly root = new Map<string, Map<string, Map<string, Map<string, number>>>>();

  add(ws: string, name: string, app: string, bucket: string): void {
    const buckets = child(child(child(this.root, ws), name), app);
    buckets.set(bucket, (buckets.get(bucket) ?? 0) + 1);
  }

  /** The columns of a counter CTE: workspace, name, app, bucket, count. */
  columns(): [string[], string[], string[], string[], number[]] {
    const cols: [string[], string[], string[], string[], number[]] = [[], [], [], [], []];
    for (const [ws, names] of sorted(this.root))
      for (const [name, apps] of sorted(names))
        for (const [app, buckets] of sorted(apps))
          for (const [bucket, n] of sorted(buckets)) {
            cols[0].push(ws);
            cols[1].push(name);
            cols[2].push(app);
            cols[3].push(bucket);
            cols[4].push(n);
          }
    return cols;
  }
}

/** The map under `key` (made when missing). */
function child<V>(level: Map<string, Map<string, V>>, key: string): Map<string, V> {
  let next = level.get(key);
  if (!next) level.set(key, (next = new Map()));
  return next;
}

/** The set under `key` (made when missing). */
function setUnder<V>(level: Map<string, Set<V>>, key: string): Set<V> {
  let next = level.get(key);
  if (!next) level.set(key, (next = new Set()));
  return next;
}

/** A map's entries in key order. */
const sorted = <V>(map: Map<string, V>): [string, V][] => [...map].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));

/** The names a batch saw, per workspace: the columns of a names CTE (workspace, name), sorted. */
function namesColumns(seen: Map<string, Set<string>>): [string, string[]] {
  const ws: string[] = [];
  const names: string[] = [];
  for (const [w, set] of sorted(seen))
    for (const name of [...set].sort()) {
      ws.push(w);
      names.push(name);
    }
  return [plain(ws), names];
}

const addName = (seen: Map<string, Set<string>>, ws: string, name: string) => setUnder(seen, ws).add(name);

/**
 * The batch's distinct (workspace, app, day, profile) of activity, as sets of profiles: a few (workspace, app, day)
 * per batch, so a few small maps and a set add per event. Unsorted: the statement orders its stamps itself.
 */
class Activity {
  private readonly root = new Map<string, Map<string, Map<string, Set<number>>>>();

  add(ws: string, app: string, day: string, profileId: number): void {
    setUnder(child(child(this.root, ws), app), day).add(profileId);
  }

  /** The columns of ACTS: workspace, profile, app, day. */
  columns(): [string[], number[], string[], string[]] {
    const cols: [string[], number[], string[], string[]] = [[], [], [], []];
    for (const [ws, apps] of this.root)
      for (const [app, days] of apps)
        for (const [day, people] of days)
          for (const p of people) {
            cols[0].push(ws);
            cols[1].push(p);
            cols[2].push(app);
            cols[3].push(day);
          }
    return cols;
  }
}

/**
 * An array parameter of values that need no quoting in an array literal (uuids, numbers, dates, ISO times), as the
 * literal itself: pg would quote and escape every element, by two regular expressions each.
 */
const plain = (values: readonly (string | number)[]): string => `{${values.join(',')}}`;

/**
 * The values of ROLLUP_CTES' parameters for a batch the log writes: counter increments, purchases, names and active
 * days. Only custom events and purchases count (not subscription changes, deletions...); each counts in its app's
 * rows and in all apps' ''.
 */
export function rollupParams(entries: EventEntry[]): unknown[] {
  const daily = new Tally();
  const hourly = new Tally();
  const eventNames = new Map<string, Set<string>>();
  const productNames = new Map<string, Set<string>>();
  const acts = new Activity();
  const purchases: unknown[][] = Array.from({ length: 6 }, () => []);
  let lastTime = '';
  let b = { day: '', hour: '' };
  for (const e of entries) {
    const isEvent = e.type === 'users.behaviors.CustomEvent';
    if (!isEvent && e.type !== 'users.behaviors.Purchase') continue;
    if (e.time !== lastTime) b = buckets((lastTime = e.time));
    const { day, hour } = b;
    const app = e.appId ?? '';
    const ws = e.workspaceId;
    if (isEvent) {
      const name = e.name ?? '';
      daily.add(ws, name, '', day);
      hourly.add(ws, name, '', hour);
      if (app !== '') {
        daily.add(ws, name, app, day);
        hourly.add(ws, name, app, hour);
      }
      if (e.name != null) addName(eventNames, ws, e.name);
    } else {
      const data = e.data as { price: number; quantity: number };
      [ws, e.name ?? null, e.appId ?? null, e.time, data.price, data.quantity].forEach((v, i) => purchases[i]!.push(v));
      if (e.name != null) addName(productNames, ws, e.name);
    }
    if (e.profileId !== null) {
      acts.add(ws, '', day, e.profileId);
      if (app !== '') acts.add(ws, app, day, e.profileId);
    }
  }
  const counts = (t: Tally) => {
    const [w, name, app, bucket, n] = t.columns();
    return [plain(w), name, app, plain(bucket), plain(n)];
  };
  const [aw, ap, aa, ad] = acts.columns();
  return [
    ...counts(daily),
    ...counts(hourly),
    ...purchases,
    ...namesColumns(eventNames),
    ...namesColumns(productNames),
    plain(aw),
    plain(ap),
    aa,
    plain(ad),
  ];
}

/**
 * FOR BENCHMARKS ONLY (bench/ingest.ts's alternating runs price the rollups on /users/track): when the process starts
 * with CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS=1, the event log is written without its rollups, and every analytics
 * series of what it applied is wrong. Never set it in an install; it is not a configuration setting.
 */
export const ROLLUPS_SKIPPED_FOR_BENCH = process.env.CES_BENCH_ONLY_SKIP_ANALYTICS_ROLLUPS === '1';
