import { readdir, rm } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { to as copyTo } from 'pg-copy-streams';
import { publicBaseUrl, type Config } from '../config.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { Queues } from '../queues/index.js';
import type { Redis } from '../redis.js';
import { SegmentFilterSchema } from '../segments/filter.js';
import { LocalStore } from '../storage/local-store.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../storage/stores.js';
import { downloadUrl } from './download.js';
import { CopyBinaryLines, NdjsonLines, type LineBatch } from './lines.js';
import { exportLockKeys, releaseExportLock, renewExportLock, withLeaseRenewal, type ExportLockKeys } from './locks.js';
import { buildManifest } from './manifest.js';
import { exportKeyPrefix, MANIFEST_FILE } from './names.js';
import { PART_LINES, writeParts, type PartWriterOptions, type UploadedPart } from './part-writer.js';
import { enqueueExportCallback, type ExportCallbackBody } from '../queues/export-callback.js';
import { ExportSpecSchema, type ExportSpec } from './request.js';
import { liveUsersSql } from './status.js';
import { exportLineSelect, windowStart } from './sql.js';

export interface ExportJobDeps {
  config: Config;
  pool: Pool;
  redis: Redis;
  queues: Queues;
  metrics: Metrics;
  log: Logger;
}

interface ExportRow {
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
  created_at: Date;
}

async function loadExport(pool: Pool, exportId: string): Promise<ExportRow | null> {
  const { rows } = await pool.query<ExportRow>(
    `SELECT e.id, e.object_prefix, e.company_id, e.workspace_id, e.segment_id, s.api_id AS segment_api_id, s.filter, e.status, e.request,
            e.destination, e.key_prefix, COALESCE(e.shard_count, 1) AS shard_count, e.local_shared_root, e.shard_buckets,
            e.public_base_url, e.created_at
       FROM exports e JOIN segments s ON s.id = e.segment_id
      WHERE e.id = $1`,
    [exportId],
  );
  return rows[0] ?? null;
}

const lockKeys = (config: Config, exp: ExportRow): ExportLockKeys => exportLockKeys(config.REDIS_PREFIX, exp.segment_id, exp.company_id);

async function openStore(deps: ExportJobDeps, exp: ExportRow): Promise<WorkspaceStore> {
  const { destination, namespace } = await workspaceStorage(deps.pool, exp.workspace_id);
  const kind = destination?.provider ?? 'local';
  if (kind !== exp.destination) throw new Error(`the workspace's export destination changed from ${exp.destination} to ${kind} after the export was requested`);
  return storeFor(deps.config, destination, namespace, { sharedRoot: exp.local_shared_root });
}

/**
 * Moves the export to running and fixes its key prefix, once, whichever job gets there first. The date in the key is
 * the day the export started running (the spec names the day of the callback, which no upload can know in advance).
 */
async function markRunning(pool: Pool, exp: ExportRow, ws: WorkspaceStore): Promise<string | null> {
  const candidate = exportKeyPrefix(ws.prefix, exp.segment_api_id, new Date(), exp.object_prefix);
  const { rows } = await pool.query<{ key_prefix: string }>(
    `UPDATE exports SET status = 'running', started_at = COALESCE(started_at, now()), key_prefix = COALESCE(key_prefix, $2)
      WHERE id = $1 AND status IN ('queued', 'running') RETURNING key_prefix`,
    [exp.id, candidate],
  );
  return rows[0]?.key_prefix ?? null;
}

function partWriterOptions(deps: ExportJobDeps, exp: ExportRow, spec: ExportSpec, ws: WorkspaceStore, keyPrefix: string, shard: number) {
  const { pool, metrics, config } = deps;
  return {
    store: ws.store,
    keyPrefix,
    format: spec.outputFormat,
    level: Math.min(9, Math.max(1, config.EXPORT_GZIP_LEVEL)),
    nameSecret: config.DOWNLOAD_URL_SECRET,
    exportId: exp.id,
    shard,
    onPart: async (part: UploadedPart) => {
      await pool.query(
        `INSERT INTO export_parts (export_id, shard, part_index, object_key, users, bytes, sha256) VALUES ($1, $2, $3, $4, $5, $6, $7)
         ON CONFLICT (export_id, shard, part_index) DO UPDATE
           SET object_key = excluded.object_key, users = excluded.users, bytes = excluded.bytes, sha256 = excluded.sha256, created_at = now()`,
        [exp.id, part.shard, part.partIndex, part.key, part.users, part.bytes, part.sha256],
      );
      // The status read shows the most users ever counted while running: a retried shard removes its parts first.
      await pool.query(`UPDATE exports SET users_progress = GREATEST(users_progress, ${liveUsersSql('$1', 'shard_count')}) WHERE id = $1`, [exp.id]);
      metrics.exportParts.inc({ destination: ws.store.kind });
      metrics.exportUsers.inc(part.users);
      metrics.exportBytes.inc(part.bytes);
    },
  } satisfies Omit<PartWriterOptions, 'rest'>;
}

