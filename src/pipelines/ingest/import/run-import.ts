import path from 'node:path';
import type { Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import { lockNames, tryLockSession, unlockSession } from '../../../platform/db/advisory-locks.js';
import type { Config } from '../../../platform/config.js';
import { withTransaction, type Pool, type PoolClient } from '../../../platform/db/pool.js';
import { settleAll } from '../../../platform/lib/settle.js';
import type { Logger } from '../../../platform/logger.js';
import type { Metrics } from '../../../platform/metrics.js';
import { ObjectNotFoundError, type ObjectStore } from '../../../platform/storage/object-store.js';
import type { WorkspaceStore } from '../../../platform/storage/stores.js';
import { lockProfilePartition } from '../../../profiles/write/locks.js';
import { retryOnDeadlock, tuneBatchTransaction } from '../../../profiles/write/transaction.js';
import { applyIsolating } from '../../../profiles/write/apply-isolating.js';
import { reasonOf, type DataError } from '../../../profiles/write/data-errors.js';
import { insertDeadLetters, type DeadLetter } from '../apply/dead-letters.js';
import { ingestMetrics } from '../metrics.js';
import { partitionOf } from '../apply/partitions.js';
import { stagedForm } from '../accept/staging-writer.js';
import type { TrackEvent } from '../../../profiles/tracked-types.js';
import { validateEvent } from '../../../profiles/validation/validate.js';
import { jsonArrayRecords, ndjsonRecords, refusedReason, type FileRecord } from './file-records.js';
import { openStore, selectImport, toStatus, type ImportRow, type ImportStatus } from './imports.js';
import { RejectsFile, type EarlierRefusal } from './rejects-file.js';

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
    if (!(await tryLockSession(lockClient, lockNames.importRun(importId))))
      throw new Error(`import ${importId} is being run by another process`);
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
    await unlockSession(lockClient, lockNames.importRun(importId)).catch(() => {});
    lockClient.release();
  }
}

/** One run of an import: what its steps share. `positions` and `progress` move as partitions commit. */
interface ImportRun {
  deps: RunImportDeps;
  row: ImportRow;
  log: Logger;
  options: RunImportOptions;
  metrics: ReturnType<typeof ingestMetrics>;
  partitions: number;
  /** Each partition's position: a record is applied in its partition only past that partition's position. */
  positions: number[];
  progress: ImportProgress;
  rejects: RejectsFile;
}

async function importFile(
  deps: RunImportDeps,
  store: ObjectStore,
  row: ImportRow,
  log: Logger,
  options: RunImportOptions,
): Promise<ImportStatus> {
  const progress: ImportProgress = {
    bytesRead: 0,
    bytesTotal: row.bytes_total,
    recordsHandled: row.position,
    eventsApplied: row.events_applied,
    rejected: row.rejected,
  };
  const partitions = row.partitions ?? 1;
  const positions = await partitionPositions(deps.pool, row.id, partitions);
  // Read before the file is opened: its stream flows from then on.
  const refusedBefore = await deps.pool.query<EarlierRefusal>(
    'SELECT line, error_message, payload FROM ingest_dead_letters WHERE import_id = $1 ORDER BY line',
    [row.id],
  );

  const body = await store.get(row.object_key);
  body.on('data', (chunk: Buffer) => (progress.bytesRead += chunk.length));
  const source = /\.gz$/i.test(row.object_key) ? body.pipe(createGunzip()) : body;
  body.on('error', (err) => source.destroy(err));
  const rejects = new RejectsFile(store, row.rejects_key, refusedBefore.rows);

  const metrics = ingestMetrics(deps.metrics);
  const run: ImportRun = { deps, row, log, options, metrics, partitions, positions, progress, rejects };
  try {
    await applyRecords(run, source);
  } catch (err) {
    rejects.destroy(err as Error);
    body.destroy();
    throw err;
  }
  return completeImport(deps.pool, row, log);
}

/** Each partition's position, its row created at the import's position the first time the import runs. */
async function partitionPositions(pool: Pool, importId: string, partitions: number): Promise<number[]> {
  await pool.query(
    `INSERT INTO import_partitions (import_id, part, position)
     SELECT i.id, g, i.position FROM imports i, generate_series(0, $2::int - 1) g WHERE i.id = $1
     ON CONFLICT (import_id, part) DO NOTHING`,
    [importId, partitions],
  );
  const positions: number[] = Array.from({ length: partitions }, () => 0);
  const stored = await pool.query<{ part: number; position: number }>(
    'SELECT part, position FROM import_partitions WHERE import_id = $1',
    [importId],
  );
  for (const r of stored.rows) if (r.part < partitions) positions[r.part] = r.position;
  return positions;
}

/** The events read since the last commit, by partition, and how many records of them were refused. */
class Batch {
  readonly parts: TrackEvent[][];
  /** The line of each event of `parts`, for the rejects file when PostgreSQL refuses one. */
  readonly lines: number[][];
  events = 0;
  rejected = 0;

  constructor(partitions: number) {
    this.parts = Array.from({ length: partitions }, (): TrackEvent[] => []);
    this.lines = Array.from({ length: partitions }, (): number[] => []);
  }

  add(part: number, event: TrackEvent, line: number): void {
    this.parts[part]!.push(event);
    this.lines[part]!.push(line);
    this.events++;
  }
}

/**
 * Reads the file's records to its end and applies them batch by batch, then completes the rejects file. One batch
 * commits while the next is read and validated: PostgreSQL and Node work at once.
 */
