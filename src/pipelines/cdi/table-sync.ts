import { withTransaction, type PoolClient } from '../../platform/db/pool.js';
import { yieldToEventLoop } from '../../platform/lib/event-loop.js';
import { commitBatch, commitLanes, type Item, type SyncDeps } from './batch-apply.js';
import type { CdiIntegration } from './integrations.js';
import type { SyncJob } from './sync-runs.js';
import { latestRowTime, rowItem, type RowItem, type SourceRow } from './rows.js';
import { TableSource, type ReadStart, type TableRow, type WatermarkDigest } from './table-source.js';

/**
 * A table source's sync: the rows from the watermark on, in (UPDATED_AT, hash) order, a batch at a time. A batch is
 * applied in one transaction that also moves the watermark, or, with CDI_APPLY_LANES above 1 and no `DELETED` row in
 * it, split by user over that many transactions at once (`commitLanes`), each recording the hashes of the rows it
 * applied (`cdi_lane_rows`); once all have committed, the watermark moves past the batch and those hashes go. A run
 * resumes from the watermark, leaving out every row whose hash is kept (at the watermark's exact time, or by a lane of
 * the unfinished batch): a run stopped between two lanes' commits applies the other lane's rows, and nothing twice.
 */

/**
 * The items of an async source, mapped, one batch ahead: the next batch is read and validated while the current one
 * is applied (the apply waits on PostgreSQL, the reading and validation on this process), instead of in turn.
 */
