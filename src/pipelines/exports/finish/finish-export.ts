import { lockNames, lockSession, unlockSession } from '../../../platform/db/advisory-locks.js';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { publicBaseUrl, type Config } from '../../../platform/config.js';
import type { Pool } from '../../../platform/db/pool.js';
import { enqueueExportCallback, type ExportCallbackBody } from '../../../platform/queues/export-callback.js';
import { downloadUrl } from './download.js';
import {
  forgetMembers,
  loadExport,
  setCallbackPending,
  setFailed,
  setReady,
  type ExportCallbackRow,
  type ExportRow,
} from '../export-rows.js';
import {
  lockKeys,
  markRunning,
  openStore,
  partWriterOptions,
  removePartialFiles,
  type ExportJobDeps,
} from '../running-export.js';
import { NdjsonLines, type LineBatch } from '../shard/line-batches.js';
import { releaseExportLock, withLeaseRenewal } from '../holds.js';
import { buildManifest, type ManifestReadFrom } from './manifest.js';
import { exportJsonSchema } from './json-schema.js';
import { MANIFEST_FILE, SCHEMA_FILE, SUCCESS_FILE, type PartKind } from '../key-layout.js';
import { PART_LINES, writeParts } from '../shard/part-writer.js';
import { ExportSpecSchema, type ExportSpec } from '../request/request-body.js';
import type { WorkspaceStore } from '../../../platform/storage/stores.js';

async function* tailBytes(pool: Pool, exportId: string, kind: PartKind): AsyncGenerator<Buffer> {
  const { rows } = await pool.query<{ shard: number }>(
    `SELECT shard FROM export_tails WHERE export_id = $1 AND kind = $2 ORDER BY shard`,
    [exportId, kind],
  );
  for (const { shard } of rows) {
    // One tail in memory at a time: each is under one part of compressed lines.
    const res = await pool.query<{ data: Buffer }>(
      `SELECT data FROM export_tails WHERE export_id = $1 AND kind = $2 AND shard = $3`,
      [exportId, kind, shard],
    );
    const data = res.rows[0]?.data;
    if (!data) continue;
    yield* Readable.from([data]).pipe(createGunzip()) as AsyncIterable<Buffer>;
    // Tails never end mid-line, but keep each one's last line separate from the next tail's first.
    yield Buffer.from('\n');
  }
}

/**
 * Completes an export once its shards are done: cuts the shards' tails into full parts and at most one short last
 * part, removes anything a killed attempt left under the prefix, writes schema.json, manifest.json and, last,
 * _SUCCESS, marks the export ready, then calls back and releases the locks. Safe to run again after a crash at any
 * point: once _SUCCESS is in the store, a rerun writes nothing more and only marks the export ready.
 */
