import type { Config } from '../../platform/config.js';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { applyIsolating } from '../../profiles/write/apply-isolating.js';
import { lockWorkspaceProfiles } from '../../profiles/write/locks.js';
import { retryOnDeadlock, tuneBatchTransaction } from '../../profiles/write/transaction.js';
import { reasonOf, type DataError } from '../../profiles/write/data-errors.js';
import type { TrackAttributes } from '../../profiles/tracked-types.js';
import type { Logger } from '../../platform/logger.js';
import type { Metrics } from '../../platform/metrics.js';
import { deleteProfiles } from '../../profiles/commands/erase.js';
import { findCandidates, resolveOne, serviceIdsOf } from '../../profiles/lookup.js';
import type { SyncJob } from './sync-runs.js';
import { attributesItem, rejectedRow, type RowItem, type SourceRow } from './rows.js';

/**
 * Applying a batch of a sync's rows with the progress it makes, in one transaction (`commitBatch`), or split by user
 * over several at once (`commitLanes`, table sources): rows go through /users/track's validation and apply
 * (src/profiles/tracked-objects.ts), a `DELETED` row through the erasure of POST /users/delete
 * (src/profiles/commands/erase.ts), and a refused row, with why, into the run's rejects.
 */

export interface SyncDeps {
  pool: Pool;
  config: Pick<Config, 'LOCAL_STORE_DIR' | 'CDI_BATCH_ROWS' | 'CDI_BATCH_BYTES' | 'CDI_APPLY_LANES'>;
  log: Logger;
  metrics: Metrics;
  /** Where connection strings are read from (the process's environment). */
  env?: NodeJS.ProcessEnv;
}

/** A line of the rejects file, with its place in a table source's order (null for a file's rows: recorded order). */
export interface Reject {
  line: string;
  order: string | null;
}

/** What a batch did, added to its run's counts in the same transaction. */
interface BatchOutcome {
  synced: number;
  rejects: Reject[];
}

export interface Item {
  item: RowItem;
  /** The source row, for the rejects file. */
  row: SourceRow | null;
  /** Where a refused row came from, for the rejects file (a file's key and line). */
  at?: Record<string, unknown>;
  /** A table row's place in the source's order: its UPDATED_AT and hash. */
  order?: string;
}

const rejectOf = (i: Item, reason: string): Reject => ({
  line: JSON.stringify({ reason, ...(i.at ?? {}), ...(i.row ? { row: rejectedRow(i.row) } : {}) }),
  order: i.order ?? null,
});

/**
 * A row's key in the event log (the id of the subscription state change it makes): its run and its place in the
 * source, a table's order or a file's key and line, which a resumed run reads again the same.
 */
function logKeyOf(jobId: string, i: Item): string | undefined {
  if (i.order !== undefined) return `cdi:${jobId}:${i.order}`;
  if (i.at !== undefined) return `cdi:${jobId}:${String(i.at.file)}:${String(i.at.line)}`;
  return undefined;
}

/**
 * Applies a batch's rows in order inside the caller's transaction: runs of attributes objects set-based (a row
 * PostgreSQL refuses is left out and refused, the rest applied), each delete at its place among them.
 */
export async function applyItems(
  client: PoolClient,
  job: Pick<SyncJob, 'id' | 'workspaceId'>,
  items: Item[],
  metrics: Metrics,
): Promise<BatchOutcome> {
  const { workspaceId } = job;
  const outcome: BatchOutcome = { synced: 0, rejects: [] };
  // Rows named by phone: resolved to their profile's service_id first (the most recently updated one with the number).
  const phones = items.filter((i) => i.item.kind === 'phone');
  if (phones.length > 0) {
    const refs = phones.map((i) => ({
      kind: 'phone' as const,
      value: (i.item as Extract<RowItem, { kind: 'phone' }>).phone,
    }));
    const found = (await findCandidates(client, workspaceId, refs)).map((c) => c[0]?.id);
    const serviceIds = await serviceIdsOf(
      client,
      workspaceId,
      found.filter((id) => id !== undefined),
    );
    phones.forEach((p, n) => {
      const { payload, at } = p.item as Extract<RowItem, { kind: 'phone' }>;
      const id = found[n];
      p.item =
        id === undefined ? { kind: 'unmatched' } : attributesItem({ ...payload, service_id: serviceIds.get(id)! }, at);
    });
  }
  let run: Item[] = [];
  const flush = async () => {
    if (run.length === 0) return;
    const refused: { item: Item; error: DataError }[] = [];
    const applicable = run;
    await applyIsolating(
      client,
      applicable,
      (list) => [
        {
          workspaceId,
          source: 'cdi',
          objects: {
            events: [],
            purchases: [],
            attributes: list.map((i) => {
              const attributes = (i.item as { attributes: TrackAttributes }).attributes;
              const logKey = logKeyOf(job.id, i);
              if (logKey !== undefined) attributes.logKey = logKey;
              return attributes;
            }),
          },
        },
      ],
      refused,
    );
    for (const r of refused)
      outcome.rejects.push(rejectOf(r.item, `refused by the database: ${reasonOf(r.error.code)}`));
    outcome.synced += applicable.length - refused.length;
    metrics.ingestObjects.inc({ kind: 'attributes', source: 'cdi' }, applicable.length - refused.length);
    run = [];
  };
  for (const i of items) {
    if (i.item.kind === 'refused') outcome.rejects.push(rejectOf(i, i.item.reason));
    else if (i.item.kind === 'unmatched') outcome.synced++;
    else if (i.item.kind === 'attributes') run.push(i);
    else if (i.item.kind === 'delete') {
      await flush();
      const [found] = await resolveOne(client, workspaceId, [i.item.target]);
      if (typeof found === 'object') await deleteProfiles(client, workspaceId, [found.id], { erase: true });
      outcome.synced++;
    }
  }
  await flush();
  return outcome;
}

