import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { Queues } from '../queues/index.js';
import { redisKeyPrefix, type Redis } from '../redis.js';
import { LocalStore } from '../storage/local-store.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../storage/stores.js';
import { exportLockKeys, type ExportLockKeys } from './holds.js';
import { exportKeyPrefix, MANIFEST_FILE, type PartKind } from './key-layout.js';
import { REMOVED_PARQUET_COLUMNS, usersParquetColumns } from './shard/parquet-schema.js';
import type { PartWriterOptions, UploadedPart } from './shard/part-writer.js';
import { ExportSpecSchema, type ExportSpec } from './request/request-body.js';
import { liveUsersSql } from './request/status.js';

/**
 * An export as its jobs see it: its row, its store, its holds, and the steps the shard jobs (./shard/run-shard.ts) and the
 * finishing job (./finish/finish-export.ts) share.
 */

export interface ExportJobDeps {
  config: Config;
  pool: Pool;
  /** Where export shards read segment members (EXPORT_DATABASE_URL); the primary pool itself when unset. */
  exportReadPool: Pool;
  redis: Redis;
  queues: Queues;
  metrics: Metrics;
  log: Logger;
}

export interface ExportRow {
  id: string;
  object_prefix: string;
  company_id: string;
  workspace_id: string;
  segment_id: string;
  segment_api_id: string;
  filter: unknown;
  status: 'queued' | 'running' | 'ready' | 'failed';
  request: unknown;
  destination: 'local' | 's3' | 'gcs';
  key_prefix: string | null;
  shard_count: number;
  /** Recorded before the local store had per-workspace namespaces: its keys are relative to the shared root. */
  local_shared_root: boolean;
  /** random_bucket values per shard when requested (null: recorded before this was kept). */
  shard_buckets: number | null;
  /** The API's address when the export was requested (null: recorded before this was kept). */
  public_base_url: string | null;
  /** The primary's WAL position when the export was requested (null: recorded before this was kept). */
  primary_lsn: string | null;
  /** The exports whose member records make up this one's (./member-layers.ts); null: recorded before they were. */
  member_layers: string[] | null;
  created_at: Date;
}

export async function loadExport(pool: Pool, exportId: string): Promise<ExportRow | null> {
  const { rows } = await pool.query<ExportRow>(
    `SELECT e.id, e.object_prefix, e.company_id, e.workspace_id, e.segment_id, s.api_id AS segment_api_id, s.filter, e.status, e.request,
            e.destination, e.key_prefix, COALESCE(e.shard_count, 1) AS shard_count, e.local_shared_root, e.shard_buckets,
            e.public_base_url, e.primary_lsn::text, e.member_layers, e.created_at
       FROM exports e JOIN segments s ON s.id = e.segment_id
      WHERE e.id = $1`,
    [exportId],
  );
  return rows[0] ?? null;
}

export const lockKeys = (config: Config, exp: ExportRow): ExportLockKeys =>
  exportLockKeys(redisKeyPrefix(config), exp.segment_id, exp.company_id);

export async function openStore(deps: ExportJobDeps, exp: ExportRow): Promise<WorkspaceStore> {
  const { destination, namespace } = await workspaceStorage(deps.pool, exp.workspace_id);
  const kind = destination?.provider ?? 'local';
  if (kind !== exp.destination)
    throw new Error(
      `the workspace's export destination changed from ${exp.destination} to ${kind} after the export was requested`,
    );
  return storeFor(deps.config, destination, namespace, { sharedRoot: exp.local_shared_root });
}

/**
 * Moves the export to running and fixes its key prefix, once, whichever job gets there first. The date in the key is
 * the day the export started running (the spec names the day of the callback, which no upload can know in advance).
 */
export async function markRunning(pool: Pool, exp: ExportRow, ws: WorkspaceStore): Promise<string | null> {
  const layout = ExportSpecSchema.safeParse(exp.request).data?.layout ?? 'spec';
  const candidate = exportKeyPrefix(ws.prefix, exp.segment_api_id, new Date(), exp.object_prefix, layout);
  const { rows } = await pool.query<{ key_prefix: string }>(
    `UPDATE exports SET status = 'running', started_at = COALESCE(started_at, now()), key_prefix = COALESCE(key_prefix, $2)
      WHERE id = $1 AND status IN ('queued', 'running') RETURNING key_prefix`,
    [exp.id, candidate],
  );
  return rows[0]?.key_prefix ?? null;
}

export function partWriterOptions(
  deps: ExportJobDeps,
  exp: ExportRow,
  spec: ExportSpec,
  ws: WorkspaceStore,
  keyPrefix: string,
  shard: number,
  kind: PartKind,
) {
  const { pool, metrics, config } = deps;
  return {
    store: ws.store,
    keyPrefix,
    format: spec.outputFormat,
    parquetColumns:
      spec.outputFormat !== 'parquet' ? null : kind === 'users' ? usersParquetColumns(spec) : REMOVED_PARQUET_COLUMNS,
    level: Math.min(9, Math.max(1, config.EXPORT_GZIP_LEVEL)),
    nameSecret: config.DOWNLOAD_URL_SECRET,
    layout: spec.layout,
    exportId: exp.id,
    shard,
    kind,
    onPart: async (part: UploadedPart) => {
      await pool.query(
        `INSERT INTO export_parts (export_id, kind, shard, part_index, object_key, users, bytes, sha256) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (export_id, kind, shard, part_index) DO UPDATE
           SET object_key = excluded.object_key, users = excluded.users, bytes = excluded.bytes, sha256 = excluded.sha256, created_at = now()`,
        [exp.id, part.kind, part.shard, part.partIndex, part.key, part.users, part.bytes, part.sha256],
      );
      // The status read shows the most users ever counted while running: a retried shard removes its parts first.
      await pool.query(
        `UPDATE exports SET users_progress = GREATEST(users_progress, ${liveUsersSql('$1', 'shard_count')}) WHERE id = $1`,
        [exp.id],
      );
      metrics.exportParts.inc({ destination: ws.store.kind });
      metrics.exportUsers.inc(part.users);
      metrics.exportBytes.inc(part.bytes);
    },
  } satisfies Omit<PartWriterOptions, 'rest'>;
}

/**
 * The local store writes through `<key>.<random>.partial` files that it renames into place; a worker killed during a
 * write leaves one behind, which its listing hides. Nothing writes under a finishing export's prefix any more.
 */
export async function removePartialFiles(ws: WorkspaceStore, keyPrefix: string): Promise<void> {
  if (!(ws.store instanceof LocalStore)) return;
  const dir = ws.store.pathOf(`${keyPrefix}/${MANIFEST_FILE}`).slice(0, -MANIFEST_FILE.length - 1);
  const names = await readdir(dir).catch(() => [] as string[]);
  await Promise.all(names.filter((n) => n.endsWith('.partial')).map((n) => rm(path.join(dir, n), { force: true })));
}
