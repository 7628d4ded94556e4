import { withTransaction, type Pool } from '../../platform/db/pool.js';
import type { ObjectStore } from '../../platform/storage/object-store.js';
import type { EventType } from '../../profiles/event-log-types.js';
import type { EventExport } from './event-exports.js';
import type { EventKeys } from './event-keys.js';
import { fileRows, type FileSlice } from './file-rows.js';
import { encodeEvents } from './formats/encoders.js';
import { avroSchemaText, jsonSchemaText } from './formats/schemas.js';

/**
 * Writing planned files (./plan-files.ts) and closing hours. A file is read from the log as its plan says (the rows of
 * its type, hour and transaction range, from its first row up to the next file's), encoded, put at its key, then
 * marked written. Put again after a crash, it is the same object: the rows are the same (an erasure aside, which is
 * meant to change them) and the encodings are deterministic.
 */

/** Files read, encoded and put at once by one pass (writePlannedFiles). */
const FILES_IN_FLIGHT = 3;
/**
 * work_mem of the statement that reads a file's rows in order (./file-rows.ts): the sort of a file's rows (about 4 MB
 * at 15,000 events) spilled to disk under the default 4 MB (bench:events, BENCHMARKS.md).
 */
const FILE_SORT_MEMORY = '64MB';

interface FileRow extends FileSlice {
  seq: number;
  key: string;
}

export interface WriteOutcome {
  files: number;
  events: number;
  bytes: number;
}

/**
 * Writes every planned file of the export not yet written, oldest first, FILES_IN_FLIGHT at a time; each is marked
 * written once it is stored. One at a time, the worker waited on PostgreSQL's read of a file two thirds of the time
 * and PostgreSQL on the worker's encoding the rest: in flight together, the two overlap on the cores (and a bucket's
 * latency with both). Files are independent (each is put whole at its key, then marked), so their order of completion
 * does not matter; a failure stops new files from starting, lets the ones begun finish, and is thrown.
 */
export async function writePlannedFiles(
  pool: Pool,
  exp: EventExport,
  store: ObjectStore,
  keys: EventKeys,
): Promise<WriteOutcome> {
  const { rows: files } = await pool.query<FileRow>(
    `SELECT event_type, hour, seq, xid_from::text, xid_to::text, first_xid::text, first_id, next_xid::text, next_id, key
       FROM event_export_files WHERE export_id = $1 AND written_at IS NULL ORDER BY hour, event_type, seq`,
    [exp.id],
  );
  const outcome: WriteOutcome = { files: 0, events: 0, bytes: 0 };
  for (const type of new Set(files.map((f) => f.event_type))) await writeSchemas(exp, store, keys, type);
  let next = 0;
  let failure: unknown = null;
  const writer = async () => {
    while (failure === null && next < files.length) {
      const written = await writeFile(pool, exp, store, files[next++]!).catch((err: unknown) => {
        failure ??= err;
        return null;
      });
      if (!written) continue;
      outcome.files++;
      outcome.events += written.events;
      outcome.bytes += written.bytes;
    }
  };
  await Promise.all(Array.from({ length: Math.min(FILES_IN_FLIGHT, files.length) }, writer));
  if (failure !== null) throw failure;
  return outcome;
}

/**
 * One planned file read, encoded, put at its key and marked written. The rows stream from the log into the encoder
 * (./file-rows.ts) in one transaction, which gives the read its sort memory and no parallel workers.
 */
async function writeFile(
  pool: Pool,
  exp: EventExport,
  store: ObjectStore,
  f: FileRow,
): Promise<{ events: number; bytes: number }> {
  const read = { events: 0 };
  const body = await withTransaction(pool, async (db) => {
    await db.query(`SET LOCAL work_mem = '${FILE_SORT_MEMORY}'`);
    // No parallel workers: with FILES_IN_FLIGHT reads at once, each read's two workers and gather merge only
    // contended for the same cores (bench:events, 1,000,000 events: 5-15% faster without them).
    await db.query(`SET LOCAL max_parallel_workers_per_gather = 0`);
    return encodeEvents(exp.format, f.event_type, fileRows(db, exp, f, read));
  });
  await store.put(f.key, body, { contentLength: body.length });
  await pool.query(
    `UPDATE event_export_files SET written_at = now(), bytes = $4, events = $5
      WHERE export_id = $1 AND event_type = $2 AND hour = $3 AND seq = $6`,
    [exp.id, f.event_type, f.hour, body.length, read.events, f.seq],
  );
  return { events: read.events, bytes: body.length };
}

