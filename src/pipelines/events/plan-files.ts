import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import type { EventType } from '../../profiles/event-log-types.js';
import { eventExport, type EventExport } from './event-exports.js';

/**
 * Planning an export's next files (docs/events.md, "Exactly once"). The log's rows carry their transaction's id
 * (`xid`); every transaction below `pg_snapshot_xmin` of a snapshot has ended, so the rows between the export's
 * `planned_xid` and that bound are all there and no other row can join them. A plan takes exactly those rows, one file
 * per event type and hour (more when one holds over `max_events_per_file`, cut by row keys), records the files with
 * the rows each holds, and moves `planned_xid` to the bound, in one transaction. Writing the files comes after; a
 * crash between the two leaves planned files that the next pass writes, with the same keys and the same rows.
 */

export interface PlannedFile {
  eventType: EventType;
  hour: Date;
  seq: number;
  xidFrom: bigint;
  xidTo: bigint;
  first: RowKey | null;
  next: RowKey | null;
  events: number;
  key: string;
}

export interface RowKey {
  xid: bigint;
  id: string;
}

export interface Backlog {
  /** Events not yet in a planned file, counted up to max_events_per_file. */
  events: number;
  /** When the oldest of them entered the log; null when there is none. */
  oldest: Date | null;
}

/** The rows of one export's workspace and types in a transaction range (`$1` workspace, `$2` types, `$3`-`$4` xids). */
const RANGE = `workspace_id = $1 AND type = ANY($2::text[]) AND xid >= $3 AND xid < $4`;

/** What the export has not planned yet below `bound`: enough to decide whether a file is due. */
async function backlog(db: PoolClient, exp: EventExport, bound: bigint): Promise<Backlog> {
  const args = [exp.workspaceId, exp.eventTypes, exp.plannedXid.toString(), bound.toString()];
  const { rows } = await db.query<{ n: number; oldest: Date | null }>(
    `SELECT (SELECT count(*)::int FROM (SELECT 1 FROM event_log WHERE ${RANGE} LIMIT $5) c) AS n,
            (SELECT min(accepted_at) FROM (SELECT accepted_at FROM event_log WHERE ${RANGE} ORDER BY xid LIMIT 100) o) AS oldest`,
    [...args, exp.maxEventsPerFile],
  );
  return { events: rows[0]!.n, oldest: rows[0]!.oldest };
}

export interface Group {
  event_type: EventType;
  hour: Date;
  n: number;
  next_seq: number;
}

/** work_mem of the plan's aggregate of the range's row counts per (hour, type, transaction). */
const PLAN_MEMORY = '256MB';

/**
 * The (type, hour) groups of the range with where each group's files after the first begin (every max-th row in
 * (xid, id) order, as cutsOf), in one statement: the range's rows counted per (hour, type, xid) by a hash aggregate,
 * running sums over those counts (a transaction's rows are contiguous in (xid, id) order) name the transactions a cut
 * falls in and its place there, and only those transactions' rows of the group are sorted by id to find it. A sort of
 * every row key of the range took 8.6-10.2 s of a 1,000,000-event delivery, and a scan per group (cutsOf) read the
 * range again for each type and hour (bench:events, BENCHMARKS.md). The type is ordered as its place in the export's
 * list, not as text under the database's collation. A group's sequence numbers go on from its files planned before.
 */
