import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { Config } from '../../platform/config.js';
import type { Pool } from '../../platform/db/pool.js';
import type { Logger } from '../../platform/logger.js';
import type { Metrics } from '../../platform/metrics.js';
import type { Queues } from '../../platform/queues/index.js';
import { redisKeyPrefix, type Redis } from '../../platform/redis.js';
import { LocalStore } from '../../platform/storage/local-store.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../../platform/storage/stores.js';
import { exportLockKeys, type ExportLockKeys } from './holds.js';
import { exportKeyPrefix, MANIFEST_FILE, type PartKind } from './key-layout.js';
import { REMOVED_PARQUET_COLUMNS, usersParquetColumns } from './shard/parquet-schema.js';
import type { PartWriterOptions, UploadedPart } from './shard/part-writer.js';
import { ExportSpecSchema, type ExportSpec } from './request/request-body.js';
import { recordPart, setRunning, type ExportRow } from './export-rows.js';

/**
 * An export while it runs, as its jobs see it: its row (./export-rows.ts), its store, its holds, and the steps the shard jobs
 * (./shard/run-shard.ts) and the finishing job (./finish/finish-export.ts) share.
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
  return setRunning(pool, exp.id, candidate);
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
      await recordPart(pool, exp.id, part);
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
