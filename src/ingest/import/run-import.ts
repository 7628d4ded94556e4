import { once } from 'node:events';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { createGunzip } from 'node:zlib';
import type { Config } from '../../config.js';
import { withTransaction, type Pool } from '../../db/pool.js';
import { settleAll } from '../../lib/settle.js';
import type { Logger } from '../../logger.js';
import type { Metrics } from '../../metrics.js';
import { ObjectNotFoundError, type ObjectStore } from '../../storage/object-store.js';
import type { WorkspaceStore } from '../../storage/stores.js';
import { lockIngestPartition, retryOnDeadlock, tuneBatchTransaction } from '../apply/apply-transaction.js';
import {
  applyIsolating,
  insertDeadLetters,
  parsePayload,
  reasonOf,
  type DataError,
  type DeadLetter,
} from '../apply/dead-letters.js';
import { ingestMetrics } from '../metrics.js';
import { partitionOf } from '../apply/partitions.js';
import { stagedForm } from '../accept/staging-writer.js';
import type { TrackEvent } from '../types.js';
import { validateEvent } from '../accept/validate.js';
import { jsonArrayRecords, ndjsonRecords, refusedReason, rejectLine } from './file-records.js';
import { openStore, selectImport, toStatus, type ImportRow, type ImportStatus } from './imports.js';

/** Running an import to its end (or resuming one), batch by batch, each partition committing its own position. */

export interface ImportProgress {
  bytesRead: number;
  bytesTotal: number | null;
  recordsHandled: number;
  eventsApplied: number;
  rejected: number;
}

export interface RunImportDeps {
  pool: Pool;
  config: Pick<Config, 'LOCAL_STORE_DIR' | 'INGEST_IMPORT_BATCH' | 'INGEST_PARTITIONS'>;
  log: Logger;
  metrics: Metrics;
}

export interface RunImportOptions {
  onProgress?: (p: ImportProgress) => void;
}

/** The file cannot be imported at all (not an array, malformed document...): retrying will not help. */
export class ImportFileError extends Error {}

/**
 * Runs (or resumes) an import to completion; a failed one resumes too (`ces import --resume`, once its cause is
 * fixed), a completed one is left as it is. Holds a session advisory lock on the import for the whole run, so two
 * runners (a stalled job retried while the first still works) never interleave; the lock goes with the connection
 * if the process dies.
 */
export async function runImport(
  deps: RunImportDeps,
  importId: string,
  options: RunImportOptions = {},
): Promise<ImportStatus> {
  const lockClient = await deps.pool.connect();
  let opened: WorkspaceStore | undefined;
  const metrics = ingestMetrics(deps.metrics);
  try {
    const got = await lockClient.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [
      `ces-import:${importId}`,
    ]);
    if (!got.rows[0]!.ok) throw new Error(`import ${importId} is being run by another process`);
    const { rowCount } = await deps.pool.query(
      `UPDATE imports SET status = 'running', started_at = coalesce(started_at, now()), attempts = attempts + 1, error = NULL, updated_at = now(),
              partitions = coalesce(partitions, $2)
        WHERE id = $1 AND status IN ('queued', 'running', 'failed')`,
      [importId, Math.max(1, deps.config.INGEST_PARTITIONS)],
    );
    const row = await selectImport(deps.pool, importId);
    if (!row) throw new ImportFileError(`No import ${importId}`);
    if (rowCount === 0) return toStatus(row);
    const log = deps.log.child({ importId, resumeAt: row.position });
    opened = await openStore(deps.config, deps.pool, row.workspace_id, row.store === 'local' ? 'local' : 'bucket');
    const result = await importFile(deps, opened.store, row, log, options);
    metrics.importPosition.remove(importId);
    return result;
  } catch (err) {
    metrics.importPosition.remove(importId);
    if (err instanceof ObjectNotFoundError) throw new ImportFileError(`the file ${err.key} is no longer in the store`);
    throw err;
  } finally {
    opened?.close();
    await lockClient
      .query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [`ces-import:${importId}`])
      .catch(() => {});
    lockClient.release();
  }
}

