import type { Pool } from '../../platform/db/pool.js';
import type { Metrics } from '../../platform/metrics.js';
import { redactLine } from '../../platform/logger.js';
import type { Destination } from '../../platform/storage/destination.js';
import { ObjectNotFoundError, type ObjectStore } from '../../platform/storage/object-store.js';
import type { EventExport } from './event-exports.js';

/**
 * An event export whose destination refuses writes (event_export_failures, migration 0360): each refused pass is
 * recorded with its error and the time of the next attempt (5 s, doubling, capped at EVENT_EXPORT_RETRY_MAX_SECONDS);
 * the sweep leaves the export alone until then. Nothing here is on the ingestion path: events wait in the log.
 */

/** A call to the export's bucket failed: what `flushEventExport` records instead of failing its job. */
export class DestinationRefused extends Error {
  constructor(
    /** The store's error code (S3's `NoSuchBucket`, GCS's HTTP status, a socket's `ECONNREFUSED`...). */
    readonly code: string,
    /** The store's message, with the destination's credentials removed. */
    message: string,
    readonly provider: ObjectStore['kind'],
    readonly bucket: string,
  ) {
    super(message);
    this.name = 'DestinationRefused';
  }
}

/** Names the AWS SDK gives an error whose response had no body to name it (a refused HEAD request). */
const UNNAMED = new Set(['Error', 'Unknown', 'UnknownError']);

interface StoreError {
  Code?: unknown;
  code?: unknown;
  name?: unknown;
  message?: unknown;
  $metadata?: { httpStatusCode?: number };
}

function codeOf(err: unknown): string {
  const e = (err ?? {}) as StoreError;
  if (typeof e.Code === 'string' && e.Code) return e.Code;
  if (typeof e.name === 'string' && e.name && !UNNAMED.has(e.name)) return e.name;
  if (typeof e.code === 'string' || typeof e.code === 'number') return String(e.code);
  const status = e.$metadata?.httpStatusCode;
  return status ? `HTTP ${status}` : 'unknown';
}

/** Every string of the destination's credentials (keys, secrets, tokens, a service account's private key). */
function secretsOf(destination: Destination | null): string[] {
  const creds = destination?.credentials as Record<string, unknown> | undefined;
  return Object.values(creds ?? {}).filter((v): v is string => typeof v === 'string' && v.length >= 4);
}

/** The error's message fit to store and log: no credential of the destination, one line, at most 500 characters. */
export function refusalMessage(err: unknown, destination: Destination | null): string {
  let text = err instanceof Error ? err.message : String(err);
  const status = (err as StoreError | null)?.$metadata?.httpStatusCode;
  if (UNNAMED.has(text) && status)
    text = `the store answered HTTP ${status} with no error body${status === 403 ? ' (credentials refused, or no permission)' : ''}`;
  for (const secret of secretsOf(destination)) text = text.split(secret).join('[redacted]');
  text = redactLine(text).replace(/\s+/g, ' ').trim();
  return text.length > 500 ? `${text.slice(0, 499)}…` : text || '(no message)';
}

/** The store, each call's failure turned into a DestinationRefused (an object that is not there stays what it is). */
export function refusalsNamed(store: ObjectStore, destination: Destination | null): ObjectStore {
  const named =
    <A extends unknown[], R>(call: (...args: A) => Promise<R>) =>
    async (...args: A): Promise<R> => {
      try {
        return await call(...args);
      } catch (err) {
        if (err instanceof ObjectNotFoundError) throw err;
        throw new DestinationRefused(codeOf(err), refusalMessage(err, destination), store.kind, store.bucket);
      }
    };
  return {
    kind: store.kind,
    bucket: store.bucket,
    put: named(store.put.bind(store)),
    get: named(store.get.bind(store)),
    head: named(store.head.bind(store)),
    list: named(store.list.bind(store)),
    delete: named(store.delete.bind(store)),
  };
}

export interface RecordedFailure {
  firstFailedAt: Date;
  failures: number;
  nextAttemptAt: Date;
  /** True when no warning was logged for the export in the last minute: this pass logs one. */
  warn: boolean;
}

/** First wait after a refusal, in seconds; it doubles with each refused pass. */
const FIRST_RETRY_SECONDS = 5;

