import { withTransaction, type Pool } from '../../../platform/db/pool.js';
import { settleAll } from '../../../platform/lib/settle.js';
import type { Logger } from '../../../platform/logger.js';
import type { Metrics } from '../../../platform/metrics.js';
import type { ApplyResult } from '../../../profiles/tracked-objects.js';
import { lockProfilePartition } from '../../../profiles/write/locks.js';
import { retryOnDeadlock, tuneBatchTransaction } from '../../../profiles/write/transaction.js';
import { yieldToEventLoop } from '../../../platform/lib/event-loop.js';
import { COMMAND_PART } from '../accept/stage-commands.js';
import { applyNextCommand, NOT_BEHIND_A_COMMAND } from './command-rows.js';
import { applyIsolating } from '../../../profiles/write/apply-isolating.js';
import { reasonOf, type DataError } from '../../../profiles/write/data-errors.js';
import { insertDeadLetters, parsePayload, type DeadLetter } from './dead-letters.js';
import { ingestMetrics } from '../metrics.js';
import type { TrackObjects } from '../../../profiles/tracked-types.js';

/**
 * The draining side of the durable log between an accepted /users/track (or user-data) request and its application:
 * rows of ingest_staging, committed before the answer by ../accept/staging-writer.ts; a BullMQ job then asks for them.
 * A worker applies staged rows in batches, each workspace's oldest first and the workspaces in turns
 * (`TAKE_BATCH_SQL`), deleting them in the same transaction as the profile updates, so a job retried after a crash
 * finds its row gone and applies nothing twice, and a job lost with Redis loses no data (the next job, or the sweep,
 * drains every older row). A row PostgreSQL refuses moves to ingest_dead_letters in that transaction instead
 * (src/pipelines/ingest/apply/dead-letters.ts). A request is staged as one row per ingestion partition its objects fall
 * in (src/pipelines/ingest/apply/partitions.ts), all in one INSERT, so a request is staged whole or not at all. Rows of
 * user-data commands (./commands.ts) are barriers: a workspace's rows staged after one wait until it has been applied,
 * and it waits for the rows staged before it.
 */

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
  /** Staged rows taken (a request's objects of one partition each), dead letters included. */
  rows: number;
  /** Staged rows refused by PostgreSQL (or not a payload), moved to ingest_dead_letters. */
  deadLetters: number;
  /** Rows of user-data commands applied (./commands.ts). */
  commandRows: number;
}

/**
 * The staged rows one drain loop takes: partition `from`, or for the last loop every partition from `from` up, which
 * picks up rows staged by a process configured with more partitions than this one.
 */
interface PartitionRange {
  from: number;
  to: number;
}

const rangeOf = (part: number, partitions: number): PartitionRange => ({
  from: part,
  to: part === partitions - 1 ? 32767 : part,
});

/**
 * The next batch of a partition range, taken and deleted: for each workspace with rows staged there, its oldest rows,
 * in turns (every workspace's oldest row, then every workspace's second, ... oldest first within a turn) up to
 * `$1` rows, so that one workspace's backlog delays another's rows by one batch at most, and a batch is still full
 * whenever enough is staged. One statement: the workspaces (with the partition, for the last range) are found by
 * skipping through ingest_staging_part_workspace (one index probe each, however many rows each has staged), and
 * each one's oldest rows are read from the same index, up to its first command row (a barrier: ./commands.ts); rows
 * another worker holds are skipped (FOR UPDATE SKIP LOCKED). Rows of one workspace are still taken oldest first.
 */
const TAKE_BATCH_SQL = `
WITH RECURSIVE queues(part, workspace_id) AS (
  (SELECT part, workspace_id FROM ingest_staging WHERE part BETWEEN $2 AND $3 ORDER BY part, workspace_id LIMIT 1)
  UNION ALL
  SELECT n.part, n.workspace_id FROM queues q CROSS JOIN LATERAL (
    SELECT s.part, s.workspace_id FROM ingest_staging s
     WHERE (s.part, s.workspace_id) > (q.part, q.workspace_id) AND s.part <= $3
     ORDER BY s.part, s.workspace_id LIMIT 1) n
)
DELETE FROM ingest_staging
 WHERE id IN (SELECT id FROM ingest_staging
               WHERE id = ANY(ARRAY(SELECT t.id FROM queues q CROSS JOIN LATERAL (
                                      SELECT s.id, row_number() OVER (ORDER BY s.id) AS turn FROM ingest_staging s
                                       WHERE s.part = q.part AND s.workspace_id = q.workspace_id
                                         AND s.id < coalesce((SELECT min(c.id) FROM ingest_staging c
                                                               WHERE c.part = ${COMMAND_PART} AND c.workspace_id = q.workspace_id), 9223372036854775807)
                                       ORDER BY s.id LIMIT $1) t
                                     ORDER BY t.turn, t.id LIMIT $1))
               FOR UPDATE SKIP LOCKED)
RETURNING id, workspace_id, part, accepted_at, objects, extract(epoch FROM clock_timestamp() - accepted_at)::float8 AS lag, payload`;

