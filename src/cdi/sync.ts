import { Readable } from 'node:stream';
import type { Config } from '../config.js';
import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { lockWorkspaces, retryOnDeadlock, tuneBatchTransaction } from '../ingest/apply/apply-transaction.js';
import { applyIsolating } from '../ingest/apply/apply-isolating.js';
import { reasonOf, type DataError } from '../ingest/apply/dead-letters.js';
import type { TrackAttributes } from '../ingest/types.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { deleteProfiles } from '../profiles/erase.js';
import { findCandidates, resolveOne, serviceIdsOf } from '../profiles/lookup.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../storage/stores.js';
import { fileRows, pendingFiles, REJECTS_SUFFIX, type FileFormat } from './file-source.js';
import { getIntegration, type CdiIntegration } from './integrations.js';
import { finishJob, readJob, type SyncJob } from './jobs.js';
import { attributesItem, rowItem, type RowItem, type SourceRow } from './rows.js';
import { SourceConfigError, TableSource, type TableRow } from './table-source.js';
import { lockNames, tryLockSession, unlockSession } from '../db/advisory-locks.js';

/**
 * Running a Cloud Data Ingestion sync (docs/cdi.md): the source's new rows, a batch at a time, each batch applied in
 * one transaction with the progress it makes (a table's watermark, a file's position) and the rows it refused, so a run
 * killed at any point resumes from its last committed batch, and no row is applied twice or skipped. Rows go through
 * /users/track's validation and apply (src/profiles/tracked-objects.ts); a `DELETED` row through the erasure of POST
 * /users/delete (src/profiles/erase.ts). A batch holds the workspace's whole ingestion lock: a row's effect is ordered
 * with the API's writes as a whole batch is.
 */

export interface SyncDeps {
  pool: Pool;
  config: Pick<Config, 'LOCAL_STORE_DIR' | 'CDI_BATCH_ROWS'>;
  log: Logger;
  metrics: Metrics;
  /** Where connection strings are read from (the process's environment). */
  env?: NodeJS.ProcessEnv;
}

/** What a batch did, added to its run's counts in the same transaction. */
interface BatchOutcome {
  synced: number;
  rejects: string[];
}

interface Item {
  item: RowItem;
  /** The source row, for the rejects file. */
  row: SourceRow | null;
  /** Where a refused row came from, for the rejects file (a file's key and line). */
  at?: Record<string, unknown>;
}

const rejectLine = (i: Item, reason: string) =>
  JSON.stringify({ reason, ...(i.at ?? {}), ...(i.row ? { row: i.row } : {}) });

/**
 * Applies a batch's rows in order inside the caller's transaction: runs of attributes objects set-based (a row
 * PostgreSQL refuses is left out and refused, the rest applied), each delete at its place among them.
 */