/** Removes what an earlier attempt of this shard stored: a retry starts clean, so no user is exported twice. */
async function clearShard(pool: Pool, ws: WorkspaceStore, exportId: string, shard: number): Promise<void> {
  const { rows } = await pool.query<{ object_key: string }>(`SELECT object_key FROM export_parts WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
  if (rows.length > 0) await ws.store.delete(rows.map((r) => r.object_key));
  await pool.query(`DELETE FROM export_parts WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
  await pool.query(`DELETE FROM export_tails WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
  await pool.query(`DELETE FROM export_shards_done WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
}

/** A session advisory lock on a client, released with it: one runner per shard, and one finisher per export. */
const advisoryLock = (client: PoolClient, what: string) => client.query('SELECT pg_advisory_lock(hashtextextended($1, 0))', [what]);
const advisoryUnlock = (client: PoolClient, what: string) => client.query('SELECT pg_advisory_unlock(hashtextextended($1, 0))', [what]);

export interface ShardWork {
  exportId: string;
  shard: number;
  bucketFrom: number;
  bucketTo: number;
}

/**
 * Exports one random_bucket range: PostgreSQL streams finished NDJSON lines by binary COPY, full parts go to the
 * store as they fill, and the last short run of lines is kept as the shard's tail for the finishing job.
 */
export async function runShard(deps: ExportJobDeps, work: ShardWork): Promise<{ users: number; parts: number }> {
  const { pool, redis, config, log } = deps;
  const exp = await loadExport(pool, work.exportId);
  if (!exp || exp.status === 'ready' || exp.status === 'failed') {
    log.info({ exportId: work.exportId, shard: work.shard, status: exp?.status ?? 'missing' }, 'export shard skipped');
    return { users: 0, parts: 0 };
  }
  const spec = ExportSpecSchema.parse(exp.request);
  const filter = SegmentFilterSchema.parse(exp.filter);
  const ws = await openStore(deps, exp);
  const keys = lockKeys(config, exp);
  const shardLock = `ces-export-shard:${exp.id}:${work.shard}`;
  // The shard's COPY runs on this client, which first takes the shard's lock: a shard job queued again while an
  // earlier runner still works (Redis lost the job that runner holds) waits for it here, then finds the shard ended.
  // A runner that dies lets go of the lock with its connection.
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await advisoryLock(client, shardLock);
    const ended = await pool.query('SELECT 1 FROM export_shards_done WHERE export_id = $1 AND shard = $2', [exp.id, work.shard]);
    if (ended.rowCount) {
      log.info({ exportId: exp.id, shard: work.shard }, 'export shard already ended');
      return { users: 0, parts: 0 };
    }
    const keyPrefix = await markRunning(pool, exp, ws);
    if (!keyPrefix) return { users: 0, parts: 0 };
    const result = await withLeaseRenewal(
      redis,
      keys,
      exp.id,
      config.EXPORT_LOCK_LEASE_MS,
      (err) => log.warn({ err, exportId: exp.id }, 'export lock renewal failed'),
      async () => {
        await clearShard(pool, ws, exp.id, work.shard);
        const sql = exportLineSelect({
          workspaceId: exp.workspace_id,
          filter,
          spec,
          bucketFrom: work.bucketFrom,
          bucketTo: work.bucketTo,
          since: windowStart(exp.created_at),
        });
        const copy = client.query(copyTo(`COPY (${sql}) TO STDOUT (FORMAT binary)`));
        let out: Awaited<ReturnType<typeof writeParts>> | undefined;
        await pipeline(copy, new CopyBinaryLines(PART_LINES), async (batches: AsyncIterable<LineBatch>) => {
          out = await writeParts(batches, { ...partWriterOptions(deps, exp, spec, ws, keyPrefix, work.shard), rest: 'tail' });
        });
        return out!;
      },
    );
    await withTransaction(pool, async (tx) => {
      if (result.tail) {
        await tx.query(
          `INSERT INTO export_tails (export_id, shard, users, data) VALUES ($1, $2, $3, $4)
           ON CONFLICT (export_id, shard) DO UPDATE SET users = excluded.users, data = excluded.data, created_at = now()`,
          [exp.id, work.shard, result.tail.users, result.tail.data],
        );
      }
      await tx.query(
        `INSERT INTO export_shards_done (export_id, shard, users) VALUES ($1, $2, $3)
         ON CONFLICT (export_id, shard) DO UPDATE SET users = excluded.users, done_at = now()`,
        [exp.id, work.shard, result.users],
      );
    });
    // The finishing job (or a sibling shard) may wait in the queue a while: back to the queued lease.
    await renewExportLock(redis, keys, exp.id, config.EXPORT_QUEUED_LEASE_MS);
    log.info({ exportId: exp.id, shard: work.shard, users: result.users, parts: result.parts }, 'export shard done');
    return { users: result.users, parts: result.parts };
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    // A failed runner's connection is closed, not returned (it may be in the middle of a COPY): its lock goes with it.
    if (!broken) await advisoryUnlock(client, shardLock).catch((err: unknown) => (broken = err as Error));
    client.release(broken);
    ws.close();
  }
}

/**
 * The local store writes through `<key>.<random>.partial` files that it renames into place; a worker killed during a
 * write leaves one behind, which its listing hides. Nothing writes under a finishing export's prefix any more.
 */
async function removePartialFiles(ws: WorkspaceStore, keyPrefix: string): Promise<void> {
  if (!(ws.store instanceof LocalStore)) return;
  const dir = ws.store.pathOf(`${keyPrefix}/${MANIFEST_FILE}`).slice(0, -MANIFEST_FILE.length - 1);
  const names = await readdir(dir).catch(() => [] as string[]);
  await Promise.all(names.filter((n) => n.endsWith('.partial')).map((n) => rm(path.join(dir, n), { force: true })));
}

async function* tailBytes(pool: Pool, exportId: string): AsyncGenerator<Buffer> {
  const { rows } = await pool.query<{ shard: number }>(`SELECT shard FROM export_tails WHERE export_id = $1 ORDER BY shard`, [exportId]);
  for (const { shard } of rows) {
    // One tail in memory at a time: each is under one part of compressed lines.
    const res = await pool.query<{ data: Buffer }>(`SELECT data FROM export_tails WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
    const data = res.rows[0]?.data;
    if (!data) continue;
    yield* Readable.from([data]).pipe(createGunzip()) as AsyncIterable<Buffer>;
    // Tails never end mid-line, but keep each one's last line separate from the next tail's first.
    yield Buffer.from('\n');
  }
}

/**
 * Completes an export once its shards are done: cuts the shards' tails into full parts and at most one short last
 * part, removes anything a killed attempt left under the prefix, writes manifest.json, marks the export ready, then
 * calls back and releases the locks. Safe to run again after a crash at any point.
 */
export async function finishExport(deps: ExportJobDeps, exportId: string, shardFailures: string[]): Promise<void> {
  // One finisher at a time: a finishing job queued again by the reconciler must not run beside one still working.
  const client = await deps.pool.connect();
  let broken: Error | undefined;
  try {
    await advisoryLock(client, `ces-export-finish:${exportId}`);
    await finishLocked(deps, exportId, shardFailures);
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    if (!broken) await advisoryUnlock(client, `ces-export-finish:${exportId}`).catch((err: unknown) => (broken = err as Error));
    client.release(broken);
  }
}

/** Some shards of the export have not ended: its shard jobs were lost with Redis, and the reconciler queues them again. */
export class ShardsNotEndedError extends Error {
  constructor(exportId: string, missing: number, total: number) {
    super(`${missing} of the ${total} shards of export ${exportId} have not ended`);
    this.name = 'ShardsNotEndedError';
  }
}

async function finishLocked(deps: ExportJobDeps, exportId: string, shardFailures: string[]): Promise<void> {
  const { pool, redis, config, log } = deps;
  const exp = await loadExport(pool, exportId);
  if (!exp) return;
  if (exp.status === 'failed') return releaseExportLock(redis, lockKeys(config, exp), exp.id);
  if (exp.status === 'ready') return afterReady(deps, exp);
  if (shardFailures.length > 0) {
    return failExport(deps, exportId, `the export failed while reading or uploading users: ${shardFailures[0]!.slice(0, 300)}`);
  }
  // Exports recorded before shard ends were kept (shard_buckets null) cannot be checked, and finish as before.
  if (exp.shard_buckets !== null) {
    const ended = await pool.query<{ n: number }>('SELECT count(*)::int AS n FROM export_shards_done WHERE export_id = $1', [exp.id]);
    if (ended.rows[0]!.n < exp.shard_count) throw new ShardsNotEndedError(exp.id, exp.shard_count - ended.rows[0]!.n, exp.shard_count);
  }
  const spec = ExportSpecSchema.parse(exp.request);
  const ws = await openStore(deps, exp);
  try {
    const keyPrefix = await markRunning(pool, exp, ws);
    if (!keyPrefix) return;
    const mergeShard = exp.shard_count;
    const { users, parts } = await withLeaseRenewal(
      redis,
      lockKeys(config, exp),
      exp.id,
      config.EXPORT_LOCK_LEASE_MS,
      (err) => log.warn({ err, exportId }, 'export lock renewal failed'),
      async () => {
        await pool.query(`DELETE FROM export_tails WHERE export_id = $1 AND shard >= $2`, [exp.id, mergeShard]);
        const earlier = await pool.query<{ object_key: string }>(`SELECT object_key FROM export_parts WHERE export_id = $1 AND shard = $2`, [exp.id, mergeShard]);
        if (earlier.rows.length > 0) await ws.store.delete(earlier.rows.map((r) => r.object_key));
        await pool.query(`DELETE FROM export_parts WHERE export_id = $1 AND shard = $2`, [exp.id, mergeShard]);

        await pipeline(Readable.from(tailBytes(pool, exp.id)), new NdjsonLines(PART_LINES), async (batches: AsyncIterable<LineBatch>) => {
          await writeParts(batches, { ...partWriterOptions(deps, exp, spec, ws, keyPrefix, mergeShard), rest: 'upload' });
        });

        const { rows } = await pool.query<{ object_key: string; users: number; bytes: number; sha256: string }>(
          `SELECT object_key, users, bytes, sha256 FROM export_parts WHERE export_id = $1 ORDER BY shard, part_index`,
          [exp.id],
        );
        const manifestKey = `${keyPrefix}/${MANIFEST_FILE}`;
        const known = new Set(rows.map((r) => r.object_key));
        const strays = (await ws.store.list(`${keyPrefix}/`)).filter((o) => !known.has(o.key) && o.key !== manifestKey).map((o) => o.key);
        if (strays.length > 0) {
          log.info({ exportId, strays: strays.length }, 'removing files left by interrupted attempts');
          await ws.store.delete(strays);
        }
        await removePartialFiles(ws, keyPrefix);
        const total = rows.reduce((n, r) => n + r.users, 0);
        const manifest = buildManifest({
          objectPrefix: exp.object_prefix,
          segmentId: exp.segment_api_id,
          spec,
          createdAt: exp.created_at,
          finishedAt: new Date(),
          keyPrefix,
          parts: rows.map((r) => ({ key: r.object_key, users: r.users, bytes: r.bytes, sha256: r.sha256 })),
        });
        await ws.store.put(manifestKey, Buffer.from(JSON.stringify(manifest, null, 2)), { contentType: 'application/json' });
        return { users: total, parts: rows.length };
      },
    );
    await pool.query(
      `UPDATE exports SET status = 'ready', finished_at = now(), users_done = $2, parts_done = $3,
              url_expires_at = CASE WHEN destination = 'local' THEN now() + make_interval(secs => $4) END
        WHERE id = $1 AND status = 'running'`,
      [exp.id, users, parts, config.DOWNLOAD_URL_TTL_SECONDS],
    );
    await pool.query(`DELETE FROM export_tails WHERE export_id = $1`, [exp.id]);
    log.info({ exportId, segmentId: exp.segment_api_id, users, parts }, 'export ready');
    await afterReady(deps, exp);
  } finally {
    ws.close();
  }
}

function callbackEndpoint(exp: ExportRow): string | null {
  const parsed = ExportSpecSchema.safeParse(exp.request);
  return parsed.success ? parsed.data.callbackEndpoint : null;
}

/** The callback of a finished export: what it says, and where it goes (null when the request named no endpoint). */
export function exportCallback(
  config: Config,
  exp: { id: string; object_prefix: string; destination: string; request: unknown; status: string; error: string | null; public_base_url: string | null },
): { endpoint: string; body: ExportCallbackBody } | null {
  const parsed = ExportSpecSchema.safeParse(exp.request);
  const endpoint = parsed.success ? parsed.data.callbackEndpoint : null;
  if (!endpoint) return null;
  if (exp.status === 'failed') return { endpoint, body: { success: false, error: exp.error ?? 'the export failed' } };
  // The address of the API that accepted the export: a worker process has no API port of its own to go by.
  const base = exp.public_base_url ?? publicBaseUrl(config);
  return { endpoint, body: exp.destination === 'local' ? { success: true, url: downloadUrl(config, base, exp.object_prefix) } : { success: true } };
}

/** Queues an export's callback (once: its job id is fixed), recorded as pending until delivered or given up. */
async function enqueueCallback(deps: ExportJobDeps, exp: ExportRow, body: ExportCallbackBody): Promise<void> {
  const endpoint = callbackEndpoint(exp);
  if (!endpoint) return;
  await deps.pool.query(`UPDATE exports SET callback_state = 'pending' WHERE id = $1 AND callback_state IS NULL`, [exp.id]);
  await enqueueExportCallback(deps.queues, deps.config.CALLBACK_MAX_ATTEMPTS, exp.id, { endpoint, body });
}

async function afterReady(deps: ExportJobDeps, exp: ExportRow): Promise<void> {
  const url = exp.destination === 'local' ? downloadUrl(deps.config, exp.public_base_url ?? publicBaseUrl(deps.config), exp.object_prefix) : undefined;
  await enqueueCallback(deps, exp, url ? { success: true, url } : { success: true });
  await releaseExportLock(deps.redis, lockKeys(deps.config, exp), exp.id);
}

/**
 * Ends an export as failed: removes the files it wrote (no manifest means loaders never trusted them), calls back
 * with the reason and releases the locks. Does nothing to an export already ready or failed.
 */
export async function failExport(deps: ExportJobDeps, exportId: string, reason: string): Promise<void> {
  const { pool, redis, config, log } = deps;
  const exp = await loadExport(pool, exportId);
  if (!exp) return;
  const { rowCount } = await pool.query(`UPDATE exports SET status = 'failed', error = $2, finished_at = now() WHERE id = $1 AND status IN ('queued', 'running')`, [
    exportId,
    reason,
  ]);
  if (rowCount === 0) return;
  log.warn({ exportId, segmentId: exp.segment_api_id, reason }, 'export failed');
  try {
    const ws = await openStore(deps, exp);
    try {
      const keys = (await pool.query<{ object_key: string }>(`SELECT object_key FROM export_parts WHERE export_id = $1`, [exportId])).rows.map((r) => r.object_key);
      if (exp.key_prefix) for (const o of await ws.store.list(`${exp.key_prefix}/`)) if (!keys.includes(o.key)) keys.push(o.key);
      if (keys.length > 0) await ws.store.delete(keys);
      if (exp.key_prefix) await removePartialFiles(ws, exp.key_prefix);
    } finally {
      ws.close();
    }
  } catch (err) {
    log.warn({ err, exportId }, 'could not remove the files of a failed export');
  }
  await pool.query(`DELETE FROM export_parts WHERE export_id = $1`, [exportId]);
  await pool.query(`DELETE FROM export_tails WHERE export_id = $1`, [exportId]);
  await enqueueCallback(deps, exp, { success: false, error: reason });
  await releaseExportLock(redis, lockKeys(config, exp), exportId);
}