interface TakenRow {
  id: number;
  workspace_id: string;
  part: number;
  accepted_at: Date;
  objects: number;
  lag: number;
  payload: string;
}

interface StagedItem {
  row: TakenRow;
  objects: TrackObjects;
}

/**
 * Each event, purchase and attributes object keyed by its staged row and place: the id in the event log of the event
 * (or of the subscription state change it makes), whatever retries the batch.
 */
function keyedForTheLog(stagedId: number, objects: TrackObjects): TrackObjects {
  objects.events.forEach((e, i) => (e.logKey = `track:${stagedId}:e${i}`));
  objects.purchases.forEach((p, i) => (p.logKey = `track:${stagedId}:p${i}`));
  objects.attributes.forEach((a, i) => (a.logKey = `track:${stagedId}:a${i}`));
  return objects;
}

interface BatchOutcome {
  taken: number;
  lag: number;
  result: ApplyResult;
  deadLetters: DeadLetter[];
}

/**
 * Applies the next batch of the partitions not being applied by another worker (`TAKE_BATCH_SQL`), leaving out the
 * rows PostgreSQL refuses, which become dead letters in the same transaction; returns how many rows it took.
 */
async function applyNextBatch(
  pool: Pool,
  options: DrainOptions,
  range: PartitionRange,
  total: DrainResult,
): Promise<number> {
  const outcome = await withTransaction(pool, async (client): Promise<BatchOutcome | null> => {
    await tuneBatchTransaction(client);
    const { rows } = await client.query<TakenRow>(TAKE_BATCH_SQL, [options.maxRows, range.from, range.to]);
    if (rows.length === 0) return null;
    // Oldest first, as staged: ties of acceptance time between requests go to the later one.
    rows.sort((a, b) => a.id - b.id);
    const deadLetters: DeadLetter[] = [];
    const letter = (r: TakenRow, error: DataError): DeadLetter => ({
      source: 'track',
      workspaceId: r.workspace_id,
      stagedId: r.id,
      part: r.part,
      acceptedAt: r.accepted_at,
      objects: r.objects,
      payload: r.payload,
      error,
    });
    const items: StagedItem[] = [];
    for (const [i, r] of rows.entries()) {
      // Parsing a few megabytes of payloads in one go would hold up the API sharing this process.
      if (i > 0 && i % 25 === 0) await yieldToEventLoop();
      const parsed = parsePayload(r.payload);
      if ('error' in parsed) deadLetters.push(letter(r, parsed.error));
      else items.push({ row: r, objects: keyedForTheLog(r.id, parsed.objects) });
    }
    await lockProfilePartition(
      client,
      items.map((b) => b.row.workspace_id),
      range.from,
    );
    const refused: { item: StagedItem; error: DataError }[] = [];
    const result = await applyIsolating(
      client,
      items,
      (list) => list.map((b) => ({ workspaceId: b.row.workspace_id, objects: b.objects })),
      refused,
    );
    for (const { item, error } of refused) deadLetters.push(letter(item.row, error));
    await insertDeadLetters(client, deadLetters);
    return { taken: rows.length, lag: Math.max(...rows.map((r) => r.lag)), result, deadLetters };
  });
  if (!outcome) return 0;
  const { result, deadLetters } = outcome;
  const m = ingestMetrics(options.metrics);
  m.lag.set(outcome.lag);
  m.batchObjects.observe(result.events + result.purchases + result.attributes + result.unmatched);
  options.metrics.ingestObjects.inc({ kind: 'events', source: 'track' }, result.events);
  options.metrics.ingestObjects.inc({ kind: 'purchases', source: 'track' }, result.purchases);
  options.metrics.ingestObjects.inc({ kind: 'attributes', source: 'track' }, result.attributes);
  m.unmatched.inc({ source: 'track' }, result.unmatched);
  for (const k of ['events', 'purchases', 'attributes', 'unmatched', 'profilesCreated'] as const) total[k] += result[k];
  total.batches++;
  total.rows += outcome.taken;
  total.deadLetters += deadLetters.length;
  if (deadLetters.length > 0) m.deadLetters.inc({ source: 'track' }, deadLetters.length);
  // No payload and no PostgreSQL message here: both may hold the data, which is personal. The table keeps them.
  for (const d of deadLetters) {
    options.log.error(
      {
        workspaceId: d.workspaceId,
        stagedId: d.stagedId,
        part: d.part,
        code: d.error.code,
        reason: reasonOf(d.error.code),
      },
      'staged row refused by the database; moved to ingest_dead_letters',
    );
  }
  options.log.debug(
    { rows: outcome.taken, part: range.from, deadLetters: deadLetters.length, ...result },
    'ingest batch applied',
  );
  return outcome.taken;
}

/** Rows of the range through `$1` that a batch may take now: not held back by a command row. */
const TAKEABLE = `FROM ingest_staging s WHERE s.part BETWEEN $2 AND $3 AND s.id <= $1 AND ${NOT_BEHIND_A_COMMAND}`;

