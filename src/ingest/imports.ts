import { once } from 'node:events';
import path from 'node:path';
import { PassThrough, type Readable } from 'node:stream';
import { createGunzip } from 'node:zlib';
import streamArray from 'stream-json/streamers/stream-array.js';
import { z } from 'zod';
import type { Config } from '../config.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { settleAll } from '../lib/settle.js';
import { badRequest, notFound } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { localKeyProblem, MAX_LOCAL_KEY_LENGTH } from '../storage/local-store.js';
import { ObjectNotFoundError, type ObjectStore } from '../storage/object-store.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../storage/stores.js';
import { lockIngestPartition, retryOnDeadlock, tuneBatchTransaction } from './apply.js';
import { applyIsolating, insertDeadLetters, parsePayload, reasonOf, type DataError, type DeadLetter } from './dead-letters.js';
import { ingestMetrics } from './metrics.js';
import { partitionOf } from './partitions.js';
import { stagedForm } from './staging.js';
import type { TrackEvent } from './types.js';
import { validateEvent } from './validate.js';

/**
 * Bulk imports: a file of event objects (NDJSON, or one JSON array; optionally gzipped) read as a stream from the
 * local store or the workspace's S3/GCS bucket, validated object by object with the /users/track rules, applied in
 * batches by the same set-based code, each batch as one transaction per ingestion partition (src/ingest/partitions.ts),
 * at once. Each partition commits its own position (records handled) in the same transaction as its profile
 * updates, so an import restarted after a crash resumes at the lowest committed position and applies a record
 * only in the partitions that had not committed it: never twice. Refused records go to `<key>.rejects.ndjson`
 * beside the file as {line, reason, object}.
 */

export const IMPORT_FORMATS = ['ndjson', 'json'] as const;
export type ImportFormat = (typeof IMPORT_FORMATS)[number];

/** What starts an import (HTTP body and CLI options alike). */
export const ImportRequest = z
  .object({
    source: z.enum(['local', 'bucket'], { error: "source must be 'local' (the built-in store) or 'bucket' (the workspace's S3/GCS bucket)" }).default('local'),
    key: z
      .string({ error: 'key is required: the object key of the file to import' })
      .min(1, 'key must not be empty')
      .max(MAX_LOCAL_KEY_LENGTH, `key may be at most ${MAX_LOCAL_KEY_LENGTH} characters`)
      .refine((k) => !k.includes('\0'), 'key must not contain a NUL character')
      .refine((k) => !k.split('/').includes('..') && !k.startsWith('/'), 'key must be a relative object key without ..'),
    format: z.enum(IMPORT_FORMATS, { error: "format must be 'ndjson' or 'json'" }).optional(),
  })
  .strict()
  .superRefine((r, ctx) => {
    // The local store's keys are file paths inside the workspace's directory: stricter than a bucket's.
    const problem = r.source === 'local' ? localKeyProblem(r.key) : null;
    if (problem) ctx.addIssue({ code: 'custom', path: ['key'], message: problem });
  });
export type ImportRequest = z.infer<typeof ImportRequest>;

export interface ImportStatus {
  import_id: string;
  status: 'queued' | 'running' | 'completed' | 'failed';
  store: 'local' | 's3' | 'gcs';
  key: string;
  format: ImportFormat;
  records_handled: number;
  events_applied: number;
  events_unmatched: number;
  rejected: number;
  rejects_key: string;
  bytes_total: number | null;
  error: string | null;
  created_at: string;
  started_at: string | null;
  finished_at: string | null;
}

interface ImportRow {
  id: string;
  workspace_id: string;
  store: 'local' | 's3' | 'gcs';
  object_key: string;
  format: ImportFormat;
  status: ImportStatus['status'];
  /** Records handled by every partition (the lowest partition position), or by runs before partitions. */
  position: number;
  /** Partitions the import's batches are split into, fixed at its first run (null before it). */
  partitions: number | null;
  events_applied: number;
  events_unmatched: number;
  rejected: number;
  bytes_total: number | null;
  rejects_key: string;
  error: string | null;
  created_at: Date;
  started_at: Date | null;
  finished_at: Date | null;
}