async function applyRecords(run: ImportRun, source: Readable): Promise<void> {
  const batchSize = Math.max(1, run.deps.config.INGEST_IMPORT_BATCH);
  let batch = new Batch(run.partitions);
  let inflight: Promise<void> | undefined;
  const flush = async (upTo: number) => {
    if (inflight) await inflight;
    const full = batch;
    batch = new Batch(run.partitions);
    inflight = commitBatch(run, full, upTo);
    // Surfaced by the next await of `inflight`; avoid an unhandled rejection meanwhile.
    inflight.catch(() => {});
  };

  let lastLine = run.row.position;
  try {
    const records = run.row.format === 'json' ? jsonArrayRecords(source) : ndjsonRecords(source);
    try {
      for await (const rec of records) {
        lastLine = Math.max(lastLine, rec.line);
        await takeRecord(run, batch, rec);
        if (batch.events >= batchSize) await flush(rec.line);
      }
    } catch (err) {
      // The parser's own errors (no system error code) mean the document itself is unreadable: no retry helps.
      if (run.row.format === 'json' && !(err as NodeJS.ErrnoException).code)
        throw new ImportFileError(`the file is not a readable JSON array: ${(err as Error).message}`);
      throw err;
    }
    await flush(lastLine);
    await inflight;
    await run.rejects.finish();
  } catch (err) {
    await inflight?.catch(() => {});
    throw err;
  }
}

/** Validates a record: an event past its partition's position joins the batch, a refused record the rejects file. */
async function takeRecord(run: ImportRun, batch: Batch, rec: FileRecord): Promise<void> {
  let reason = rec.reason;
  let object: unknown = rec.raw;
  if (reason === undefined) {
    const v = validateEvent(rec.value);
    if (v.ok) {
      const part = partitionOf(v.value.identity, run.partitions);
      if (rec.line > run.positions[part]!) batch.add(part, v.value, rec.line);
    } else {
      reason = v.type;
      object = rec.value;
    }
  }
  if (reason !== undefined) {
    // Every run writes the whole rejects file; a refusal is counted once, by partition 0.
    run.rejects.add(rec.line, reason, object);
    if (rec.line > run.positions[0]!) {
      batch.rejected++;
      run.deps.metrics.ingestRejected.inc({ kind: 'events', source: 'import' });
    }
    await run.rejects.flush(false);
  }
}

/** Commits a batch in every partition not already past it, then reports the import's progress. */
async function commitBatch(run: ImportRun, batch: Batch, upTo: number): Promise<void> {
  // A partition already past this batch (it committed further before a crash) has nothing in it to apply.
  await settleAll(
    batch.parts.map(async (events, part) =>
      upTo > run.positions[part]!
        ? commitPartition(run, {
            part,
            events,
            lines: batch.lines[part]!,
            upTo,
            rejected: part === 0 ? batch.rejected : 0,
          })
        : undefined,
    ),
  );
  const { progress } = run;
  progress.recordsHandled = Math.min(...run.positions);
  progress.rejected += batch.rejected;
  run.metrics.importPosition.set({ import_id: run.row.id }, progress.recordsHandled);
  run.options.onProgress?.(progress);
  await run.deps.pool.query('UPDATE imports SET updated_at = now() WHERE id = $1', [run.row.id]);
}

/** One partition's share of a batch, with its new position (and, for partition 0, the batch's refused records). */
interface PartitionShare {
  part: number;
  events: TrackEvent[];
  lines: number[];
  upTo: number;
  rejected: number;
}

/** Commits a partition's share of a batch, then counts what it applied and what PostgreSQL refused. */
async function commitPartition(run: ImportRun, share: PartitionShare): Promise<void> {
  const { part } = share;
  const r = await retryOnDeadlock(
    () => withTransaction(run.deps.pool, (client) => applyPartitionShare(client, run.row, share)),
    run.log,
  );
  run.positions[part] = share.upTo;
  run.progress.eventsApplied += r.applied.events;
  run.progress.rejected += r.letters.length;
  run.deps.metrics.ingestObjects.inc({ kind: 'events', source: 'import' }, r.applied.events);
  run.metrics.unmatched.inc({ source: 'import' }, r.applied.unmatched);
  if (r.letters.length > 0) run.metrics.deadLetters.inc({ source: 'import' }, r.letters.length);
  for (const d of r.letters) {
    // The reason's code only: PostgreSQL's message may quote the record, which is personal data.
    run.log.error(
      { line: d.line, part, code: d.error.code, reason: reasonOf(d.error.code) },
      'import record refused by the database; moved to ingest_dead_letters',
    );
    run.rejects.add(d.line!, refusedReason(d.error.message), JSON.parse(d.payload).events[0]);
  }
}

/**
 * The transaction of a partition's share: its events applied, and its position moved. Events PostgreSQL refuses are set
 * aside (src/pipelines/ingest/apply/dead-letters.ts) rather than failing the batch on every attempt: dead letters in
 * the same transaction, counted as rejected by their partition, and lines of the rejects file.
 */
async function applyPartitionShare(client: PoolClient, row: ImportRow, share: PartitionShare) {
  const { part, events, lines } = share;
  await tuneBatchTransaction(client);
  await lockProfilePartition(client, [row.workspace_id], part);
  // Each event keyed by its import and line: its id in the event log, whatever retries the share.
  events.forEach((e, i) => (e.logKey = `import:${row.id}:${lines[i]}`));
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
    [row.id, part, share.upTo, applied.events, applied.unmatched, share.rejected + letters.length],
  );
  return { applied, letters };
}

/** Marks the import completed and logs its totals. */
async function completeImport(pool: Pool, row: ImportRow, log: Logger): Promise<ImportStatus> {
  await pool.query(`UPDATE imports SET status = 'completed', finished_at = now(), updated_at = now() WHERE id = $1`, [
    row.id,
  ]);
  const status = toStatus((await selectImport(pool, row.id))!);
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