/** Blocks until no other transaction holds a takeable row of the range at or before `throughId` (it committed, or its worker died). */
async function waitForOthers(pool: Pool, range: PartitionRange, throughId: number): Promise<void> {
  await withTransaction(pool, (client) =>
    client.query(`SELECT s.id ${TAKEABLE} ORDER BY s.id LIMIT 1 FOR UPDATE`, [throughId, range.from, range.to]),
  );
}

/** Applies the range's takeable rows through `limit`; returns whether it applied any. */
async function drainRange(
  pool: Pool,
  limit: number,
  range: PartitionRange,
  options: DrainOptions,
  total: DrainResult,
): Promise<boolean> {
  let applied = false;
  for (;;) {
    const pending = await pool.query(`SELECT 1 ${TAKEABLE} LIMIT 1`, [limit, range.from, range.to]);
    if (pending.rowCount === 0) return applied;
    const taken = await retryOnDeadlock(() => applyNextBatch(pool, options, range, total), options.log);
    if (taken === 0) await waitForOthers(pool, range, limit);
    else applied = true;
  }
}

/** How long the command loop waits before looking again while every command row left is held back. */
const COMMAND_POLL_MS = 20;

/**
 * Applies the command rows through `limit` as each one's turn comes; returns whether it applied any. While command
 * rows remain but each is held back by rows the partition loops (or other workers) are still applying, it polls.
 */
async function drainCommands(
  pool: Pool,
  limit: number,
  options: DrainOptions,
  total: DrainResult,
  others: Promise<unknown>,
): Promise<boolean> {
  let applied = false;
  let othersDone = false;
  void others.finally(() => (othersDone = true));
  for (;;) {
    const step = await retryOnDeadlock(
      () =>
        applyNextCommand(pool, limit, {
          partitions: Math.max(1, options.partitions ?? 1),
          log: options.log,
          metrics: options.metrics,
        }),
      options.log,
    );
    if (step === 'none') return applied;
    if (step === 'applied') {
      applied = true;
      total.commandRows++;
      continue;
    }
    // Held back: by rows this process's partition loops are applying, or by another worker's transaction. Once
    // this process's loops are done, the round ends; the next round takes what the commands applied meanwhile freed.
    if (othersDone) return applied;
    await new Promise((r) => setTimeout(r, COMMAND_POLL_MS));
  }
}

/** The drain loop of each partition range running in this process, by pool (see `inTurn`). */
const runningLoops = new WeakMap<Pool, Map<string, Promise<unknown>>>();

/**
 * Runs a partition's drain loop after any other loop of the same range in this process has ended. Two apply jobs
 * run at once (WORKER_CONCURRENCY): without this, the second one's loop claimed the rows staged since the first
 * one's batch began (FOR UPDATE SKIP LOCKED) and then sat on them, idle in its transaction, until the partition lock
 * was free: a small batch (fewer events per profile rewrite) in every other turn, and its rows held back. Waiting
 * here holds nothing, and the loop then takes what was staged meanwhile in one batch. Loops in other processes are
 * still ordered by the partition lock alone.
 */
function inTurn<T>(pool: Pool, range: PartitionRange, loop: () => Promise<T>): Promise<T> {
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
 * per partition in this process. Each workspace's oldest rows go first, and workspaces take turns within a batch,
 * so a job never waits behind newer work of its own workspace, nor a whole backlog of another's.
 */
export async function drainThrough(
  pool: Pool,
  throughId: number | undefined,
  options: DrainOptions,
): Promise<DrainResult> {
  const total: DrainResult = {
    events: 0,
    purchases: 0,
    attributes: 0,
    unmatched: 0,
    profilesCreated: 0,
    batches: 0,
    rows: 0,
    deadLetters: 0,
    commandRows: 0,
  };
  const limit =
    throughId ?? (await pool.query<{ max: number | null }>('SELECT max(id) AS max FROM ingest_staging')).rows[0]!.max;
  if (limit === null) return total;
  const partitions = Math.max(1, options.partitions ?? 1);
  // Rounds: a command row applied in a round frees the rows it held back for the next one.
  for (;;) {
    const loops = Array.from({ length: partitions }, (_, part) => {
      const range = rangeOf(part, partitions);
      return inTurn(pool, range, () => drainRange(pool, limit, range, options, total));
    });
    const commands = drainCommands(pool, limit, options, total, Promise.allSettled(loops));
    const applied = await settleAll([...loops, commands]);
    if (applied.some(Boolean)) continue;
    const left = await pool.query('SELECT 1 FROM ingest_staging WHERE id <= $1 LIMIT 1', [limit]);
    if (left.rowCount === 0) return total;
    // Nothing could be taken, yet rows remain: another worker is applying a command row that holds them back.
    // Waiting for its transaction (a lock on the row) and looking again applies them here if that worker stops short.
    await withTransaction(pool, (client) =>
      client.query(
        `SELECT id FROM ingest_staging WHERE part = ${COMMAND_PART} AND id <= $1 ORDER BY id LIMIT 1 FOR UPDATE`,
        [limit],
      ),
    );
    await new Promise((r) => setTimeout(r, COMMAND_POLL_MS));
  }
}
