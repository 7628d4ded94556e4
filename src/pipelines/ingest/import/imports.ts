import { z } from 'zod';
import type { Config } from '../../../platform/config.js';
import { withTransaction, type Pool, type PoolClient } from '../../../platform/db/pool.js';
import type { Logger } from '../../../platform/logger.js';
import { enqueueImport } from '../../../platform/queues/bulk-import.js';
import type { Queues } from '../../../platform/queues/index.js';
import { queueRecorded } from '../../../platform/queues/queue-recorded.js';
import { badRequest, notFound } from '../../../platform/errors.js';
import { localKeyProblem, MAX_LOCAL_KEY_LENGTH } from '../../../platform/storage/local-store.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../../../platform/storage/stores.js';

/**
 * Bulk imports: a file of event objects (NDJSON, or one JSON array; optionally gzipped) read as a stream from the local
 * store or the workspace's S3/GCS bucket, validated object by object with the /users/track rules, applied in batches by
 * the same set-based code, each batch as one transaction per ingestion partition
 * (src/pipelines/ingest/apply/partitions.ts), at once. Each partition commits its own position (records handled) in the
 * same transaction as its profile updates, so an import restarted after a crash resumes at the lowest committed
 * position and applies a record only in the partitions that had not committed it: never twice. Refused records go to
 * `<key>.rejects.ndjson` beside the file as {line, reason, object}.
 */

export const IMPORT_FORMATS = ['ndjson', 'json'] as const;
export type ImportFormat = (typeof IMPORT_FORMATS)[number];

/** What starts an import (HTTP body and CLI options alike). */
export const ImportRequest = z
  .object({
    source: z
      .enum(['local', 'bucket'], {
        error: "source must be 'local' (the built-in store) or 'bucket' (the workspace's S3/GCS bucket)",
      })
      .default('local'),
    key: z
      .string({ error: 'key is required: the object key of the file to import' })
      .min(1, 'key must not be empty')
      .max(MAX_LOCAL_KEY_LENGTH, `key may be at most ${MAX_LOCAL_KEY_LENGTH} characters`)
      .refine((k) => !k.includes('\0'), 'key must not contain a NUL character')
      .refine(
        (k) => !k.split('/').includes('..') && !k.startsWith('/'),
        'key must be a relative object key without ..',
      ),
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

export interface ImportRow {
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

export const toStatus = (r: ImportRow): ImportStatus => ({
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

export async function selectImport(pool: Pool, importId: string, workspaceId?: string): Promise<ImportRow | undefined> {
  const { rows } = await pool.query<ImportRow>(
    `${SELECT_IMPORT} WHERE i.id = $1 ${workspaceId ? 'AND i.workspace_id = $2' : ''}`,
    workspaceId ? [importId, workspaceId] : [importId],
  );
  return rows[0];
}

/** The store an import reads: the workspace's own directory of the built-in local store, or its bucket. */
export async function openStore(
  config: Pick<Config, 'LOCAL_STORE_DIR'>,
  pool: Pool,
  workspaceId: string,
  source: 'local' | 'bucket',
): Promise<WorkspaceStore> {
  const { destination, namespace } = await workspaceStorage(pool, workspaceId);
  if (source === 'local') return storeFor(config, null, namespace);
  if (!destination)
    throw badRequest("source 'bucket' needs a bucket declared for this workspace (export_destination); none is");
  return storeFor(config, destination, namespace);
}

const formatOf = (key: string, given?: ImportFormat): ImportFormat =>
  given ?? (/\.json(\.gz)?$/i.test(key) ? 'json' : 'ndjson');

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
    if (size === null)
      throw notFound(
        `No object ${JSON.stringify(request.key)} in the ${request.source === 'local' ? 'local store' : `${opened.store.kind} bucket ${opened.store.bucket}`}`,
      );
    const rejectsKey = `${request.key.replace(/\.gz$/i, '')}.rejects.ndjson`;
    return await withTransaction(deps.pool, async (client) => {
      const { rows } = await client.query<ImportRow>(
        `INSERT INTO imports (workspace_id, store, object_key, format, bytes_total, rejects_key, requested_by, via_queue)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING *`,
        [
          workspaceId,
          opened.store.kind,
          request.key,
          formatOf(request.key, request.format),
          size,
          rejectsKey,
          requestedBy,
          options.viaQueue ?? true,
        ],
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
  if (!row) throw notFound(`No import ${JSON.stringify(importId)}`);
  return toStatus(row);
}

/** Marks an import failed for good (its job ran out of attempts, or the file cannot be read as its format). */
export async function failImport(pool: Pool, importId: string, message: string): Promise<void> {
  await pool.query(
    `UPDATE imports SET status = 'failed', error = $2, finished_at = now(), updated_at = now() WHERE id = $1 AND status <> 'completed'`,
    [importId, message.slice(0, 1000)],
  );
}

export interface StartImportDeps {
  pool: Pool;
  config: Pick<Config, 'LOCAL_STORE_DIR'>;
  queues: Queues;
  log: Pick<Logger, 'warn'>;
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
  const queued = await queueRecorded(deps.log, 'import', { importId: status.import_id }, () =>
    enqueueImport(deps.queues, status.import_id),
  );
  return { ...status, queued };
}
