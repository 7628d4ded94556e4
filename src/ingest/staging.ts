import { withTransaction, type Pool } from '../db/pool.js';
import { settleAll } from '../lib/settle.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import { applyObjects, lockIngestPartition, retryOnDeadlock, tuneBatchTransaction, yieldToEventLoop, type ApplyResult, type WorkspaceObjects } from './apply.js';
import { ingestMetrics } from './metrics.js';
import { splitByPartition } from './partitions.js';
import type { TrackObjects } from './types.js';

/**
 * The durable log between an accepted /users/track request and its application: rows of ingest_staging. A request
 * commits its row before answering; a BullMQ job then names the row. A worker applies the oldest staged rows in
 * batches, deleting them in the same transaction as the profile updates, so a job retried after a crash finds its
 * row gone and applies nothing twice, and a job lost with Redis loses no data (the next job, or the sweep, drains
 * every older row). A request is staged as one row per ingestion partition its objects fall in
 * (src/ingest/partitions.ts), all in one INSERT, so a request is staged whole or not at all.
 */

interface StagedRow {
  part: number;
  count: number;
  payload: string;
}

interface PendingStage {
  workspaceId: string;
  rows: StagedRow[];
  resolve: (ids: number[]) => void;
  reject: (err: unknown) => void;
}

/**
 * Group commit for staged requests: while an insert is in flight, the requests that arrive meanwhile wait and then
 * go together in one multi-row INSERT and one commit. A commit waits for PostgreSQL to flush the log, which a
 * concurrent batch of profile updates fills quickly; one commit per request would make every acknowledgement pay
 * for that flush and hold a pool connection meanwhile.
 */
class StagingWriter {
  private readonly pending: PendingStage[] = [];
  private inflight = 0;

  constructor(
    private readonly pool: Pool,
    private readonly maxInflight = 2,
    private readonly maxRows = 500,
  ) {}

  stage(workspaceId: string, rows: StagedRow[]): Promise<number[]> {
    return new Promise((resolve, reject) => {
      this.pending.push({ workspaceId, rows, resolve, reject });
      this.pump();
    });
  }

  private pump(): void {
    while (this.inflight < this.maxInflight && this.pending.length > 0) {
      const group = this.pending.splice(0, this.maxRows);
      this.inflight++;
      this.insert(group)
        .then(
          (ids) => {
            let next = 0;
            for (const g of group) g.resolve(ids.slice(next, (next += g.rows.length)));
          },
          (err: unknown) => group.forEach((g) => g.reject(err)),
        )
        .finally(() => {
          this.inflight--;
          this.pump();
        });
    }
  }

  private async insert(group: PendingStage[]): Promise<number[]> {
    // One parameter per payload rather than a text[]: quoting every '"' of the JSON into an array literal, and
    // sending the grown string, was a fifth of the API's time per request.
    const rows = group.flatMap((g) => g.rows.map((r) => [g.workspaceId, r.part, r.count, r.payload]));
    const values = rows.map((_, i) => `($${4 * i + 1}::uuid, $${4 * i + 2}::smallint, $${4 * i + 3}::int, $${4 * i + 4}::text)`);
    const inserted = await this.pool.query<{ id: number }>(
      `INSERT INTO ingest_staging (workspace_id, part, objects, payload) VALUES ${values.join(', ')} RETURNING id`,
      rows.flat(),
    );
    // Identity values are drawn in the order of the VALUES rows.
    return inserted.rows.map((r) => r.id).sort((a, b) => a - b);
  }
}

const writers = new WeakMap<Pool, StagingWriter>();

/**
 * What a staged row keeps of the objects: what the apply reads. Event and purchase properties (and app ids) are
 * validated but, as the spec has it, not persisted on the profile; leaving them out halves a typical row, and with
 * it the API's serializing, the log's writes and the worker's parsing.
 */
export function stagedForm(objects: TrackObjects): TrackObjects {
  return {
    events: objects.events.map((e) => ({ identity: e.identity, create: e.create, name: e.name, time: e.time })),
    purchases: objects.purchases.map((p) => ({
      identity: p.identity,
      create: p.create,
      product_id: p.product_id,
      currency: p.currency,
      price: p.price,
      quantity: p.quantity,
      time: p.time,
    })),
    attributes: objects.attributes,
  };
}

/**
 * Commits one request's accepted objects (possibly in one commit with other requests'), a row per ingestion
 * partition; returns the staged rows' ids.
 */
export async function stageObjects(pool: Pool, workspaceId: string, objects: TrackObjects, partitions = 1): Promise<number[]> {
  let writer = writers.get(pool);
  if (!writer) writers.set(pool, (writer = new StagingWriter(pool)));
  const rows = splitByPartition(stagedForm(objects), partitions).map(({ part, objects: o }) => ({
    part,
    count: o.events.length + o.attributes.length + o.purchases.length,
    payload: JSON.stringify(o),
  }));
  return writer.stage(workspaceId, rows);
}

export interface DrainOptions {
  /** Staged rows coalesced into one transaction. */
  maxRows: number;
  /** Ingestion partitions drained at once (INGEST_PARTITIONS); default 1. */
  partitions?: number;
  log: Logger;
  metrics: Metrics;
}

export interface DrainResult extends ApplyResult {
  batches: number;
  /** Staged rows applied (a request's objects of one partition each). */
  rows: number;
}

/**
 * The staged rows one drain loop takes: partition `from`, or for the last loop every partition from `from` up, which
 * picks up rows staged by a process configured with more partitions than this one.
 */
interface PartitionRange {
  from: number;
  to: number;
}

const rangeOf = (part: number, partitions: number): PartitionRange => ({ from: part, to: part === partitions - 1 ? 32767 : part });