/** Adds a batch's (or a lane's) counts and rejects to its run, in the caller's transaction. */
async function recordOutcome(
  client: PoolClient,
  job: SyncJob,
  outcome: BatchOutcome,
  lastTimestamp: string | null,
): Promise<void> {
  if (outcome.rejects.length > 0) {
    await client.query(
      `INSERT INTO cdi_sync_rejects (job_id, line, source_order) SELECT $1, unnest($2::text[]), unnest($3::text[])`,
      [job.id, outcome.rejects.map((r) => r.line), outcome.rejects.map((r) => r.order)],
    );
  }
  await client.query(
    `UPDATE cdi_sync_jobs SET rows_synced = rows_synced + $2, rows_failed = rows_failed + $3,
            last_timestamp_synced = coalesce($4::timestamptz, last_timestamp_synced)
      WHERE id = $1`,
    [job.id, outcome.synced, outcome.rejects.length, lastTimestamp],
  );
}

/**
 * One transaction of items (a whole batch, or a lane's share of one): applied, `progress` recorded, the run's counts
 * and rejects added. `whole` holds the workspace's whole ingestion (a delete may touch any profile); `shared` holds it
 * alongside /users/track's partitions and the other lanes.
 */
async function commitItems(
  deps: SyncDeps,
  job: SyncJob,
  items: Item[],
  lock: 'whole' | 'shared',
  progress: (client: PoolClient) => Promise<void>,
  lastTimestamp: string | null,
): Promise<void> {
  await retryOnDeadlock(
    () =>
      withTransaction(deps.pool, async (client) => {
        await tuneBatchTransaction(client);
        await lockWorkspaceProfiles(client, [job.workspaceId], lock);
        const outcome = await applyItems(client, job, items, deps.metrics);
        await progress(client);
        await recordOutcome(client, job, outcome, lastTimestamp);
      }),
    deps.log,
  );
}

/** A batch in one transaction, holding the workspace's whole ingestion: attributes follow the API's writes. */
export async function commitBatch(
  deps: SyncDeps,
  job: SyncJob,
  items: Item[],
  progress: (client: PoolClient) => Promise<void>,
  lastTimestamp: string | null,
): Promise<void> {
  await commitItems(deps, job, items, 'whole', progress, lastTimestamp);
}

/**
 * A batch of attribute rows over several transactions at once, one per lane (a set of users, chosen by the caller),
 * each committing its rows with `progress(client, lane)` (the lane's index) and its counts. A lane holds the
 * workspace's profiles shared, as an ingestion partition does (src/profiles/write/locks.ts): lanes run
 * beside each other and beside /users/track's partitions, while a writer that takes the whole workspace (a delete, a
 * merge, an alias rename) waits for them. Attribute values carry their time, so lanes that meet on one profile keep
 * the newest value whichever commits first; both update in profile id order. Resolves once every lane has ended; the
 * first failure is thrown then (the lanes that committed stay committed: their progress says so).
 */
export async function commitLanes(
  deps: SyncDeps,
  job: SyncJob,
  lanes: Item[][],
  progress: (client: PoolClient, lane: number) => Promise<void>,
): Promise<void> {
  const ended = await Promise.allSettled(
    lanes.flatMap((items, lane) =>
      items.length === 0 ? [] : [commitItems(deps, job, items, 'shared', (client) => progress(client, lane), null)],
    ),
  );
  const failed = ended.find((e): e is PromiseRejectedResult => e.status === 'rejected');
  if (failed) throw failed.reason;
}