const toStatus = (r: ImportRow): ImportStatus => ({
  import_id: r.id,
  status: r.status,
  store: r.store,
  key: r.object_key,
  format: r.format,
  records_handled: r.position,
  events_applied: r.events_applied,
  events_unmatched: r.events_unmatched,
  rejected: r.rejected,
  rejects_key: r.rejects_key,
  bytes_total: r.bytes_total,
  error: r.error,
  created_at: r.created_at.toISOString(),
  started_at: r.started_at?.toISOString() ?? null,
  finished_at: r.finished_at?.toISOString() ?? null,
});

/**
 * An import's row with its progress: counts of runs before partitions (in `imports`) plus the partitions', and the
 * position every partition has reached.
 */
const SELECT_IMPORT = `
  SELECT i.id, i.workspace_id, i.store, i.object_key, i.format, i.status, i.partitions, i.bytes_total, i.rejects_key, i.error,
         i.created_at, i.started_at, i.finished_at,
         coalesce(p.position, i.position)::bigint AS position,
         (i.events_applied + coalesce(p.events_applied, 0))::bigint AS events_applied,
         (i.events_unmatched + coalesce(p.events_unmatched, 0))::bigint AS events_unmatched,
         (i.rejected + coalesce(p.rejected, 0))::bigint AS rejected
    FROM imports i
    LEFT JOIN LATERAL (SELECT min(position) AS position, sum(events_applied) AS events_applied, sum(events_unmatched) AS events_unmatched,
                              sum(rejected) AS rejected
                         FROM import_partitions WHERE import_id = i.id) p ON true`;

async function selectImport(pool: Pool, importId: string, workspaceId?: string): Promise<ImportRow | undefined> {
  const { rows } = await pool.query<ImportRow>(`${SELECT_IMPORT} WHERE i.id = $1 ${workspaceId ? 'AND i.workspace_id = $2' : ''}`, workspaceId ? [importId, workspaceId] : [importId]);
  return rows[0];
}

/** The store an import reads: the workspace's own directory of the built-in local store, or its bucket. */
async function openStore(config: Pick<Config, 'LOCAL_STORE_DIR'>, pool: Pool, workspaceId: string, source: 'local' | 'bucket'): Promise<WorkspaceStore> {
  const { destination, namespace } = await workspaceStorage(pool, workspaceId);
  if (source === 'local') return storeFor(config, null, namespace);
  if (!destination) throw badRequest("source 'bucket' needs a bucket declared for this workspace (export_destination); none is");
  return storeFor(config, destination, namespace);
}

const formatOf = (key: string, given?: ImportFormat): ImportFormat => given ?? (/\.json(\.gz)?$/i.test(key) ? 'json' : 'ndjson');

/** Records an import after checking its file exists; the caller runs or enqueues it. */
export interface CreateImportOptions {
  /** Run by the bulk-import workers (the default), rather than in the foreground by `ces import`. */
  viaQueue?: boolean;
  /** Runs in the transaction that records the import (an Idempotency-Key answers there). */
  onRecorded?: (db: PoolClient, status: ImportStatus) => Promise<void>;
}