export async function finishExport(deps: ExportJobDeps, exportId: string, shardFailures: string[]): Promise<void> {
  // One finisher at a time: a finishing job queued again by the reconciler must not run beside one still working.
  const client = await deps.pool.connect();
  let broken: Error | undefined;
  try {
    await lockSession(client, lockNames.exportFinish(exportId));
    await finishLocked(deps, exportId, shardFailures);
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    if (!broken)
      await unlockSession(client, lockNames.exportFinish(exportId)).catch((err: unknown) => (broken = err as Error));
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

/** Where the shards read their members, for the manifest: the oldest replica state is what the export reflects. */
async function readSourceSummary(pool: Pool, exp: ExportRow): Promise<ManifestReadFrom> {
  const { rows } = await pool.query<{
    replicas: number;
    primaries: number;
    replay_lsn: string | null;
    replay_at: Date | null;
  }>(
    `SELECT count(*) FILTER (WHERE read_from = 'replica')::int AS replicas, count(*) FILTER (WHERE read_from = 'primary')::int AS primaries,
            min(replay_lsn)::text AS replay_lsn, min(replay_at) AS replay_at
       FROM export_shards_done WHERE export_id = $1`,
    [exp.id],
  );
  const r = rows[0]!;
  const source = r.replicas === 0 ? 'primary' : r.primaries === 0 ? 'replica' : 'mixed';
  return {
    source,
    ...(exp.primary_lsn ? { primary_lsn_at_request: exp.primary_lsn } : {}),
    ...(r.replay_lsn ? { replica_replay_lsn: r.replay_lsn } : {}),
    ...(r.replay_at ? { replica_replay_time: r.replay_at.toISOString() } : {}),
  };
}

/** Exports recorded before shard ends were kept (shard_buckets null) cannot be checked, and finish as before. */
async function assertShardsEnded(pool: Pool, exp: ExportRow): Promise<void> {
  if (exp.shard_buckets === null) return;
  const ended = await pool.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM export_shards_done WHERE export_id = $1',
    [exp.id],
  );
  if (ended.rows[0]!.n < exp.shard_count)
    throw new ShardsNotEndedError(exp.id, exp.shard_count - ended.rows[0]!.n, exp.shard_count);
}

async function finishLocked(deps: ExportJobDeps, exportId: string, shardFailures: string[]): Promise<void> {
  const { pool, redis, config, log } = deps;
  const exp = await loadExport(pool, exportId);
  if (!exp) return;
  if (exp.status === 'failed') return releaseExportLock(redis, lockKeys(config, exp), exp.id);
  if (exp.status === 'ready') return afterReady(deps, exp);
  if (shardFailures.length > 0) {
    return failExport(
      deps,
      exportId,
      `the export failed while reading or uploading users: ${shardFailures[0]!.slice(0, 300)}`,
    );
  }
  await assertShardsEnded(pool, exp);
  const spec = ExportSpecSchema.parse(exp.request);
  const ws = await openStore(deps, exp);
  try {
    const keyPrefix = await markRunning(pool, exp, ws);
    if (!keyPrefix) return;
    const { users, removed, parts } = await withLeaseRenewal(
      redis,
      lockKeys(config, exp),
      exp.id,
      config.EXPORT_LOCK_LEASE_MS,
      (err) => log.warn({ err, exportId }, 'export lock renewal failed'),
      () => completeInStore({ deps, exp, spec, ws, keyPrefix }),
    );
    await markReady(pool, config, exp, { users, removed, parts });
    log.info({ exportId, segmentId: exp.segment_api_id, users, removed, parts }, 'export ready');
    await afterReady(deps, exp);
  } finally {
    ws.close();
  }
}

/** An export being finished, with the store and key prefix it is written under. */
interface Finishing {
  deps: ExportJobDeps;
  exp: ExportRow;
  spec: ExportSpec;
  ws: WorkspaceStore;
  keyPrefix: string;
}

/** What a finished export adds up to. */
interface ExportCounts {
  users: number;
  removed: number;
  parts: number;
}

/** A part of the export, as recorded in export_parts. */
interface PartRow {
  kind: PartKind;
  object_key: string;
  users: number;
  bytes: number;
  sha256: string;
}

/**
 * Writes the merge shard's parts (the shards' tails), removes what earlier attempts left, then writes schema.json,
 * manifest.json and, last, _SUCCESS. The merge shard is numbered after the last shard.
 */
async function completeInStore(f: Finishing): Promise<ExportCounts> {
  const { pool } = f.deps;
  const successKey = `${f.keyPrefix}/${SUCCESS_FILE}`;
  // An attempt killed after writing _SUCCESS left a complete export: a loader may be reading it already, so
  // nothing is rewritten (the merge shard's parts below would be).
  if ((await f.ws.store.head(successKey)) !== null) return completedCounts(pool, f.exp.id);
  await clearMergeShard(f);
  for (const kind of ['users', 'removed'] as const) await writeMergeParts(f, kind);
  const { rows } = await pool.query<PartRow>(
    `SELECT kind, object_key, users, bytes, sha256 FROM export_parts WHERE export_id = $1 ORDER BY kind DESC, shard, part_index`,
    [f.exp.id],
  );
  await removeStrays(f, rows);
  await removePartialFiles(f.ws, f.keyPrefix);
  const total = rows.reduce((n, r) => n + (r.kind === 'users' ? r.users : 0), 0);
  const removed = rows.reduce((n, r) => n + (r.kind === 'removed' ? r.users : 0), 0);
  await writeSchemaAndManifest(f, rows);
  // Last: a loader that waits for _SUCCESS finds every part the manifest names, and nothing comes after it.
  const success = {
    export_id: f.exp.id,
    object_prefix: f.exp.object_prefix,
    users: total,
    removed,
    parts: rows.length,
    manifest: MANIFEST_FILE,
  };
  await f.ws.store.put(successKey, Buffer.from(`${JSON.stringify(success)}\n`), { contentType: 'application/json' });
  return { users: total, removed, parts: rows.length };
}

/** Takes back what an earlier finishing attempt wrote of the merge shard: its tails, its parts' files and rows. */
async function clearMergeShard({ deps: { pool }, exp, ws }: Finishing): Promise<void> {
  const mergeShard = exp.shard_count;
  await pool.query(`DELETE FROM export_tails WHERE export_id = $1 AND shard >= $2`, [exp.id, mergeShard]);
  const earlier = await pool.query<{ object_key: string }>(
    `SELECT object_key FROM export_parts WHERE export_id = $1 AND shard = $2`,
    [exp.id, mergeShard],
  );
  if (earlier.rows.length > 0) await ws.store.delete(earlier.rows.map((r) => r.object_key));
  await pool.query(`DELETE FROM export_parts WHERE export_id = $1 AND shard = $2`, [exp.id, mergeShard]);
}

/** Cuts the shards' tails of one kind into full parts and at most one short last part, uploaded as the merge shard. */
async function writeMergeParts(f: Finishing, kind: PartKind): Promise<void> {
  const { deps, exp, spec, ws, keyPrefix } = f;
  await pipeline(
    Readable.from(tailBytes(deps.pool, exp.id, kind)),
    new NdjsonLines(PART_LINES),
    async (batches: AsyncIterable<LineBatch>) => {
      await writeParts(batches, {
        ...partWriterOptions(deps, exp, spec, ws, keyPrefix, exp.shard_count, kind),
        rest: 'upload',
      });
    },
  );
}

/** Removes the files under the prefix that no part, nor the manifest or schema, names: left by interrupted attempts. */
async function removeStrays({ deps, exp, ws, keyPrefix }: Finishing, parts: PartRow[]): Promise<void> {
  const known = new Set([
    ...parts.map((r) => r.object_key),
    `${keyPrefix}/${MANIFEST_FILE}`,
    `${keyPrefix}/${SCHEMA_FILE}`,
  ]);
  const strays = (await ws.store.list(`${keyPrefix}/`)).filter((o) => !known.has(o.key)).map((o) => o.key);
  if (strays.length > 0) {
    deps.log.info({ exportId: exp.id, strays: strays.length }, 'removing files left by interrupted attempts');
    await ws.store.delete(strays);
  }
}

/** Writes schema.json, then manifest.json naming every part. */
async function writeSchemaAndManifest({ deps, exp, spec, ws, keyPrefix }: Finishing, parts: PartRow[]): Promise<void> {
  const readFrom = await readSourceSummary(deps.pool, exp);
  const manifest = buildManifest({
    readFrom,
    objectPrefix: exp.object_prefix,
    segmentId: exp.segment_api_id,
    spec,
    createdAt: exp.created_at,
    finishedAt: new Date(),
    keyPrefix,
    parts: parts.map((r) => ({ kind: r.kind, key: r.object_key, users: r.users, bytes: r.bytes, sha256: r.sha256 })),
  });
  await ws.store.put(`${keyPrefix}/${SCHEMA_FILE}`, Buffer.from(exportJsonSchema(spec)), {
    contentType: 'application/schema+json',
  });
  await ws.store.put(`${keyPrefix}/${MANIFEST_FILE}`, Buffer.from(JSON.stringify(manifest, null, 2)), {
    contentType: 'application/json',
  });
}

/** Marks the export ready with its counts (a download link's expiry for the built-in store) and drops its tails. */
async function markReady(
  pool: Pool,
  config: Config,
  exp: ExportRow,
  { users, removed, parts }: ExportCounts,
): Promise<void> {
  await setReady(pool, exp.id, { users, removed, parts }, config.DOWNLOAD_URL_TTL_SECONDS);
  await pool.query(`DELETE FROM export_tails WHERE export_id = $1`, [exp.id]);
}

async function hasSuccessMarker(deps: ExportJobDeps, exp: ExportRow): Promise<boolean> {
  try {
    const ws = await openStore(deps, exp);
    try {
      return (await ws.store.head(`${exp.key_prefix}/${SUCCESS_FILE}`)) !== null;
    } finally {
      ws.close();
    }
  } catch {
    // The store cannot be asked: fail as before (nothing says the export completed).
    return false;
  }
}

/** What the parts of a completed export add up to, from their rows (the store is not touched). */
async function completedCounts(
  pool: Pool,
  exportId: string,
): Promise<{ users: number; removed: number; parts: number }> {
  const { rows } = await pool.query<{ users: number; removed: number; parts: number }>(
    `SELECT coalesce(sum(users) FILTER (WHERE kind = 'users'), 0)::int AS users, coalesce(sum(users) FILTER (WHERE kind = 'removed'), 0)::int AS removed,
            count(*)::int AS parts
       FROM export_parts WHERE export_id = $1`,
    [exportId],
  );
  return rows[0]!;
}

function callbackEndpoint(exp: ExportRow): string | null {
  const parsed = ExportSpecSchema.safeParse(exp.request);
  return parsed.success ? parsed.data.callbackEndpoint : null;
}

/** The callback of a finished export: what it says, and where it goes (null when the request named no endpoint). */
export function exportCallback(
  config: Config,
  exp: ExportCallbackRow,
): { endpoint: string; body: ExportCallbackBody } | null {
  const parsed = ExportSpecSchema.safeParse(exp.request);
  const endpoint = parsed.success ? parsed.data.callbackEndpoint : null;
  if (!endpoint) return null;
  if (exp.status === 'failed') return { endpoint, body: { success: false, error: exp.error ?? 'the export failed' } };
  // The address of the API that accepted the export: a worker process has no API port of its own to go by.
  const base = exp.public_base_url ?? publicBaseUrl(config);
  return {
    endpoint,
    body:
      exp.destination === 'local'
        ? { success: true, url: downloadUrl(config, base, exp.object_prefix) }
        : { success: true },
  };
}

/** Queues an export's callback (once: its job id is fixed), recorded as pending until delivered or given up. */
async function enqueueCallback(deps: ExportJobDeps, exp: ExportRow, body: ExportCallbackBody): Promise<void> {
  const endpoint = callbackEndpoint(exp);
  if (!endpoint) return;
  await setCallbackPending(deps.pool, exp.id);
  await enqueueExportCallback(deps.queues, deps.config.CALLBACK_MAX_ATTEMPTS, exp.id, { endpoint, body });
}

async function afterReady(deps: ExportJobDeps, exp: ExportRow): Promise<void> {
  const url =
    exp.destination === 'local'
      ? downloadUrl(deps.config, exp.public_base_url ?? publicBaseUrl(deps.config), exp.object_prefix)
      : undefined;
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
  if (exp.key_prefix && (exp.status === 'queued' || exp.status === 'running') && (await hasSuccessMarker(deps, exp))) {
    // Complete in the store (a finisher wrote _SUCCESS, then could not mark it ready): a loader may be reading it,
    // so it is not taken back; the next finishing run (the reconciler queues it) marks it ready.
    log.warn({ exportId, reason }, 'not failing an export whose _SUCCESS is written');
    return;
  }
  if (!(await setFailed(pool, exportId, reason))) return;
  log.warn({ exportId, segmentId: exp.segment_api_id, reason }, 'export failed');
  try {
    const ws = await openStore(deps, exp);
    try {
      const keys = (
        await pool.query<{ object_key: string }>(`SELECT object_key FROM export_parts WHERE export_id = $1`, [exportId])
      ).rows.map((r) => r.object_key);
      if (exp.key_prefix)
        for (const o of await ws.store.list(`${exp.key_prefix}/`)) if (!keys.includes(o.key)) keys.push(o.key);
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
  // A failed export is never a base: its member list goes now.
  await forgetMembers(pool, exportId);
  await enqueueCallback(deps, exp, { success: false, error: reason });
  await releaseExportLock(redis, lockKeys(config, exp), exportId);
}