async function groupsWithCuts(
  db: PoolClient,
  exp: EventExport,
  bound: bigint,
): Promise<{ group: Group; cuts: RowKey[] }[]> {
  // JIT off: the estimates of the cuts' rows (a thousand a generate_series) are far above the few that come, and JIT
  // compiled the statement for 2.4 s of its 6.8 (EXPLAIN ANALYZE, 1,000,000 rows) to run it in a few milliseconds less.
  await db.query(`SET LOCAL work_mem = '${PLAN_MEMORY}'`);
  await db.query(`SET LOCAL jit = off`);
  const { rows } = await db.query<{ event_type: EventType; hour: Date; n: number; xid: string | null; id: string }>(
    `WITH counts AS MATERIALIZED (
       SELECT array_position($2::text[], type) AS t, date_trunc('hour', accepted_at, 'UTC') AS hour, xid, count(*) AS n
         FROM event_log WHERE ${RANGE} GROUP BY 1, 2, 3),
     runs AS (
       SELECT t, hour, xid, n, (sum(n) OVER (PARTITION BY hour, t ORDER BY xid) - n)::bigint AS before,
              (sum(n) OVER (PARTITION BY hour, t))::bigint AS total
         FROM counts),
     cuts AS (
       SELECT t, hour, xid, k * $5::bigint - before AS place
         FROM runs, generate_series(greatest(1, (before + $5::bigint - 1) / $5::bigint), (before + n - 1) / $5::bigint) AS k)
     SELECT ($2::text[])[g.t] AS event_type, g.hour, g.total::int AS n, c.xid::text AS xid,
            (SELECT l.id FROM event_log l
              WHERE l.workspace_id = $1 AND l.type = ($2::text[])[g.t] AND l.xid = c.xid
                AND l.accepted_at >= g.hour AND l.accepted_at < g.hour + interval '1 hour'
              ORDER BY l.id OFFSET c.place LIMIT 1) AS id
       FROM (SELECT DISTINCT t, hour, total FROM runs) g LEFT JOIN cuts c ON c.t = g.t AND c.hour = g.hour
      ORDER BY g.hour, g.t, c.xid, c.place`,
    [exp.workspaceId, exp.eventTypes, exp.plannedXid.toString(), bound.toString(), exp.maxEventsPerFile],
  );
  const groups: { group: Group; cuts: RowKey[] }[] = [];
  for (const r of rows) {
    const last = groups.at(-1)?.group;
    if (!last || last.event_type !== r.event_type || last.hour.getTime() !== r.hour.getTime())
      groups.push({ group: { event_type: r.event_type, hour: r.hour, n: r.n, next_seq: 0 }, cuts: [] });
    if (r.xid !== null) groups.at(-1)!.cuts.push({ xid: BigInt(r.xid), id: r.id });
  }
  if (groups.length === 0) return groups;
  const { rows: seqs } = await db.query<{ event_type: EventType; hour: Date; next_seq: number }>(
    `SELECT event_type, hour, max(seq) + 1 AS next_seq FROM event_export_files
      WHERE export_id = $1 AND hour = ANY($2::timestamptz[]) GROUP BY 1, 2`,
    [exp.id, [...new Set(groups.map((g) => g.group.hour.toISOString()))]],
  );
  for (const s of seqs)
    for (const g of groups)
      if (g.group.event_type === s.event_type && g.group.hour.getTime() === s.hour.getTime())
        g.group.next_seq = s.next_seq;
  return groups;
}

/** Where a group's files after the first begin: every max-th row of the group in [from, bound), in (xid, id) order. */
export async function cutsOf(
  db: PoolClient,
  exp: EventExport,
  from: bigint,
  bound: bigint,
  g: Group,
): Promise<RowKey[]> {
  if (g.n <= exp.maxEventsPerFile) return [];
  // Ordered by the row's numbers (s.xid), not by the text column of the same name that ORDER BY would take first:
  // as text, 1000 sorts before 999, and cuts out of order make files that overlap.
  const { rows } = await db.query<{ xid: string; id: string }>(
    `SELECT s.xid::text AS xid, s.id FROM (
       SELECT xid, id, row_number() OVER (ORDER BY xid, id) - 1 AS rn
         FROM event_log WHERE ${RANGE} AND accepted_at >= $5 AND accepted_at < $5 + interval '1 hour' AND type = $6) s
      WHERE rn > 0 AND rn % $7 = 0 ORDER BY s.xid, s.id`,
    [exp.workspaceId, exp.eventTypes, from.toString(), bound.toString(), g.hour, g.event_type, exp.maxEventsPerFile],
  );
  return rows.map((r) => ({ xid: BigInt(r.xid), id: r.id }));
}