async function* ahead<T, U>(source: AsyncIterable<T>, map: (t: T) => Promise<U>): AsyncGenerator<U> {
  const it = source[Symbol.asyncIterator]();
  const pull = async () => {
    const r = await it.next();
    return r.done ? null : { value: await map(r.value) };
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

/**
 * The lane of a row: by the user it names, so that one user's rows (by the same identifier) stay in order in one
 * lane. A row that names no one is refused whichever lane takes it.
 */
export function laneOf(row: SourceRow, lanes: number): number {
  const value = [row.external_id, row.alias_name, row.service_id, row.braze_id, row.email, row.phone].find(
    (v) => v !== null && v !== undefined && v !== '',
  );
  const key = value === undefined ? '' : `${String(value)}\u0000${row.alias_label ?? ''}`;
  // FNV-1a over the UTF-16 code units: spread enough for a few lanes, and no digest per row.
  let hash = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) hash = Math.imul(hash ^ key.charCodeAt(i), 0x01000193);
  return (hash >>> 0) % lanes;
}

/** Rows validated between two turns of the event loop. */
const VALIDATE_SLICE = 500;

/**
 * A batch's rows validated, a slice at a time: validating a whole batch at once held the event loop for tens of
 * milliseconds, and every statement of the lanes applying the batch before waited that long for its result to be
 * read (a lane sends about ten statements per batch).
 */
async function itemsOf(rows: TableRow[], startedAt: string, latest: string): Promise<Item[]> {
  const items: Item[] = [];
  for (let i = 0; i < rows.length; i++) {
    if (i > 0 && i % VALIDATE_SLICE === 0) await yieldToEventLoop();
    const r = rows[i]!;
    const item: RowItem = r.refused ? { kind: 'refused', reason: r.refused } : rowItem(r.row, startedAt, latest);
    items.push({ item, row: r.row, order: `${r.ts} ${r.hash}` });
  }
  return items;
}

interface TableBatch {
  rows: TableRow[];
  items: Item[];
}

/**
 * Moves the watermark from `previous` to the batch's last time, in the caller's transaction. When it moves, the hashes
 * kept for the old time go. The hashes of rows at the new time are kept (rows sharing the watermark's time are read
 * again by the next run, and left out by them): the batch's, and those a lane of an unfinished batch recorded, which
 * a resumed run left out of its batch. Lane entries before the new time go; entries past it stay.
 */
export async function moveWatermark(
  client: PoolClient,
  integrationId: string,
  previous: string | null,
  rows: TableRow[],
): Promise<void> {
  const last = rows[rows.length - 1]!.ts;
  await client.query(`UPDATE cdi_integrations SET watermark = $2::timestamptz WHERE id = $1`, [integrationId, last]);
  if (last !== previous)
    await client.query(`DELETE FROM cdi_watermark_rows WHERE integration_id = $1`, [integrationId]);
  await client.query(
    `WITH gone AS (DELETE FROM cdi_lane_rows WHERE integration_id = $1 RETURNING row_hashes, row_times),
          entries AS (SELECT e.hash, e.at FROM gone, unnest(gone.row_hashes, gone.row_times) AS e(hash, at)),
          past AS (INSERT INTO cdi_lane_rows (integration_id, row_hashes, row_times)
                   SELECT $1, array_agg(hash), array_agg(at) FROM entries WHERE at > $2 HAVING count(*) > 0)
     INSERT INTO cdi_watermark_rows (integration_id, row_hash)
     SELECT $1, hash FROM entries WHERE at = $2
     UNION SELECT $1, unnest($3::text[])
     ON CONFLICT DO NOTHING`,
    [integrationId, last, rows.filter((r) => r.ts === last).map((r) => r.hash)],
  );
}

/**
 * Applies one batch (its rows' progress with it), in one transaction or over lanes, and moves the watermark. Rows
 * refused for their time (TableRow.refused) are counted and written to the rejects, but are not taken: they move
 * neither the watermark nor the hashes of rows taken, so the next run reads them again.
 */
async function applyBatch(
  deps: SyncDeps,
  job: SyncJob,
  integrationId: string,
  previous: string | null,
  { rows: read, items }: TableBatch,
): Promise<string | null> {
  const rows = read.some((r) => r.refused) ? read.filter((r) => !r.refused) : read;
  const last = rows.length > 0 ? rows[rows.length - 1]!.ts : previous;
  const moveTo = (client: PoolClient) =>
    rows.length > 0 ? moveWatermark(client, integrationId, previous, rows) : Promise.resolve();
  const lanes = deps.config.CDI_APPLY_LANES;
  if (lanes <= 1 || items.some((i) => i.item.kind === 'delete')) {
    await commitBatch(deps, job, items, moveTo, rows.length > 0 ? last : null);
    return last;
  }
  // Each lane's items, and beside them the source rows they came from (whose hashes and times the lane records).
  const split: Item[][] = Array.from({ length: lanes }, () => []);
  const splitRows: TableRow[][] = Array.from({ length: lanes }, () => []);
  items.forEach((item, n) => {
    const lane = laneOf(read[n]!.row, lanes);
    split[lane]!.push(item);
    if (!read[n]!.refused) splitRows[lane]!.push(read[n]!);
  });
  // Each lane's rows are synced once it commits, whatever becomes of the others: their hashes and times, one array
  // each.
  await commitLanes(deps, job, split, async (client, lane) => {
    const laneRows = splitRows[lane]!;
    if (laneRows.length === 0) return;
    await client.query(`INSERT INTO cdi_lane_rows (integration_id, row_hashes, row_times) VALUES ($1, $2, $3)`, [
      integrationId,
      laneRows.map((r) => r.hash),
      laneRows.map((r) => r.ts),
    ]);
  });
  // Every lane has committed: the batch is synced, and the watermark moves past it.
  if (rows.length === 0) return last;
  await withTransaction(deps.pool, async (client) => {
    await moveWatermark(client, integrationId, previous, rows);
    await client.query(`UPDATE cdi_sync_jobs SET last_timestamp_synced = $2::timestamptz WHERE id = $1`, [
      job.id,
      last,
    ]);
  });
  return last;
}

/**
 * Where the run starts reading, and the hashes of the rows it must leave out there. From the watermark, inclusive,
 * leaving out the rows taken at its exact time and those a lane of an unfinished batch committed; but when no lane's
 * rows are pending and the source's rows at the watermark's time are exactly those taken (same count, same digest of
 * their hashes), from just after it, leaving out nothing. A table loaded in one transaction has one UPDATED_AT for all
 * its rows: a run with nothing new then reads two digests instead of every row again (and holds no hash in memory).
 */
async function startOf(
  deps: SyncDeps,
  source: TableSource,
  integrationId: string,
): Promise<{ start: ReadStart; synced: Set<string> }> {
  const state = await deps.pool.query<{ watermark: string | null; lanes: boolean } & WatermarkDigest>(
    `SELECT to_char(i.watermark AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"') AS watermark,
            EXISTS (SELECT 1 FROM cdi_lane_rows l WHERE l.integration_id = i.id) AS lanes,
            w.n, w.digest
       FROM cdi_integrations i,
            LATERAL (SELECT count(*)::int AS n, md5(string_agg(row_hash COLLATE "C", '' ORDER BY row_hash COLLATE "C")) AS digest
                       FROM cdi_watermark_rows WHERE integration_id = i.id) w
      WHERE i.id = $1`,
    [integrationId],
  );
  const { watermark, lanes, n, digest } = state.rows[0]!;
  if (watermark !== null && !lanes) {
    const there = await source.rowsAt(watermark);
    if (there.n === n && there.digest === digest) return { start: { watermark, inclusive: false }, synced: new Set() };
  }
  const hashes = await deps.pool.query<{ hashes: string[] }>(
    `SELECT coalesce((SELECT array_agg(row_hash) FROM cdi_watermark_rows w WHERE w.integration_id = $1), '{}')
            || coalesce((SELECT array_agg(h) FROM cdi_lane_rows l, unnest(l.row_hashes) h WHERE l.integration_id = $1), '{}') AS hashes`,
    [integrationId],
  );
  return { start: { watermark, inclusive: true }, synced: new Set(hashes.rows[0]!.hashes) };
}

/** A table source: from the watermark on, each batch applied and moving it. */
export async function syncTable(
  deps: SyncDeps,
  job: SyncJob,
  integration: CdiIntegration & { source: { type: 'postgres' } },
  startedAt: string,
): Promise<void> {
  const source = await TableSource.open(integration.source.url_env, integration.source.table, deps.env);
  try {
    const { start, synced } = await startOf(deps, source, integration.id);
    let watermark = start.watermark;
    // One bound for the whole run, as PostgreSQL compares it in the query and the rows' validation does after: the
    // query's snapshot is taken as it starts, so a row it sees was written before, whatever time it claims.
    const latest = latestRowTime();
    const batches = ahead(
      source.batches(start, synced, { rows: deps.config.CDI_BATCH_ROWS, bytes: deps.config.CDI_BATCH_BYTES }, latest),
      async (rows: TableRow[]): Promise<TableBatch> => ({ rows, items: await itemsOf(rows, startedAt, latest) }),
    );
    for await (const batch of batches) watermark = await applyBatch(deps, job, integration.id, watermark, batch);
  } finally {
    await source.close();
  }
}