async function importFile(
  deps: RunImportDeps,
  store: ObjectStore,
  row: ImportRow,
  log: Logger,
  options: RunImportOptions,
): Promise<ImportStatus> {
  const batchSize = Math.max(1, deps.config.INGEST_IMPORT_BATCH);
  const metrics = ingestMetrics(deps.metrics);
  const progress: ImportProgress = {
    bytesRead: 0,
    bytesTotal: row.bytes_total,
    recordsHandled: row.position,
    eventsApplied: row.events_applied,
    rejected: row.rejected,
  };

  // Each partition's position: a record is applied in its partition only past that partition's position.
  const partitions = row.partitions ?? 1;
  await deps.pool.query(
    `INSERT INTO import_partitions (import_id, part, position)
     SELECT i.id, g, i.position FROM imports i, generate_series(0, $2::int - 1) g WHERE i.id = $1
     ON CONFLICT (import_id, part) DO NOTHING`,
    [row.id, partitions],
  );
  const positions: number[] = Array.from({ length: partitions }, () => 0);
  const stored = await deps.pool.query<{ part: number; position: number }>(
    'SELECT part, position FROM import_partitions WHERE import_id = $1',
    [row.id],
  );
  for (const r of stored.rows) if (r.part < partitions) positions[r.part] = r.position;
  // Records PostgreSQL refused in an earlier run lie behind their partition's position, never applied again: their
  // lines of the rejects file come from ingest_dead_letters, where that run's batch put them. (Read before the file
  // is opened: its stream flows from then on.)
  const refusedBefore = await deps.pool.query<{ line: number; error_message: string; payload: string }>(
    'SELECT line, error_message, payload FROM ingest_dead_letters WHERE import_id = $1 ORDER BY line',
    [row.id],
  );

  const body = await store.get(row.object_key);
  body.on('data', (chunk: Buffer) => (progress.bytesRead += chunk.length));
  const source = /\.gz$/i.test(row.object_key) ? body.pipe(createGunzip()) : body;
  body.on('error', (err) => source.destroy(err));

  // Rejects stream to the store while the import runs; a crash leaves no partial object (stores write atomically),
  // and a resumed run writes the whole file again (records before the position are re-validated, not re-applied).
  const rejects = new PassThrough();
  // A store attaches its handlers only once its upload starts (the local store after creating the directory). An
  // import failing before that destroys this stream with its error, which with no listener became an uncaught
  // exception (seen once in CI: an unreadable JSON document refused within the first milliseconds). The failure is
  // the import's own throw, and the upload's is `uploaded`.
  rejects.on('error', () => {});
  const uploaded = store.put(row.rejects_key, rejects, { contentType: 'application/x-ndjson' });
  uploaded.catch(() => {});
  let rejectBuffer = '';
  for (const d of refusedBefore.rows) {
    const parsed = parsePayload(d.payload);
    rejectBuffer += rejectLine(
      d.line,
      refusedReason(d.error_message),
      'objects' in parsed ? (parsed.objects.events[0] ?? null) : null,
    );
  }
  const flushRejects = async (force: boolean) => {
    if (rejectBuffer.length === 0 || (!force && rejectBuffer.length < 64 * 1024)) return;
    const chunk = rejectBuffer;
    rejectBuffer = '';
    if (!rejects.write(chunk)) await once(rejects, 'drain');
  };

  const emptyBatch = () => Array.from({ length: partitions }, (): TrackEvent[] => []);
  let batch = emptyBatch();
  // The line of each event of `batch`, for the rejects file when PostgreSQL refuses one.
  let batchLines = Array.from({ length: partitions }, (): number[] => []);
  let batchEvents = 0;
  let batchRejected = 0;
  let inflight: Promise<void> | undefined;
  /**
   * One partition's share of a batch, with its position (and, for partition 0, the batch's refused records). Events
   * PostgreSQL refuses are set aside (src/ingest/apply/dead-letters.ts) rather than failing the batch on every attempt:
   * dead letters in the same transaction, counted as rejected by their partition, and lines of the rejects file.
   */
  const commitPartition = async (
    part: number,
    events: TrackEvent[],
    lines: number[],
    upTo: number,
    rejected: number,
  ) => {
    const r = await retryOnDeadlock(
      () =>
        withTransaction(deps.pool, async (client) => {
          await tuneBatchTransaction(client);
          await lockIngestPartition(client, [row.workspace_id], part);
          const refused: { item: TrackEvent; error: DataError }[] = [];
          const applied = await applyIsolating(
            client,
            events,
            (list) => [{ workspaceId: row.workspace_id, objects: { events: list, purchases: [], attributes: [] } }],
            refused,
          );
          const lineOf = new Map(refused.length > 0 ? events.map((e, i) => [e, lines[i]!]) : []);
          const letters = refused.map(({ item, error }): DeadLetter => ({
            source: 'import',
            workspaceId: row.workspace_id,
            importId: row.id,
            line: lineOf.get(item)!,
            part,
            acceptedAt: null,
            objects: 1,
            payload: JSON.stringify(stagedForm({ events: [item], purchases: [], attributes: [] })),
            error,
          }));
          await insertDeadLetters(client, letters);
          await client.query(
            `UPDATE import_partitions SET position = $3, events_applied = events_applied + $4, events_unmatched = events_unmatched + $5,
                    rejected = rejected + $6 WHERE import_id = $1 AND part = $2`,
            [row.id, part, upTo, applied.events, applied.unmatched, rejected + letters.length],
          );
          return { applied, letters };
        }),
      log,
    );
    positions[part] = upTo;
    progress.eventsApplied += r.applied.events;
    progress.rejected += r.letters.length;
    deps.metrics.ingestObjects.inc({ kind: 'events', source: 'import' }, r.applied.events);
    metrics.unmatched.inc({ source: 'import' }, r.applied.unmatched);
    if (r.letters.length > 0) metrics.deadLetters.inc({ source: 'import' }, r.letters.length);
    for (const d of r.letters) {
      // The reason's code only: PostgreSQL's message may quote the record, which is personal data.
      log.error(
        { line: d.line, part, code: d.error.code, reason: reasonOf(d.error.code) },
        'import record refused by the database; moved to ingest_dead_letters',
      );
      rejectBuffer += rejectLine(d.line!, refusedReason(d.error.message), JSON.parse(d.payload).events[0]);
    }
  };
  const commit = async (parts: TrackEvent[][], lines: number[][], upTo: number, rejected: number) => {
    // A partition already past this batch (it committed further before a crash) has nothing in it to apply.
    await settleAll(
      parts.map(async (events, part) =>
        upTo > positions[part]!
          ? commitPartition(part, events, lines[part]!, upTo, part === 0 ? rejected : 0)
          : undefined,
      ),
    );
    progress.recordsHandled = Math.min(...positions);
    progress.rejected += rejected;
    metrics.importPosition.set({ import_id: row.id }, progress.recordsHandled);
    options.onProgress?.(progress);
    await deps.pool.query('UPDATE imports SET updated_at = now() WHERE id = $1', [row.id]);
  };
  // One batch commits while the next is read and validated: PostgreSQL and Node work at once.
  const flush = async (upTo: number) => {
    if (inflight) await inflight;
    const parts = batch;
    const lines = batchLines;
    const rejected = batchRejected;
    batch = emptyBatch();
    batchLines = Array.from({ length: partitions }, (): number[] => []);
    batchEvents = 0;
    batchRejected = 0;
    inflight = commit(parts, lines, upTo, rejected);
    // Surfaced by the next await of `inflight`; avoid an unhandled rejection meanwhile.
    inflight.catch(() => {});
  };

  let lastLine = row.position;
  try {
    const records = row.format === 'json' ? jsonArrayRecords(source) : ndjsonRecords(source);
    try {
      for await (const rec of records) {
        lastLine = Math.max(lastLine, rec.line);
        let reason = rec.reason;
        let object: unknown = rec.raw;
        if (reason === undefined) {
          const v = validateEvent(rec.value);
          if (v.ok) {
            const part = partitionOf(v.value.identity, partitions);
            if (rec.line > positions[part]!) {
              batch[part]!.push(v.value);
              batchLines[part]!.push(rec.line);
              batchEvents++;
            }
          } else {
            reason = v.type;
            object = rec.value;
          }
        }
        if (reason !== undefined) {
          // Every run writes the whole rejects file; a refusal is counted once, by partition 0.
          rejectBuffer += rejectLine(rec.line, reason, object);
          if (rec.line > positions[0]!) {
            batchRejected++;
            deps.metrics.ingestRejected.inc({ kind: 'events', source: 'import' });
          }
          await flushRejects(false);
        }
        if (batchEvents >= batchSize) await flush(rec.line);
      }
    } catch (err) {
      // The parser's own errors (no system error code) mean the document itself is unreadable: no retry helps.
      if (row.format === 'json' && !(err as NodeJS.ErrnoException).code)
        throw new ImportFileError(`the file is not a readable JSON array: ${(err as Error).message}`);
      throw err;
    }
    await flush(lastLine);
    await inflight;
    await flushRejects(true);
    rejects.end();
    await uploaded;
  } catch (err) {
    await inflight?.catch(() => {});
    rejects.destroy(err as Error);
    body.destroy();
    throw err;
  }

  await deps.pool.query(
    `UPDATE imports SET status = 'completed', finished_at = now(), updated_at = now() WHERE id = $1`,
    [row.id],
  );
  const status = toStatus((await selectImport(deps.pool, row.id))!);
  log.info(
    {
      records: status.records_handled,
      applied: status.events_applied,
      rejected: status.rejected,
      file: path.basename(row.object_key),
    },
    'import completed',
  );
  return status;
}
