import type { Pool, PoolClient } from '../../platform/db/pool.js';
import { settleAll } from '../../platform/lib/settle.js';
import { beginLoad, copyBatch, profileIdSequence } from './copy-load.js';
import { loadWorld } from './world.js';

export interface GenerateUsersOptions {
  workspaceId: string;
  count: number;
  seed: number;
  /**
   * Index of the first user (default 0). User `i` of a seed is always the same person, so a second load with
   * `startId` = the first load's count extends the population instead of colliding with it.
   */
  startId?: number;
  /** The moment every generated time is relative to (default: the start of the current UTC day). */
  now?: Date;
  /** Users per COPY statement (default 20,000); progress is reported after each. */
  batchSize?: number;
  /** Connections copying at once (default 2), each in its own transaction, all committed together. */
  lanes?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface GenerateUsersResult {
  users: number;
  aliases: number;
  ms: number;
}

const MAX_INDEX = 0xffff_ffff;

/**
 * Bulk-loads `count` synthetic profiles into a workspace with PostgreSQL COPY, every field of the export record
 * populated somewhere in the set. User `i` depends only on (seed, i, now) and the workspace's apps, canvases and
 * cards, so a seed always yields the same people. Ids are reserved from the profiles sequence first so that the
 * alias lookup rows can be copied too, batch by batch.
 *
 * Parsing jsonb makes PostgreSQL the slow side of a COPY, so `lanes` connections (default 2) copy batches at once,
 * each in its own transaction; all are committed only once every lane has finished, and all roll back if any
 * fails, so a failed load leaves nothing behind.
 */
export async function generateUsers(pool: Pool, options: GenerateUsersOptions): Promise<GenerateUsersResult> {
  const started = Date.now();
  const { workspaceId, count, seed } = options;
  const startId = options.startId ?? 0;
  if (!Number.isSafeInteger(count) || count < 0) throw new RangeError('count must be a non-negative integer');
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > MAX_INDEX)
    throw new RangeError('seed must be an integer from 0 to 4294967295');
  if (!Number.isSafeInteger(startId) || startId < 0 || startId + count - 1 > MAX_INDEX)
    throw new RangeError('startId + count must stay below 2^32');
  const batchSize = options.batchSize ?? 20_000;
  const batches = Math.ceil(count / batchSize);
  const lanes = Math.max(1, Math.min(options.lanes ?? 2, batches));
  const now = options.now ?? startOfUtcDay(new Date());

  const clients: PoolClient[] = [];
  let aliases = 0;
  let done = 0;
  let nextBatch = 0;
  let failed = false;
  try {
    for (let l = 0; l < lanes; l++) clients.push(await pool.connect());
    for (const client of clients) await beginLoad(client, workspaceId);
    const world = await loadWorld(clients[0]!, workspaceId, seed, now.getTime());
    const sequence = await profileIdSequence(clients[0]!);

    const lane = async (client: PoolClient) => {
      // Batches are handed out as lanes free up; which lane copies a user never changes who the user is.
      for (let b = nextBatch++; b < batches && !failed; b = nextBatch++) {
        const first = b * batchSize;
        const n = Math.min(batchSize, count - first);
        // Not `aliases += await ...`: that would read `aliases` before the await and lose other lanes' counts.
        const copiedAliases = await copyBatch(client, world, sequence, startId + first, n);
        aliases += copiedAliases;
        done += n;
        options.onProgress?.(done, count);
      }
    };
    // Settle every lane before rolling back: a client must not be sent ROLLBACK while its COPY is still running.
    await settleAll(
      clients.map((c) =>
        lane(c).catch((err: unknown) => {
          failed = true;
          throw err;
        }),
      ),
    );
    // A COMMIT failing after another lane's succeeded would leave part of the load; COMMIT after a clean COPY
    // fails only if the server goes away at that moment.
    for (const client of clients) await client.query('COMMIT');
  } catch (err) {
    for (const client of clients) await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    for (const client of clients) client.release();
  }
  // Fresh statistics, so that segment counts and export shard plans see the new rows at once.
  await pool.query('ANALYZE profiles');
  await pool.query('ANALYZE profile_aliases');
  return { users: count, aliases, ms: Date.now() - started };
}

export function startOfUtcDay(d: Date): Date {
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
}