export async function createImport(
  deps: { pool: Pool; config: Pick<Config, 'LOCAL_STORE_DIR'> },
  workspaceId: string,
  request: ImportRequest,
  requestedBy: string,
  options: CreateImportOptions = {},
): Promise<ImportStatus> {
  const opened = await openStore(deps.config, deps.pool, workspaceId, request.source);
  try {
    const size = await opened.store.head(request.key);
    if (size === null) throw notFound(`No object ${request.key} in the ${request.source === 'local' ? 'local store' : `${opened.store.kind} bucket ${opened.store.bucket}`}`);
    const rejectsKey = `${request.key.replace(/\.gz$/i, '')}.rejects.ndjson`;
    return await withTransaction(deps.pool, async (client) => {
      const { rows } = await client.query<ImportRow>(
        `INSERT INTO imports (workspace_id, store, object_key, format, bytes_total, rejects_key, requested_by, via_queue)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
        [workspaceId, opened.store.kind, request.key, formatOf(request.key, request.format), size, rejectsKey, requestedBy, options.viaQueue ?? true],
      );
      const status = toStatus(rows[0]!);
      await options.onRecorded?.(client, status);
      return status;
    });
  } finally {
    opened.close();
  }
}

/** The status of one import of the workspace, or a 404. */
export async function readImport(pool: Pool, workspaceId: string, importId: string): Promise<ImportStatus> {
  const row = await selectImport(pool, importId, workspaceId);
  if (!row) throw notFound(`No import ${importId}`);
  return toStatus(row);
}

/** Marks an import failed for good (its job ran out of attempts, or the file cannot be read as its format). */
export async function failImport(pool: Pool, importId: string, message: string): Promise<void> {
  await pool.query(`UPDATE imports SET status = 'failed', error = $2, finished_at = now(), updated_at = now() WHERE id = $1 AND status <> 'completed'`, [
    importId,
    message.slice(0, 1000),
  ]);
}

/** A record of the file: its 1-based line (NDJSON) or element position (JSON array), and its parsed value or why not. */
interface FileRecord {
  line: number;
  value?: unknown;
  /** Raw text of a line that is not JSON. */
  raw?: string;
  reason?: string;
}

const MAX_LINE_BYTES = 1024 * 1024;

/** The reason written in the rejects file for a record PostgreSQL refused at apply time. */
const refusedReason = (message: string) => `the database refused it: ${message}`;

/**
 * A line of the rejects file. A record nested too deep for JSON.stringify (a few thousand levels; refused for its
 * nesting, or for not being an event object) is written with `object: null` rather than failing the import.
 */
function rejectLine(line: number, reason: string, object: unknown): string {
  try {
    return `${JSON.stringify({ line, reason, object })}\n`;
  } catch {
    return `${JSON.stringify({ line, reason, object: null })}\n`;
  }
}

/** NDJSON lines, split on bytes so that multi-byte characters never straddle a chunk; blank lines are skipped. */
async function* ndjsonRecords(source: Readable): AsyncGenerator<FileRecord> {
  let carry: Buffer = Buffer.alloc(0);
  let line = 0;
  let skipping = false;
  const parse = (buf: Buffer, from: number, to: number): FileRecord | null => {
    line++;
    if (skipping) {
      skipping = false;
      return { line, reason: `line longer than ${MAX_LINE_BYTES} bytes`, raw: '' };
    }
    const text = buf.toString('utf8', from, to).trim();
    if (text === '') return null;
    try {
      return { line, value: JSON.parse(text) };
    } catch (err) {
      return { line, reason: `malformed JSON: ${(err as Error).message}`, raw: text.length > 1000 ? `${text.slice(0, 1000)}...` : text };
    }
  };
  for await (const chunk of source as AsyncIterable<Buffer>) {
    const buf = carry.length ? Buffer.concat([carry, chunk]) : chunk;
    let start = 0;
    let nl: number;
    while ((nl = buf.indexOf(10, start)) !== -1) {
      const rec = parse(buf, start, nl);
      if (rec) yield rec;
      start = nl + 1;
    }
    carry = buf.subarray(start);
    if (carry.length > MAX_LINE_BYTES) {
      // Drop the rest of an overlong line rather than hold it: the record is refused when its end arrives.
      skipping = true;
      carry = Buffer.alloc(0);
    }
  }
  if (carry.length > 0 || skipping) {
    const rec = parse(carry, 0, carry.length);
    if (rec) yield rec;
  }
}

/** Elements of one top-level JSON array, streamed with stream-json (never the whole document in memory). */
async function* jsonArrayRecords(source: Readable): AsyncGenerator<FileRecord> {
  const items = streamArray.withParserAsStream();
  source.on('error', (err) => items.destroy(err));
  source.pipe(items);
  for await (const item of items as AsyncIterable<{ key: number; value: unknown }>) {
    yield { line: item.key + 1, value: item.value };
  }
}

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
export async function runImport(deps: RunImportDeps, importId: string, options: RunImportOptions = {}): Promise<ImportStatus> {
  const lockClient = await deps.pool.connect();
  let opened: WorkspaceStore | undefined;
  const metrics = ingestMetrics(deps.metrics);
  try {
    const got = await lockClient.query<{ ok: boolean }>('SELECT pg_try_advisory_lock(hashtextextended($1, 0)) AS ok', [`ces-import:${importId}`]);
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
    await lockClient.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [`ces-import:${importId}`]).catch(() => {});
    lockClient.release();
  }
}

async function importFile(deps: RunImportDeps, store: ObjectStore, row: ImportRow, log: Logger, options: RunImportOptions): Promise<ImportStatus> {
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
  const stored = await deps.pool.query<{ part: number; position: number }>('SELECT part, position FROM import_partitions WHERE import_id = $1', [row.id]);
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
    rejectBuffer += rejectLine(d.line, refusedReason(d.error_message), 'objects' in parsed ? (parsed.objects.events[0] ?? null) : null);
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
   * PostgreSQL refuses are set aside (src/ingest/dead-letters.ts) rather than failing the batch on every attempt:
   * dead letters in the same transaction, counted as rejected by their partition, and lines of the rejects file.
   */
  const commitPartition = async (part: number, events: TrackEvent[], lines: number[], upTo: number, rejected: number) => {
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
          const letters = refused.map(
            ({ item, error }): DeadLetter => ({
              source: 'import',
              workspaceId: row.workspace_id,
              importId: row.id,
              line: lineOf.get(item)!,
              part,
              acceptedAt: null,
              objects: 1,
              payload: JSON.stringify(stagedForm({ events: [item], purchases: [], attributes: [] })),
              error,
            }),
          );
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
      log.error({ line: d.line, part, code: d.error.code, reason: reasonOf(d.error.code) }, 'import record refused by the database; moved to ingest_dead_letters');
      rejectBuffer += rejectLine(d.line!, refusedReason(d.error.message), JSON.parse(d.payload).events[0]);
    }
  };
  const commit = async (parts: TrackEvent[][], lines: number[][], upTo: number, rejected: number) => {
    // A partition already past this batch (it committed further before a crash) has nothing in it to apply.
    await settleAll(
      parts.map(async (events, part) => (upTo > positions[part]! ? commitPartition(part, events, lines[part]!, upTo, part === 0 ? rejected : 0) : undefined)),
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
      if (row.format === 'json' && !(err as NodeJS.ErrnoException).code) throw new ImportFileError(`the file is not a readable JSON array: ${(err as Error).message}`);
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

  await deps.pool.query(`UPDATE imports SET status = 'completed', finished_at = now(), updated_at = now() WHERE id = $1`, [row.id]);
  const status = toStatus((await selectImport(deps.pool, row.id))!);
  log.info({ records: status.records_handled, applied: status.events_applied, rejected: status.rejected, file: path.basename(row.object_key) }, 'import completed');
  return status;
}

export interface StartImportDeps {
  pool: Pool;
  config: Pick<Config, 'LOCAL_STORE_DIR'>;
  enqueue: (importId: string) => Promise<void>;
}

/**
 * Records an import and hands it to the bulk-import workers. Once recorded it will run: Redis refusing the job (it
 * went away) only delays it until the reconciler queues it (`queued` is false then).
 */
export async function startImport(
  deps: StartImportDeps,
  workspaceId: string,
  request: ImportRequest,
  requestedBy: string,
  onRecorded?: CreateImportOptions['onRecorded'],
): Promise<ImportStatus & { queued: boolean }> {
  const status = await createImport(deps, workspaceId, request, requestedBy, { onRecorded });
  const queued = await deps.enqueue(status.import_id).then(
    () => true,
    () => false,
  );
  return { ...status, queued };
}
