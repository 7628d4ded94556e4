import { pipeline } from 'node:stream/promises';
import { to as copyTo } from 'pg-copy-streams';
import { withTransaction, type Pool } from '../db/pool.js';
import { SegmentFilterSchema } from '../segments/filter.js';
import type { WorkspaceStore } from '../storage/stores.js';
import { advisoryLock, advisoryUnlock, loadExport, lockKeys, markRunning, openStore, partWriterOptions, type ExportJobDeps } from './export-record.js';
import { CopyBinaryLines, type LineBatch } from './lines.js';
import { renewExportLock, withLeaseRenewal } from './locks.js';
import { PART_LINES, writeParts } from './part-writer.js';
import { ExportSpecSchema } from './request.js';
import { exportLineSelect, windowStart } from './line-query.js';
import { openReadSource } from './read-source.js';

/** Removes what an earlier attempt of this shard stored: a retry starts clean, so no user is exported twice. */
async function clearShard(pool: Pool, ws: WorkspaceStore, exportId: string, shard: number): Promise<void> {
  const { rows } = await pool.query<{ object_key: string }>(`SELECT object_key FROM export_parts WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
  if (rows.length > 0) await ws.store.delete(rows.map((r) => r.object_key));
  await pool.query(`DELETE FROM export_parts WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
  await pool.query(`DELETE FROM export_tails WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
  await pool.query(`DELETE FROM export_shards_done WHERE export_id = $1 AND shard = $2`, [exportId, shard]);
}

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
        // The lock stays on the primary's connection; the members may be read from a replica.
        const source = await openReadSource(deps, exp, client, work.shard);
        let readBroken: Error | undefined;
        try {
          const copy = source.client.query(copyTo(`COPY (${sql}) TO STDOUT (FORMAT binary)`));
          let out: Awaited<ReturnType<typeof writeParts>> | undefined;
          // The spec's parts are exactly 5,000 lines but the last: each shard leaves its short rest to the finishing job,
          // which merges them. With rows_per_part a shard uploads its own short last part (large tails in PostgreSQL
          // would cost more than a few short files).
          const lines = spec.rowsPerPart ?? PART_LINES;
          await pipeline(copy, new CopyBinaryLines(lines), async (batches: AsyncIterable<LineBatch>) => {
            out = await writeParts(batches, { ...partWriterOptions(deps, exp, spec, ws, keyPrefix, work.shard), rest: spec.rowsPerPart ? 'upload' : 'tail' });
          });
          return { ...out!, source };
        } catch (err) {
          readBroken = err as Error;
          throw err;
        } finally {
          source.release(readBroken);
        }
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
        `INSERT INTO export_shards_done (export_id, shard, users, read_from, replay_lsn, replay_at) VALUES ($1, $2, $3, $4, $5, $6)
         ON CONFLICT (export_id, shard) DO UPDATE
           SET users = excluded.users, done_at = now(), read_from = excluded.read_from, replay_lsn = excluded.replay_lsn, replay_at = excluded.replay_at`,
        [exp.id, work.shard, result.users, result.source.from, result.source.replayLsn, result.source.replayAt],
      );
    });
    // The finishing job (or a sibling shard) may wait in the queue a while: back to the queued lease.
    await renewExportLock(redis, keys, exp.id, config.EXPORT_QUEUED_LEASE_MS);
    log.info({ exportId: exp.id, shard: work.shard, users: result.users, parts: result.parts, readFrom: result.source.from }, 'export shard done');
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
