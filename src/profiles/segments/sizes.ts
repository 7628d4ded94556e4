import type { Pool } from '../../platform/db/pool.js';
import { DAY_MS, utcDay } from '../../platform/lib/iso-time.js';
import { unknownSegment } from './details.js';
import { compileFilter, SegmentFilterSchema, type SegmentFilter } from './filter.js';

/**
 * Segment sizes by UTC day (GET /segments/data_series). Today's size is counted when asked (at most once in
 * `nowMaxAgeSeconds` per segment and process: `SizeNow`), with the segment's compiled filter (./filter.ts), as an
 * export selects its members; earlier days are read from `segment_sizes`, which
 * the workers' stats pass writes (`snapshotSegmentSizes`, every WORKSPACE_STATS_INTERVAL_SECONDS, each pass
 * overwriting the day's row, so a past day holds the last count taken on it).
 */

/** Segments counted by one statement: each is one `count(*) FILTER` over a single scan of the workspace's profiles. */
const SEGMENTS_PER_SCAN = 50;

/**
 * Counts every unarchived segment of a workspace and records the counts as their sizes on `day` (`YYYY-MM-DD`),
 * replacing what an earlier pass of that day recorded. A segment whose stored filter this version cannot read is left
 * without a size rather than failing the others. Returns how many sizes were recorded.
 */
export async function snapshotSegmentSizes(pool: Pool, workspaceId: string, day: string): Promise<number> {
  const { rows } = await pool.query<{ id: string; filter: unknown }>(
    `SELECT id, filter FROM segments WHERE workspace_id = $1 AND NOT archived ORDER BY id`,
    [workspaceId],
  );
  const segments = rows.flatMap((r) => {
    const parsed = SegmentFilterSchema.safeParse(r.filter);
    return parsed.success ? [{ id: r.id, filter: parsed.data }] : [];
  });
  let recorded = 0;
  for (let i = 0; i < segments.length; i += SEGMENTS_PER_SCAN) {
    const chunk = segments.slice(i, i + SEGMENTS_PER_SCAN);
    const sizes = await countSegments(
      pool,
      workspaceId,
      chunk.map((s) => s.filter),
    );
    await pool.query(
      `INSERT INTO segment_sizes (workspace_id, segment_id, day, size)
       SELECT $1, s.id, $3::date, s.size FROM unnest($2::uuid[], $4::bigint[]) AS s(id, size)
       ON CONFLICT (segment_id, day) DO UPDATE SET size = excluded.size, taken_at = now()`,
      [workspaceId, chunk.map((s) => s.id), day, sizes],
    );
    recorded += chunk.length;
  }
  return recorded;
}

/** The members of each filter now, in one scan of the workspace's profiles. */
async function countSegments(pool: Pool, workspaceId: string, filters: SegmentFilter[]): Promise<number[]> {
  const params: unknown[] = [workspaceId];
  const columns = filters.map((filter, i) => {
    const compiled = compileFilter(filter, params.length + 1);
    params.push(...compiled.params);
    return `count(*) FILTER (WHERE COALESCE(${compiled.sql}, FALSE)) AS s${i}`;
  });
  const { rows } = await pool.query<Record<string, string>>(
    `SELECT ${columns.join(', ')} FROM profiles p WHERE p.workspace_id = $1`,
    params,
  );
  return filters.map((_, i) => Number(rows[0]![`s${i}`]));
}

export interface SegmentSizePoint {
  /** `YYYY-MM-DD`, a UTC day. */
  time: string;
  size: number;
}

export interface SegmentSeriesOptions {
  /** Days in the series, 1 to 100. */
  length: number;
  /** The series ends on this instant's UTC day. */
  endingAt: Date;
  /** The present: its UTC day is answered with the size now. */
  now?: Date;
  /** Where today's size comes from: a count shared for a while (`SizeNow`). */
  sizeNow: SizeNow;
}

/**
 * Today's size of segments, counted at most once in `maxAgeSeconds` per segment (and filter: an edited segment is
 * counted again), callers meanwhile sharing the count and a count under way. A count reads every profile of the
 * workspace (1.2 s at 200,000 profiles, BENCHMARKS.md): without this, each call of a public read endpoint would.
 */
export class SizeNow {
  private readonly counts = new Map<string, { filter: string; at: number; size: Promise<number> }>();
  constructor(private readonly maxAgeSeconds: number) {}

  get(pool: Pool, workspaceId: string, segmentId: string, filter: SegmentFilter, now = Date.now()): Promise<number> {
    const key = JSON.stringify(filter);
    const held = this.counts.get(segmentId);
    if (held && held.filter === key && now - held.at < this.maxAgeSeconds * 1000) return held.size;
    const size = countSegments(pool, workspaceId, [filter]).then(([n]) => n!);
    // A failed count is not kept: the next caller counts again.
    size.catch(() => this.counts.get(segmentId)?.size === size && this.counts.delete(segmentId));
    if (this.maxAgeSeconds > 0) {
      // Entries of segments no longer asked for go after their age; the map holds at most the segments asked lately.
      for (const [id, c] of this.counts) if (now - c.at >= this.maxAgeSeconds * 1000) this.counts.delete(id);
      this.counts.set(segmentId, { filter: key, at: now, size });
    }
    return size;
  }
}

/**
 * A segment's size a day, oldest first, over the `length` UTC days that end on the day of `endingAt`: today's entry
 * is the size now, earlier days the last size the workers recorded on them. Days without a recorded size (before the
 * first pass, days no worker ran, days still to come) are left out rather than given as null or 0: the answer's
 * `size` is an integer to the clients of the public API, and its `length` is "the maximum number of days".
 */
export async function segmentSizeSeries(
  pool: Pool,
  workspaceId: string,
  apiId: string,
  opts: SegmentSeriesOptions,
): Promise<SegmentSizePoint[]> {
  const { rows } = await pool.query<{ id: string; filter: unknown }>(
    `SELECT id, filter FROM segments WHERE workspace_id = $1 AND api_id = $2`,
    [workspaceId, apiId],
  );
  const segment = rows[0];
  if (!segment) throw unknownSegment(apiId);
  const lastDay = utcDay(opts.endingAt);
  const firstDay = utcDay(new Date(Date.parse(`${lastDay}T00:00:00Z`) - (opts.length - 1) * DAY_MS));
  const today = utcDay(opts.now ?? new Date());
  const recorded = await pool.query<{ time: string; size: string }>(
    `SELECT to_char(day, 'YYYY-MM-DD') AS time, size FROM segment_sizes
      WHERE segment_id = $1 AND day >= $2::date AND day <= $3::date AND day < $4::date
      ORDER BY day`,
    [segment.id, firstDay, lastDay, today],
  );
  const points = recorded.rows.map((r) => ({ time: r.time, size: Number(r.size) }));
  const filter = SegmentFilterSchema.safeParse(segment.filter);
  if (firstDay <= today && today <= lastDay && filter.success) {
    points.push({ time: today, size: await opts.sizeNow.get(pool, workspaceId, segment.id, filter.data) });
  }
  return points;
}