/** A type's schemas beside its files, written when missing (the version is in the key: a new one is a new file). */
async function writeSchemas(exp: EventExport, store: ObjectStore, keys: EventKeys, type: EventType): Promise<void> {
  const json = keys.schema(type, 'json');
  if ((await store.head(json)) === null)
    await store.put(json, Buffer.from(jsonSchemaText(type, exp.format)), { contentType: 'application/schema+json' });
  if (exp.format !== 'avro') return;
  const avsc = keys.schema(type, 'avsc');
  if ((await store.head(avsc)) === null)
    await store.put(avsc, Buffer.from(avroSchemaText(type)), { contentType: 'application/json' });
}

/**
 * Writes `_SUCCESS` in the folder of each (type, hour) of the export that is closed: its hour has ended, every file of
 * it is written, no transaction that began before its end still runs (one could yet log an event in it), and no row
 * of it waits above the export's planned bound. Recorded once written.
 */
export async function closeHours(pool: Pool, exp: EventExport, store: ObjectStore, keys: EventKeys): Promise<number> {
  const { rows } = await pool.query<{ event_type: EventType; hour: Date }>(
    `WITH settled AS (
       SELECT coalesce(min(xact_start), now()) AS before FROM pg_stat_activity
        WHERE datname = current_database() AND pid <> pg_backend_pid() AND xact_start IS NOT NULL)
     SELECT f.event_type, f.hour FROM event_export_files f, settled s, event_exports e
      WHERE f.export_id = $1 AND e.id = f.export_id AND f.hour + interval '1 hour' <= s.before
        AND NOT EXISTS (SELECT 1 FROM event_export_hours h
                         WHERE h.export_id = f.export_id AND h.event_type = f.event_type AND h.hour = f.hour)
      GROUP BY f.event_type, f.hour, e.workspace_id, e.planned_xid
     HAVING bool_and(f.written_at IS NOT NULL)
        AND NOT EXISTS (SELECT 1 FROM event_log l
                         WHERE l.workspace_id = e.workspace_id AND l.type = f.event_type AND l.xid >= e.planned_xid
                           AND l.accepted_at >= f.hour AND l.accepted_at < f.hour + interval '1 hour')
      ORDER BY f.hour, f.event_type`,
    [exp.id],
  );
  for (const h of rows) {
    await store.put(keys.success(h.event_type, h.hour), Buffer.alloc(0), { contentLength: 0 });
    await pool.query(
      `INSERT INTO event_export_hours (export_id, event_type, hour, success_at) VALUES ($1, $2, $3, now())
       ON CONFLICT DO NOTHING`,
      [exp.id, h.event_type, h.hour],
    );
  }
  return rows.length;
}

/**
 * Deletes the objects a re-plan made stale (./replan-hours.ts) of one kind: `success` before the hour's files are
 * rewritten (a loader that waits for `_SUCCESS` does not read an hour being rewritten), `file` after.
 */
export async function deleteStale(
  pool: Pool,
  exp: EventExport,
  store: ObjectStore,
  kind: 'success' | 'file',
): Promise<number> {
  const { rows } = await pool.query<{ key: string }>(
    `SELECT key FROM event_export_stale_keys WHERE export_id = $1 AND kind = $2 ORDER BY key`,
    [exp.id, kind],
  );
  if (rows.length === 0) return 0;
  const keys = rows.map((r) => r.key);
  await store.delete(keys);
  await pool.query(`DELETE FROM event_export_stale_keys WHERE export_id = $1 AND key = ANY($2::text[]) AND kind = $3`, [
    exp.id,
    keys,
    kind,
  ]);
  return keys.length;
}
