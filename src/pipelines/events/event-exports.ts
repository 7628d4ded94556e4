import type { Pool, PoolClient } from '../../platform/db/pool.js';
import { Destination } from '../../platform/storage/destination.js';
import { EVENT_TYPES, type EventType } from '../../profiles/event-log-types.js';

/**
 * Event exports: declared in the workspace file (`event_exports`), stored in event_exports (migration 0340), each
 * delivering the event log to a bucket (docs/events.md). This module owns the table's statements.
 */

export const EVENT_EXPORT_FORMATS = ['avro', 'parquet', 'ndjson'] as const;
export type EventExportFormat = (typeof EVENT_EXPORT_FORMATS)[number];

export interface EventExport {
  id: string;
  workspaceId: string;
  companyId: string;
  name: string;
  /** Its own bucket; null: the workspace's export destination, else its part of the built-in store. */
  destination: Destination | null;
  format: EventExportFormat;
  eventTypes: EventType[];
  flushSeconds: number;
  maxEventsPerFile: number;
  /** Every event of a transaction below this is in a planned file. */
  plannedXid: bigint;
}

interface ExportRow {
  id: string;
  workspace_id: string;
  company_id: string;
  name: string;
  destination: unknown;
  format: EventExportFormat;
  event_types: string[] | null;
  flush_seconds: number;
  max_events_per_file: number;
  planned_xid: string;
}

const SELECT = `SELECT e.id, e.workspace_id, w.company_id, e.name, e.destination, e.format, e.event_types, e.flush_seconds,
                       e.max_events_per_file, e.planned_xid::text
                  FROM event_exports e JOIN workspaces w ON w.id = e.workspace_id`;

function fromRow(r: ExportRow): EventExport {
  const destination = r.destination === null ? null : Destination.parse(r.destination);
  return {
    id: r.id,
    workspaceId: r.workspace_id,
    companyId: r.company_id,
    name: r.name,
    destination,
    format: r.format,
    eventTypes: (r.event_types ?? EVENT_TYPES).filter((t): t is EventType =>
      (EVENT_TYPES as readonly string[]).includes(t),
    ),
    flushSeconds: r.flush_seconds,
    maxEventsPerFile: r.max_events_per_file,
    plannedXid: BigInt(r.planned_xid),
  };
}

type Db = Pick<Pool | PoolClient, 'query'>;

/** Every event export, of every workspace. */
export async function allEventExports(db: Db): Promise<EventExport[]> {
  const { rows } = await db.query<ExportRow>(`${SELECT} ORDER BY e.id`);
  return rows.map(fromRow);
}

/** One event export, or undefined; `forUpdate` locks its row until the transaction ends. */
export async function eventExport(db: Db, id: string, forUpdate = false): Promise<EventExport | undefined> {
  const { rows } = await db.query<ExportRow>(`${SELECT} WHERE e.id = $1${forUpdate ? ' FOR UPDATE OF e' : ''}`, [id]);
  return rows[0] ? fromRow(rows[0]) : undefined;
}

/** Erasure records (for `ces events erasure-report`) older than `days` go, as the tombstones naming the same ids do. */
export async function forgetOldErasures(pool: Pool, days: number): Promise<number> {
  const { rowCount } = await pool.query(
    `DELETE FROM event_erasures WHERE erased_at < now() - make_interval(days => $1)`,
    [days],
  );
  return rowCount ?? 0;
}