/** Records a refused pass; undefined when the export is gone. */
export async function recordFailure(
  pool: Pool,
  exportId: string,
  refusal: DestinationRefused,
  maxRetrySeconds: number,
): Promise<RecordedFailure | undefined> {
  const { rows } = await pool.query<{ first_failed_at: Date; failures: number; next_attempt_at: Date; warn: boolean }>(
    `INSERT INTO event_export_failures AS f
            (export_id, first_failed_at, last_failed_at, failures, last_error_code, last_error, next_attempt_at, warned_at)
     SELECT id, now(), now(), 1, $2, $3, now() + make_interval(secs => least($4::float8, $5::float8)), now()
       FROM event_exports WHERE id = $1
     ON CONFLICT (export_id) DO UPDATE
        SET last_failed_at = now(), failures = f.failures + 1, last_error_code = $2, last_error = $3,
            next_attempt_at = now() + make_interval(secs => least($5::float8, $4::float8 * 2 ^ least(f.failures, 20))),
            warned_at = CASE WHEN f.warned_at > now() - interval '1 minute' THEN f.warned_at ELSE now() END
     RETURNING first_failed_at, failures, next_attempt_at, warned_at = now() AS warn`,
    [exportId, refusal.code, refusal.message, FIRST_RETRY_SECONDS, maxRetrySeconds],
  );
  const r = rows[0];
  return (
    r && { firstFailedAt: r.first_failed_at, failures: r.failures, nextAttemptAt: r.next_attempt_at, warn: r.warn }
  );
}

/** Ends the export's failure after a pass that went through; what it was, or undefined when it was not failing. */
export async function clearFailure(
  pool: Pool,
  exportId: string,
): Promise<{ firstFailedAt: Date; failures: number } | undefined> {
  const { rows } = await pool.query<{ first_failed_at: Date; failures: number }>(
    `DELETE FROM event_export_failures WHERE export_id = $1 RETURNING first_failed_at, failures`,
    [exportId],
  );
  return rows[0] && { firstFailedAt: rows[0].first_failed_at, failures: rows[0].failures };
}

/**
 * The exports a sweep passes over: every one but those waiting out a refusal; an export the workspace file changed
 * since its last refusal (new credentials, another bucket) is tried at once.
 */
export async function exportsDue(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>(
    `SELECT e.id FROM event_exports e LEFT JOIN event_export_failures f ON f.export_id = e.id
      WHERE f.export_id IS NULL OR f.next_attempt_at <= now() OR e.updated_at > f.last_failed_at
      ORDER BY e.id`,
  );
  return rows.map((r) => r.id);
}

/**
 * `ces_event_export_failing`, read from PostgreSQL when /metrics is served: 1 for each export with a refusal on
 * record, 0 for the others, whichever worker ran their passes.
 */
export async function readFailingExports(pool: Pool, metrics: Pick<Metrics, 'eventExportFailing'>): Promise<void> {
  const { rows } = await pool.query<{ id: string; failing: boolean }>(
    `SELECT e.id, f.export_id IS NOT NULL AS failing
       FROM event_exports e LEFT JOIN event_export_failures f ON f.export_id = e.id`,
  );
  metrics.eventExportFailing.reset();
  for (const r of rows) metrics.eventExportFailing.set({ export: r.id }, r.failing ? 1 : 0);
}

export interface ExportFailure {
  firstFailedAt: Date;
  lastFailedAt: Date;
  failures: number;
  code: string;
  error: string;
  nextAttemptAt: Date;
}

/** The export's current failure, for `ces events status`; undefined when its destination took its last pass. */
export async function exportFailure(pool: Pool, exportId: string): Promise<ExportFailure | undefined> {
  const { rows } = await pool.query<{
    first_failed_at: Date;
    last_failed_at: Date;
    failures: number;
    last_error_code: string;
    last_error: string;
    next_attempt_at: Date;
  }>(`SELECT * FROM event_export_failures WHERE export_id = $1`, [exportId]);
  const r = rows[0];
  return (
    r && {
      firstFailedAt: r.first_failed_at,
      lastFailedAt: r.last_failed_at,
      failures: r.failures,
      code: r.last_error_code,
      error: r.last_error,
      nextAttemptAt: r.next_attempt_at,
    }
  );
}

/**
 * When the oldest event the export has not written entered the log (null: none waits), as the lag gauge reports it
 * while the destination refuses: the first rows of its oldest files planned and not written, and the rows not planned.
 */
export async function oldestUnwritten(pool: Pool, exp: EventExport): Promise<Date | null> {
  const { rows } = await pool.query<{ oldest: Date | null }>(
    `SELECT least(
       (SELECT min(l.at) FROM (SELECT * FROM event_export_files WHERE export_id = $1 AND written_at IS NULL
                               ORDER BY hour LIMIT 5) f
          CROSS JOIN LATERAL (SELECT min(accepted_at) AS at FROM event_log
                               WHERE workspace_id = $2 AND type = f.event_type AND xid >= f.xid_from AND xid < f.xid_to
                                 AND accepted_at >= f.hour AND accepted_at < f.hour + interval '1 hour') l),
       (SELECT min(accepted_at) FROM (SELECT accepted_at FROM event_log
         WHERE workspace_id = $2 AND type = ANY($3::text[]) AND xid >= $4 ORDER BY xid LIMIT 100) o)) AS oldest`,
    [exp.id, exp.workspaceId, exp.eventTypes, exp.plannedXid.toString()],
  );
  return rows[0]?.oldest ?? null;
}