/** Applies the oldest staged rows of the partitions not being applied by another worker; returns how many rows it took. */
async function applyNextBatch(pool: Pool, options: DrainOptions, range: PartitionRange, total: DrainResult): Promise<number> {
  return withTransaction(pool, async (client) => {
    await tuneBatchTransaction(client);
    const { rows } = await client.query<{ id: number; workspace_id: string; lag: number; payload: string }>(
      `DELETE FROM ingest_staging
        WHERE id IN (SELECT id FROM ingest_staging WHERE part BETWEEN $2 AND $3 ORDER BY id LIMIT $1 FOR UPDATE SKIP LOCKED)
        RETURNING id, workspace_id, extract(epoch FROM clock_timestamp() - accepted_at)::float8 AS lag, payload`,
      [options.maxRows, range.from, range.to],
    );
    if (rows.length === 0) return 0;
    const batches: WorkspaceObjects[] = [];
    for (const [i, r] of rows.entries()) {
      // Parsing a few megabytes of payloads in one go would hold up the API sharing this process.
      if (i > 0 && i % 25 === 0) await yieldToEventLoop();
      batches.push({ workspaceId: r.workspace_id, objects: JSON.parse(r.payload) as TrackObjects });
    }
    await lockIngestPartition(
      client,
      batches.map((b) => b.workspaceId),
      range.from,
    );
    const result = await applyObjects(client, batches);
    const m = ingestMetrics(options.metrics);
    m.lag.set(Math.max(...rows.map((r) => r.lag)));
    m.batchObjects.observe(result.events + result.purchases + result.attributes + result.unmatched);
    options.metrics.ingestObjects.inc({ kind: 'events', source: 'track' }, result.events);
    options.metrics.ingestObjects.inc({ kind: 'purchases', source: 'track' }, result.purchases);
    options.metrics.ingestObjects.inc({ kind: 'attributes', source: 'track' }, result.attributes);
    m.unmatched.inc({ source: 'track' }, result.unmatched);
    for (const k of ['events', 'purchases', 'attributes', 'unmatched', 'profilesCreated'] as const) total[k] += result[k];
    total.batches++;
    total.rows += rows.length;
    options.log.debug({ rows: rows.length, part: range.from, ...result }, 'ingest batch applied');
    return rows.length;
  });
}

/** Blocks until no other transaction holds a staged row of the range at or before `throughId` (it committed, or its worker died). */
async function waitForOthers(pool: Pool, range: PartitionRange, throughId: number): Promise<void> {
  await withTransaction(pool, (client) =>
    client.query('SELECT id FROM ingest_staging WHERE part BETWEEN $2 AND $3 AND id <= $1 ORDER BY id LIMIT 1 FOR UPDATE', [throughId, range.from, range.to]),
  );
}

async function drainRange(pool: Pool, limit: number, range: PartitionRange, options: DrainOptions, total: DrainResult): Promise<void> {
  for (;;) {
    const pending = await pool.query('SELECT 1 FROM ingest_staging WHERE part BETWEEN $2 AND $3 AND id <= $1 LIMIT 1', [limit, range.from, range.to]);
    if (pending.rowCount === 0) return;
    const taken = await retryOnDeadlock(() => applyNextBatch(pool, options, range, total), options.log);
    if (taken === 0) await waitForOthers(pool, range, limit);
  }
}

/** The drain loop of each partition range running in this process, by pool (see `inTurn`). */
const runningLoops = new WeakMap<Pool, Map<string, Promise<void>>>();

/**
 * Runs a partition's drain loop after any other loop of the same range in this process has ended. Two apply jobs
 * run at once (WORKER_CONCURRENCY): without this, the second one's loop claimed the rows staged since the first
 * one's batch began (FOR UPDATE SKIP LOCKED) and then sat on them, idle in its transaction, until the partition lock
 * was free: a small batch (fewer events per profile rewrite) in every other turn, and its rows held back. Waiting
 * here holds nothing, and the loop then takes what was staged meanwhile in one batch. Loops in other processes are
 * still ordered by the partition lock alone.
 */
function inTurn(pool: Pool, range: PartitionRange, loop: () => Promise<void>): Promise<void> {
  let loops = runningLoops.get(pool);
  if (!loops) runningLoops.set(pool, (loops = new Map()));
  const key = `${range.from}-${range.to}`;
  const mine = (loops.get(key) ?? Promise.resolve()).catch(() => undefined).then(loop);
  loops.set(key, mine);
  const forget = () => {
    if (loops.get(key) === mine) loops.delete(key);
  };
  mine.then(forget, forget);
  return mine;
}

/**
 * Applies batches until every row up to `throughId` (default: the newest row now) has been applied, by this call
 * or by another worker: one loop per ingestion partition, at once, each on its own connection, and one at a time
 * per partition in this process. Oldest rows go first, so a job never waits behind newer work.
 */
export async function drainThrough(pool: Pool, throughId: number | undefined, options: DrainOptions): Promise<DrainResult> {
  const total: DrainResult = { events: 0, purchases: 0, attributes: 0, unmatched: 0, profilesCreated: 0, batches: 0, rows: 0 };
  const limit = throughId ?? (await pool.query<{ max: number | null }>('SELECT max(id) AS max FROM ingest_staging')).rows[0]!.max;
  if (limit === null) return total;
  const partitions = Math.max(1, options.partitions ?? 1);
  await settleAll(
    Array.from({ length: partitions }, (_, part) => {
      const range = rangeOf(part, partitions);
      return inTurn(pool, range, () => drainRange(pool, limit, range, options, total));
    }),
  );
  return total;
}
