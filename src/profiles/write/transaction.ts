import type { PoolClient } from '../../platform/db/pool.js';
import type { Logger } from '../../platform/logger.js';

/**
 * The transactions that apply batches of profile changes (their locks are ./locks.ts): retries of a deadlock, and the
 * session settings of a batch.
 */

/**
 * Runs a batch transaction again when PostgreSQL broke a deadlock by aborting it. Batches of different partitions
 * can lock the same profile only when one user is named by two identifier types, in an order of their own; the
 * aborted transaction rolled back whole (its staged rows or import position included), so running it again applies
 * it exactly once.
 */
export async function retryOnDeadlock<T>(run: () => Promise<T>, log: Logger, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || attempt >= attempts) throw err;
      log.warn({ err, attempt }, 'ingestion batch chosen as a deadlock victim; applying it again');
    }
  }
}

/** The wal_compression value this role may set for its batches (null: none), found once per process. */
let batchWalCompression: Promise<string | null> | undefined;

async function walCompressionFor(client: PoolClient): Promise<string | null> {
  // has_parameter_privilege (PostgreSQL 15) tells whether this role may SET the superuser-only parameter: a
  // superuser, or a role granted `SET ON PARAMETER wal_compression`. Asked so that a refusal never aborts a batch.
  const version = await client.query<{ v: number }>(`SELECT current_setting('server_version_num')::int AS v`);
  if (version.rows[0]!.v < 150000) return null;
  const { rows } = await client.query<{ allowed: boolean; values: string[] | null }>(
    `SELECT has_parameter_privilege('wal_compression', 'SET') AS allowed, enumvals AS values FROM pg_settings WHERE name = 'wal_compression'`,
  );
  const r = rows[0];
  if (!r?.allowed) return null;
  return r.values?.includes('lz4') ? 'lz4' : 'on';
}

/**
 * Session settings of a transaction that applies a batch (a staging drain or an import chunk), which writes tens of
 * megabytes of WAL, mostly full-page images of the profile pages it is first to touch after a checkpoint:
 * - wal_compression, where the role may set it: compressing those images (lz4, else pglz) shrinks the WAL that
 *   every acknowledgement's commit must flush before it (acknowledgements mostly wait on that flush, IO:WALSync;
 *   what it saved is in BENCHMARKS.md);
 * - no waiting for the commit's flush: the batch's inputs (staged rows, an import's position) change in the same
 *   transaction, so a crash that loses the commit loses them with it and the batch is applied again, once.
 */
export async function tuneBatchTransaction(client: PoolClient): Promise<void> {
  // A batch's update rows (megabytes of JSON) would otherwise spill to temporary files at the default work_mem.
  await client.query(`SET LOCAL synchronous_commit = off; SET LOCAL work_mem = '128MB'`);
  batchWalCompression ??= walCompressionFor(client).catch(() => null);
  const compression = await batchWalCompression;
  if (compression) await client.query(`SET LOCAL wal_compression = ${compression}`);
}