/** The files of one group of [from, bound): one per slice between cuts. */
export function filesOf(
  exp: EventExport,
  from: bigint,
  bound: bigint,
  g: Group,
  cuts: RowKey[],
  keyOf: FileKeyOf,
): PlannedFile[] {
  const starts: (RowKey | null)[] = [null, ...cuts];
  return starts.map((first, i) => {
    const seq = g.next_seq + i;
    return {
      eventType: g.event_type,
      hour: g.hour,
      seq,
      xidFrom: from,
      xidTo: bound,
      first,
      next: cuts[i] ?? null,
      events: Math.min(exp.maxEventsPerFile, g.n - i * exp.maxEventsPerFile),
      key: keyOf(g.event_type, g.hour, seq),
    };
  });
}

export type FileKeyOf = (type: EventType, hour: Date, seq: number) => string;

export async function recordFiles(db: PoolClient, exportId: string, files: PlannedFile[]): Promise<void> {
  if (files.length === 0) return;
  const col = <T>(f: (p: PlannedFile) => T) => files.map(f);
  await db.query(
    `INSERT INTO event_export_files (export_id, event_type, hour, seq, xid_from, xid_to, first_xid, first_id, next_xid,
                                     next_id, events, key)
     SELECT $1, * FROM unnest($2::text[], $3::timestamptz[], $4::int[], $5::bigint[], $6::bigint[], $7::bigint[],
                              $8::uuid[], $9::bigint[], $10::uuid[], $11::int[], $12::text[])`,
    [
      exportId,
      col((f) => f.eventType),
      col((f) => f.hour),
      col((f) => f.seq),
      col((f) => f.xidFrom.toString()),
      col((f) => f.xidTo.toString()),
      col((f) => f.first?.xid.toString() ?? null),
      col((f) => f.first?.id ?? null),
      col((f) => f.next?.xid.toString() ?? null),
      col((f) => f.next?.id ?? null),
      col((f) => f.events),
      col((f) => f.key),
    ],
  );
}

export interface PlanOutcome {
  planned: number;
  /** What is left unplanned below the bound (nothing when the plan took it all). */
  backlog: Backlog;
}

/**
 * Plans the export's due files: when the oldest unplanned event has waited `flush_seconds` (at `now`), or
 * `max_events_per_file` of them wait, every unplanned row below the bound goes into files; otherwise nothing moves.
 * One planner at a time per export (its row is locked for the transaction).
 */
export async function planFiles(pool: Pool, exportId: string, keyOf: FileKeyOf, now: Date): Promise<PlanOutcome> {
  return withTransaction(pool, async (db) => {
    const exp = await eventExport(db, exportId, true);
    if (!exp) return { planned: 0, backlog: { events: 0, oldest: null } };
    const { rows } = await db.query<{ bound: string }>(`SELECT pg_snapshot_xmin(pg_current_snapshot())::text AS bound`);
    const bound = BigInt(rows[0]!.bound);
    if (bound <= exp.plannedXid) return { planned: 0, backlog: { events: 0, oldest: null } };
    const waiting = await backlog(db, exp, bound);
    const due =
      waiting.events >= exp.maxEventsPerFile ||
      (waiting.oldest !== null && now.getTime() - waiting.oldest.getTime() >= exp.flushSeconds * 1000);
    if (!due && waiting.events > 0) return { planned: 0, backlog: waiting };
    const files: PlannedFile[] = [];
    for (const { group, cuts } of due ? await groupsWithCuts(db, exp, bound) : [])
      files.push(...filesOf(exp, exp.plannedXid, bound, group, cuts, keyOf));
    await recordFiles(db, exp.id, files);
    // Nothing waiting: the bound moves on alone, so that the next plan's range starts where transactions still run.
    await db.query(`UPDATE event_exports SET planned_xid = $2 WHERE id = $1`, [exp.id, bound.toString()]);
    return { planned: files.length, backlog: { events: 0, oldest: null } };
  });
}
