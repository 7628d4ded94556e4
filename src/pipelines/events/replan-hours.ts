import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import type { EventType } from '../../profiles/event-log-types.js';
import { eventExport, type EventExport } from './event-exports.js';
import { cutsOf, filesOf, recordFiles, type FileKeyOf, type Group, type PlannedFile } from './plan-files.js';

/**
 * Re-delivering hours (docs/events.md, "Backfill and erasure"): an hour's files planned again from the log as it is
 * now, numbered from 0 so that they take the keys the hour's files had, every row the export had planned in that hour
 * (its transactions below `planned_xid`; later ones are the next ordinary plan's). In the same transaction: the
 * hour's `_SUCCESS` and the keys of files it no longer writes are recorded stale (./write-files.ts deletes the first
 * before writing and the others after), and the hour is open again until they are written.
 */

export interface ExportHour {
  eventType: EventType;
  hour: Date;
}

export interface ReplanOutcome {
  hours: number;
  files: number;
  staleKeys: number;
}

interface HourGroup extends Group {
  old_keys: string[];
}

/** The hours asked for, with the rows the export planned in each and the keys of their files so far. */
async function hourGroups(db: PoolClient, exp: EventExport, hours: ExportHour[]): Promise<HourGroup[]> {
  const { rows } = await db.query<HourGroup>(
    `SELECT h.event_type, h.hour,
            (SELECT count(*)::int FROM event_log l
              WHERE l.workspace_id = $1 AND l.type = h.event_type AND l.xid < $3
                AND l.accepted_at >= h.hour AND l.accepted_at < h.hour + interval '1 hour') AS n,
            0 AS next_seq,
            coalesce((SELECT array_agg(f.key ORDER BY f.seq) FROM event_export_files f
                       WHERE f.export_id = $2 AND f.event_type = h.event_type AND f.hour = h.hour), '{}') AS old_keys
       FROM unnest($4::text[], $5::timestamptz[]) AS h(event_type, hour)
      WHERE h.event_type = ANY($6::text[])
      ORDER BY h.hour, h.event_type`,
    [
      exp.workspaceId,
      exp.id,
      exp.plannedXid.toString(),
      hours.map((h) => h.eventType),
      hours.map((h) => h.hour),
      exp.eventTypes,
    ],
  );
  return rows;
}

export interface ExportKeys {
  file: FileKeyOf;
  success: (type: EventType, hour: Date) => string;
}

/** Plans the hours again (see above), in one transaction holding the export's row. */
export async function replanHours(
  pool: Pool,
  exportId: string,
  hours: ExportHour[],
  keys: ExportKeys,
): Promise<ReplanOutcome> {
  return withTransaction(pool, async (db) => {
    const exp = await eventExport(db, exportId, true);
    return exp ? replanIn(db, exp, hours, keys) : { hours: 0, files: 0, staleKeys: 0 };
  });
}

async function replanIn(
  db: PoolClient,
  exp: EventExport,
  hours: ExportHour[],
  keys: ExportKeys,
): Promise<ReplanOutcome> {
  if (hours.length === 0) return { hours: 0, files: 0, staleKeys: 0 };
  const files: PlannedFile[] = [];
  const stale: { key: string; kind: 'success' | 'file' }[] = [];
  const groups = await hourGroups(db, exp, hours);
  for (const g of groups) {
    const cuts = g.n > 0 ? await cutsOf(db, exp, 0n, exp.plannedXid, g) : [];
    const made = g.n > 0 ? filesOf(exp, 0n, exp.plannedXid, g, cuts, keys.file) : [];
    files.push(...made);
    const kept = new Set(made.map((f) => f.key));
    stale.push({ key: keys.success(g.event_type, g.hour), kind: 'success' });
    for (const key of g.old_keys) if (!kept.has(key)) stale.push({ key, kind: 'file' });
  }
  await db.query(
    `DELETE FROM event_export_files f USING unnest($2::text[], $3::timestamptz[]) AS h(event_type, hour)
        WHERE f.export_id = $1 AND f.event_type = h.event_type AND f.hour = h.hour`,
    [exp.id, groups.map((g) => g.event_type), groups.map((g) => g.hour)],
  );
  await db.query(
    `DELETE FROM event_export_hours x USING unnest($2::text[], $3::timestamptz[]) AS h(event_type, hour)
        WHERE x.export_id = $1 AND x.event_type = h.event_type AND x.hour = h.hour`,
    [exp.id, groups.map((g) => g.event_type), groups.map((g) => g.hour)],
  );
  await recordFiles(db, exp.id, files);
  await db.query(
    `INSERT INTO event_export_stale_keys (export_id, key, kind) SELECT $1, * FROM unnest($2::text[], $3::text[])
       ON CONFLICT (export_id, key) DO UPDATE SET kind = excluded.kind`,
    [exp.id, stale.map((s) => s.key), stale.map((s) => s.kind)],
  );
  return { hours: groups.length, files: files.length, staleKeys: stale.filter((s) => s.kind === 'file').length };
}

/**
 * The hours an erasure asked this export to re-deliver, re-planned and their requests deleted in one transaction (a
 * request made meanwhile waits for it, and is taken by the next pass).
 */
export async function takeRedeliveries(pool: Pool, exportId: string, keys: ExportKeys): Promise<ReplanOutcome> {
  return withTransaction(pool, async (db) => {
    const exp = await eventExport(db, exportId, true);
    if (!exp) return { hours: 0, files: 0, staleKeys: 0 };
    const { rows } = await db.query<{ event_type: EventType; hour: Date }>(
      `DELETE FROM event_redeliveries WHERE export_id = $1 RETURNING event_type, hour`,
      [exportId],
    );
    return replanIn(
      db,
      exp,
      rows.map((r) => ({ eventType: r.event_type, hour: r.hour })),
      keys,
    );
  });
}
