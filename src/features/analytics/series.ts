import { createHash } from 'node:crypto';
import type { Pool } from '../../platform/db/pool.js';
import { badRequest, notFound } from '../../platform/errors.js';
import { DAY_MS } from '../../platform/lib/iso-time.js';
import { compileFilter, SegmentFilterSchema } from '../../profiles/segments/filter.js';
import { segmentByApiId } from '../../profiles/segments/store.js';

/**
 * The analytics series (docs/analytics.md): counts by UTC day or hour read from the rollups of migration 0380, one
 * row per point at most (MAU: the ranges that hold its points, `mauSeries`), never a raw event. Every point of the
 * range is answered; a bucket without a row counts 0 (so does an event name or product nobody sent).
 */

export type SeriesUnit = 'day' | 'hour';

export interface SeriesRange {
  /** Points in the series, 1 to 100. */
  length: number;
  /** The last point is the UTC day (or hour) holding this instant, counted whole. */
  endingAt: Date;
  unit: SeriesUnit;
  /** An app's API id as the events carry it; every app when omitted. */
  appId?: string;
}

const HOUR_MS = 3_600_000;

/** The first and last bucket starts of a range, as ISO strings PostgreSQL reads as timestamptz. */
function bucketBounds({ length, endingAt, unit }: SeriesRange): { first: string; last: string } {
  const size = unit === 'day' ? DAY_MS : HOUR_MS;
  const last = Math.floor(endingAt.getTime() / size) * size;
  return { first: new Date(last - (length - 1) * size).toISOString(), last: new Date(last).toISOString() };
}

const TIME_TEXT = {
  day: `to_char(b.at AT TIME ZONE 'UTC', 'YYYY-MM-DD')`,
  hour: `to_char(b.at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:00:00"Z"')`,
};

/** A rollup table and the key that selects one series of it; table and column names are constants of this module. */
interface RollupSource {
  daily: string;
  hourly: string;
  keyColumn?: string;
  key?: string;
  value: string;
}

type Point<K extends string> = { time: string } & Record<K, number>;

/** The series of one rollup key, oldest first, `length` points. */
async function rollupSeries<K extends string>(
  pool: Pool,
  workspaceId: string,
  range: SeriesRange,
  source: RollupSource,
  as: K,
): Promise<Point<K>[]> {
  const { first, last } = bucketBounds(range);
  const table = range.unit === 'day' ? source.daily : source.hourly;
  // The rollup rows are read by their key's index over the range alone (at most `length` of them), then placed on
  // the buckets: a join condition on the bucket let the planner read the key's every row and hash them.
  const [column, at] = range.unit === 'day' ? ['day', `(b.at AT TIME ZONE 'UTC')::date`] : ['hour', 'b.at'];
  const bounds =
    range.unit === 'day'
      ? `(($2::timestamptz AT TIME ZONE 'UTC')::date) AND (($3::timestamptz AT TIME ZONE 'UTC')::date)`
      : '$2::timestamptz AND $3::timestamptz';
  const key = source.keyColumn ? `AND ${source.keyColumn} = $5` : '';
  const params: unknown[] = [workspaceId, first, last, range.appId ?? ''];
  if (source.keyColumn) params.push(source.key);
  const text = `SELECT ${TIME_TEXT[range.unit]} AS time, coalesce(c.v, 0)::float8 AS "${as}"
       FROM generate_series($2::timestamptz, $3::timestamptz, interval '1 ${range.unit}') AS b(at)
       LEFT JOIN (SELECT ${column} AS at, ${source.value} AS v FROM ${table}
                   WHERE workspace_id = $1 AND app_id = $4 ${key} AND ${column} BETWEEN ${bounds}) c ON c.at = ${at}
      ORDER BY b.at`;
  // A named (prepared) statement per shape: each connection plans it once; planning cost more than running it. Named
  // by its text's hash: PostgreSQL cuts names at 63 bytes, where names spelled out of the shape ran to 74.
  const name = `analytics-series:${createHash('sha1').update(text).digest('hex').slice(0, 20)}`;
  const { rows } = await pool.query<Point<K>>({ name, text, values: params });
  return rows;
}

/** How often a custom event happened a day or an hour (GET /events/data_series without segment_id). */
export function eventSeries(pool: Pool, workspaceId: string, event: string, range: SeriesRange) {
  const source = { daily: 'event_counts_daily', hourly: 'event_counts_hourly', keyColumn: 'name', key: event };
  return rollupSeries(pool, workspaceId, range, { ...source, value: 'count' }, 'count');
}

/** Items bought (the sum of `quantity`) or revenue (price x quantity) a day or an hour, of one product or all. */
export function purchaseSeries<K extends 'purchase_quantity' | 'revenue'>(
  pool: Pool,
  workspaceId: string,
  product: string | undefined,
  range: SeriesRange,
  as: K,
) {
  const source = {
    daily: 'purchase_counts_daily',
    hourly: 'purchase_counts_hourly',
    keyColumn: 'product',
    key: product ?? '',
    value: as === 'revenue' ? 'revenue' : 'quantity',
  };
  return rollupSeries(pool, workspaceId, range, source, as);
}