async function applyItems(
  client: PoolClient,
  workspaceId: string,
  items: Item[],
  metrics: Metrics,
): Promise<BatchOutcome> {
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
          objects: {
            events: [],
            purchases: [],
            attributes: list.map((i) => (i.item as { attributes: TrackAttributes }).attributes),
          },
        },
      ],
      refused,
    );
    for (const r of refused)
      outcome.rejects.push(rejectLine(r.item, `refused by the database: ${reasonOf(r.error.code)}`));
    outcome.synced += applicable.length - refused.length;
    metrics.ingestObjects.inc({ kind: 'attributes', source: 'cdi' }, applicable.length - refused.length);
    run = [];
  };
  for (const i of items) {
    if (i.item.kind === 'refused') outcome.rejects.push(rejectLine(i, i.item.reason));
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

/** A batch in one transaction: the rows applied, `progress` recorded, the run's counts and rejects added. */
async function commitBatch(
  deps: SyncDeps,
  job: SyncJob,
  items: Item[],
  progress: (client: PoolClient) => Promise<void>,
  lastTimestamp: string | null,
): Promise<void> {
  await retryOnDeadlock(
    () =>
      withTransaction(deps.pool, async (client) => {
        await tuneBatchTransaction(client);
        // The workspace's whole ingestion: a delete may touch any profile, and attributes follow the API's writes.
        await lockWorkspaces(client, [job.workspaceId]);
        const outcome = await applyItems(client, job.workspaceId, items, deps.metrics);
        if (outcome.rejects.length > 0) {
          await client.query(`INSERT INTO cdi_sync_rejects (job_id, line) SELECT $1, unnest($2::text[])`, [
            job.id,
            outcome.rejects,
          ]);
        }
        await progress(client);
        await client.query(
          `UPDATE cdi_sync_jobs SET rows_synced = rows_synced + $2, rows_failed = rows_failed + $3,
                  last_timestamp_synced = coalesce($4::timestamptz, last_timestamp_synced)
            WHERE id = $1`,
          [job.id, outcome.synced, outcome.rejects.length, lastTimestamp],
        );
      }),
    deps.log,
  );
}

/**
 * The items of an async source, mapped, one batch ahead: the next batch is read and validated while the current one
 * is applied (the apply waits on PostgreSQL, the reading and validation on this process), instead of in turn.
 */
async function* ahead<T, U>(source: AsyncIterable<T>, map: (t: T) => U): AsyncGenerator<U> {
  const it = source[Symbol.asyncIterator]();
  const pull = async () => {
    const r = await it.next();
    return r.done ? null : { value: map(r.value) };
  };
  let next = pull();
  try {
    for (;;) {
      const current = await next;
      if (current === null) return;
      next = pull();
      // A failed read ahead is seen when its turn comes, not as an unhandled rejection meanwhile.
      next.catch(() => {});
      yield current.value;
    }
  } finally {
    await it.return?.(undefined);
  }
}

/** A table source: from the watermark on, each batch moving it (and the hashes of the rows at its exact time). */
async function syncTable(
  deps: SyncDeps,
  job: SyncJob,
  integration: CdiIntegration & { source: { type: 'postgres' } },
  startedAt: string,
): Promise<void> {
  const source = await TableSource.open(integration.source.url_env, integration.source.table, deps.env);
  try {
    const state = await deps.pool.query<{ watermark: string | null; hashes: string[] }>(
      `SELECT to_char(i.watermark AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS watermark,
              coalesce((SELECT array_agg(row_hash) FROM cdi_watermark_rows w WHERE w.integration_id = i.id), '{}') AS hashes
         FROM cdi_integrations i WHERE i.id = $1`,
      [integration.id],
    );
    let watermark = state.rows[0]!.watermark;
    const synced = new Set(state.rows[0]!.hashes);
    const batches = ahead(source.batches(watermark, synced, deps.config.CDI_BATCH_ROWS), (batch: TableRow[]) => ({
      batch,
      items: batch.map((r): Item => ({ item: rowItem(r.row, startedAt), row: r.row })),
    }));
    for await (const { batch, items } of batches) {
      const last = batch[batch.length - 1]!.ts;
      const atLast = batch.filter((r: TableRow) => r.ts === last).map((r) => r.hash);
      const moved = last !== watermark;
      await commitBatch(
        deps,
        job,
        items,
        async (client) => {
          await client.query(`UPDATE cdi_integrations SET watermark = $2::timestamptz WHERE id = $1`, [
            integration.id,
            last,
          ]);
          if (moved) await client.query(`DELETE FROM cdi_watermark_rows WHERE integration_id = $1`, [integration.id]);
          await client.query(
            `INSERT INTO cdi_watermark_rows (integration_id, row_hash) SELECT $1, unnest($2::text[]) ON CONFLICT DO NOTHING`,
            [integration.id, atLast],
          );
        },
        last,
      );
      if (moved) synced.clear();
      for (const h of atLast) synced.add(h);
      watermark = last;
    }
  } finally {
    await source.close();
  }
}

/** A bucket source: each new file in key order, its position committed with each batch, the file recorded when done. */
async function syncFiles(
  deps: SyncDeps,
  job: SyncJob,
  integration: CdiIntegration & { source: { type: 'bucket' } },
  opened: WorkspaceStore,
  startedAt: string,
): Promise<void> {
  const { prefix, format } = integration.source;
  const taken = await deps.pool.query<{ key: string; etag: string }>(
    `SELECT key, etag FROM cdi_files_synced WHERE integration_id = $1`,
    [integration.id],
  );
  const done = new Set(taken.rows.map((r) => `${r.key}\u0000${r.etag}`));
  const files = await pendingFiles(opened.store, prefix, format as FileFormat, (f) =>
    done.has(`${f.key}\u0000${f.etag}`),
  );
  // A resumed run goes on in the file it was in, past the rows it had committed.
  let cursor = (await readJob(deps.pool, job.id))?.cursor ?? null;
  for (const file of files) {
    const skip = cursor && cursor.key === file.key && cursor.etag === file.etag ? cursor.done : 0;
    let position = 0;
    let batch: Item[] = [];
    const commit = async (last: boolean) => {
      const upTo = position;
      await commitBatch(
        deps,
        job,
        batch,
        async (client) => {
          if (last) {
            await client.query(
              `INSERT INTO cdi_files_synced (integration_id, key, etag, job_id, rows) VALUES ($1, $2, $3, $4, $5) ON CONFLICT DO NOTHING`,
              [integration.id, file.key, file.etag, job.id, upTo],
            );
            await client.query(`UPDATE cdi_sync_jobs SET cursor = NULL WHERE id = $1`, [job.id]);
          } else {
            await client.query(`UPDATE cdi_sync_jobs SET cursor = $2 WHERE id = $1`, [
              job.id,
              JSON.stringify({ key: file.key, etag: file.etag, done: upTo }),
            ]);
          }
        },
        null,
      );
      batch = [];
    };
    for await (const r of fileRows(opened.store, file.key, format as FileFormat)) {
      position++;
      if (position <= skip) continue;
      const at = { file: file.key, line: position };
      batch.push(
        'refused' in r
          ? { item: { kind: 'refused', reason: r.refused }, row: null, at }
          : { item: rowItem(r.row, startedAt), row: r.row, at },
      );
      if (batch.length >= deps.config.CDI_BATCH_ROWS) await commit(false);
    }
    await commit(true);
    cursor = null;
  }
}

/** Where a run's rejects file goes: beside a bucket source's files, or under cdi/<integration>/ for a table. */
function rejectsKeyOf(integration: CdiIntegration, jobId: string): string {
  if (integration.source.type === 'bucket')
    return `${integration.source.prefix.replace(/[^/]*$/, '')}${jobId}${REJECTS_SUFFIX}`;
  return `cdi/${integration.id}/${jobId}${REJECTS_SUFFIX}`;
}

/** Writes the run's refused rows, in order, to its rejects file, then forgets them; returns the key, or null. */
async function writeRejects(
  deps: SyncDeps,
  job: SyncJob,
  integration: CdiIntegration,
  opened: WorkspaceStore,
): Promise<string | null> {
  const count = await deps.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM cdi_sync_rejects WHERE job_id = $1`,
    [job.id],
  );
  if (count.rows[0]!.n === 0) return null;
  const key = rejectsKeyOf(integration, job.id);
  const pool = deps.pool;
  async function* lines(): AsyncGenerator<string> {
    let after = 0;
    for (;;) {
      const { rows } = await pool.query<{ seq: number; line: string }>(
        `SELECT seq, line FROM cdi_sync_rejects WHERE job_id = $1 AND seq > $2 ORDER BY seq LIMIT 5000`,
        [job.id, after],
      );
      if (rows.length === 0) return;
      yield `${rows.map((r) => r.line).join('\n')}\n`;
      after = rows[rows.length - 1]!.seq;
    }
  }
  await opened.store.put(key, Readable.from(lines()), { contentType: 'application/x-ndjson' });
  await deps.pool.query(`UPDATE cdi_sync_jobs SET rejects_key = $2 WHERE id = $1`, [job.id, key]);
  await deps.pool.query(`DELETE FROM cdi_sync_rejects WHERE job_id = $1`, [job.id]);
  return key;
}

/**
 * Runs (or resumes) a sync to its end and returns its job. Holds a session advisory lock on the integration for the
 * whole run, so two runners of one integration (a stalled job retried while the first still works) never interleave;
 * the lock goes with the connection if the process dies. A source that cannot be read as configured ends the run as
 * `config_error`; any other failure is thrown, for the job to be retried (it resumes where it stopped).
 */
export async function runSync(deps: SyncDeps, jobId: string): Promise<SyncJob | undefined> {
  const first = await readJob(deps.pool, jobId);
  if (!first || first.status !== 'running') return first;
  const lockClient = await deps.pool.connect();
  let opened: WorkspaceStore | undefined;
  try {
    if (!(await tryLockSession(lockClient, lockNames.cdiSync(first.integrationId))))
      throw new Error(`integration ${first.integrationId} is being synced by another process`);
    const job = (await readJob(deps.pool, jobId))!;
    if (job.status !== 'running') return job;
    await deps.pool.query(`UPDATE cdi_sync_jobs SET attempts = attempts + 1 WHERE id = $1`, [job.id]);
    const integration = await getIntegration(deps.pool, job.workspaceId, job.integrationId);
    const log = deps.log.child({ cdiJobId: job.id, integrationId: integration.id });
    const { destination, namespace } = await workspaceStorage(deps.pool, job.workspaceId);
    opened = storeFor(deps.config, destination, namespace);
    const startedAt = job.startedAt.toISOString();
    try {
      if (integration.source.type === 'postgres')
        await syncTable(deps, job, integration as CdiIntegration & { source: { type: 'postgres' } }, startedAt);
      else
        await syncFiles(deps, job, integration as CdiIntegration & { source: { type: 'bucket' } }, opened, startedAt);
    } catch (err) {
      if (!(err instanceof SourceConfigError)) throw err;
      log.warn({ reason: err.message }, 'CDI sync cannot read its source');
      return await finishJob(deps.pool, job.id, {
        status: 'config_error',
        error: err.message,
        rejectsKey: await writeRejects(deps, job, integration, opened),
      });
    }
    const rejectsKey = await writeRejects(deps, job, integration, opened);
    const finished = await finishJob(deps.pool, job.id, { rejectsKey });
    log.info(
      { status: finished?.status, rowsSynced: finished?.rowsSynced, rowsFailed: finished?.rowsFailed },
      'CDI sync finished',
    );
    return finished;
  } finally {
    opened?.close();
    await unlockSession(lockClient, lockNames.cdiSync(first.integrationId)).catch(() => {});
    lockClient.release();
  }
}