/** Daily active, new or monthly active users (rolling 30 days: `mauSeries`), a UTC day. */
export function userKpiSeries<K extends 'dau' | 'new_users' | 'mau'>(
  pool: Pool,
  workspaceId: string,
  range: Omit<SeriesRange, 'unit'>,
  as: K,
): Promise<Point<K>[]> {
  if (as === 'mau') return mauSeries(pool, workspaceId, range) as Promise<Point<K>[]>;
  const source = { daily: 'user_kpi_daily', hourly: 'user_kpi_daily', value: as };
  return rollupSeries(pool, workspaceId, { ...range, unit: 'day' }, source, as);
}

/**
 * Monthly active users (those active on some day of the 30 ending with it), a UTC day: the `mau` counted day by day
 * before migration 0470, plus the ranges counted since (user_kpi_spans), each `n` people on every day of [day, day +
 * length - 1]. A range holding a point begins at most 29 days before it, so the ranges beginning from 29 days before
 * the first point to the last are read once (at most (length + 29) x 30 rows, by the key's order), made into +n where
 * each begins and -n the day after it ends, and summed day by day.
 */
const MAU_SQL = `SELECT to_char(b.day, 'YYYY-MM-DD') AS time, (coalesce(k.mau, 0) + b.running)::float8 AS mau
  FROM (SELECT g.day, sum(coalesce(e.v, 0)) OVER (ORDER BY g.day) AS running
          FROM (SELECT $2::date - 29 + i AS day FROM generate_series(0, $3::int + 28) AS i) g
          LEFT JOIN (SELECT x, sum(v) AS v
                       FROM user_kpi_spans s CROSS JOIN LATERAL (VALUES (s.day, s.n), (s.day + s.length, -s.n)) AS r(x, v)
                      WHERE s.workspace_id = $1 AND s.app_id = $4 AND s.day BETWEEN $2::date - 29 AND $2::date + $3::int - 1
                      GROUP BY x) e ON e.x = g.day) b
  LEFT JOIN user_kpi_daily k ON k.workspace_id = $1 AND k.app_id = $4 AND k.day = b.day
 WHERE b.day >= $2::date
 ORDER BY b.day`;

async function mauSeries(pool: Pool, workspaceId: string, range: Omit<SeriesRange, 'unit'>) {
  const { first } = bucketBounds({ ...range, unit: 'day' });
  const { rows } = await pool.query<Point<'mau'>>({
    name: 'analytics-series:mau',
    text: MAU_SQL,
    values: [workspaceId, first.slice(0, 10), range.length, range.appId ?? ''],
  });
  return rows;
}

/**
 * A custom event's series among a segment's members (GET /events/data_series with segment_id), read from the event
 * log: the rollups keep no membership. Membership is the segment's filter on the profiles as they are now. The log
 * keeps EVENT_LOG_RETENTION_DAYS of days (by acceptance), so a range that begins before its first day would be short
 * of events: it is refused with a 400 saying from when a segment's series can be asked, rather than answered low.
 * A scan of the log's days (not a lookup): docs/analytics.md.
 */
export async function segmentEventSeries(
  pool: Pool,
  workspaceId: string,
  event: string,
  segmentApiId: string,
  range: SeriesRange,
): Promise<Point<'count'>[]> {
  const segment = await segmentByApiId(pool, workspaceId, segmentApiId);
  if (!segment || segment.archived) throw notFound(`Segment not found: ${JSON.stringify(segmentApiId)}`);
  const filter = SegmentFilterSchema.safeParse(segment.filter);
  if (!filter.success) throw badRequest(`segment_id ${JSON.stringify(segmentApiId)} has a filter that cannot be read`);
  const { first, last } = bucketBounds(range);
  const logStart = await eventLogStart(pool);
  if (logStart === null || logStart.getTime() > Date.parse(first))
    throw badRequest(
      `segment_id: a series by segment is read from the event log, which holds events accepted since ${logStart?.toISOString() ?? 'now'}; ask for a range starting then or later, or omit segment_id`,
    );
  const compiled = compileFilter(filter.data, 6);
  const bucket = range.unit === 'day' ? 'day' : 'hour';
  const { rows } = await pool.query<Point<'count'>>(
    `WITH hits AS (
       SELECT date_trunc('${bucket}', e.time, 'UTC') AS at, count(*) AS n
         FROM event_log e LEFT JOIN event_log_merged_profiles m ON m.merged_profile_id = e.profile_id
         JOIN profiles p ON p.id = coalesce(m.profile_id, e.profile_id)
        WHERE e.workspace_id = $1 AND e.type = 'users.behaviors.CustomEvent' AND e.name = $2
          AND e.time >= $3::timestamptz AND e.time < $4::timestamptz + interval '1 ${bucket}'
          AND ($5 = '' OR e.app_id = $5) AND COALESCE(${compiled.sql}, FALSE)
        GROUP BY 1)
     SELECT ${TIME_TEXT[range.unit]} AS time, coalesce(h.n, 0)::float8 AS count
       FROM generate_series($3::timestamptz, $4::timestamptz, interval '1 ${bucket}') AS b(at)
       LEFT JOIN hits h ON h.at = b.at
      ORDER BY b.at`,
    [workspaceId, event, first, last, range.appId ?? '', ...compiled.params],
  );
  return rows;
}

/** The start of the event log's oldest day partition (what it still holds), or null when it has none. */
async function eventLogStart(pool: Pool): Promise<Date | null> {
  const { rows } = await pool.query<{ at: Date | null }>(`SELECT event_log_start() AS at`);
  return rows[0]?.at ?? null;
}
