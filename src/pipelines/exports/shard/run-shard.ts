import { lockNames, lockSession, unlockSession } from '../../../platform/db/advisory-locks.js';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { withTransaction, type Pool, type PoolClient } from '../../../platform/db/pool.js';
import { SegmentFilterSchema, type SegmentFilter } from '../../../profiles/segments/filter.js';
import type { WorkspaceStore } from '../../../platform/storage/stores.js';
import { baseMembersState, loadExport, type ExportRow } from '../export-rows.js';
import { lockKeys, markRunning, openStore, partWriterOptions, type ExportJobDeps } from '../running-export.js';
import { CopyBinaryLines, type LineBatch } from './line-batches.js';
import { renewExportLock, withLeaseRenewal } from '../holds.js';
import { failExport } from '../finish/finish-export.js';
import {
  baseShards,
  baseStillRecent,
  changedOrJoined,
  changedProfilesSelect,
  chooseIncrementalMethod,
  loggedMembershipChangesSelect,
  removedLineSelect,
  type IncrementalScope,
} from '../incremental.js';
import {
  comparedMembershipChangesSelect,
  memberLayers,
  recordsWholeMembers,
  wholeMembersSelect,
} from '../member-layers.js';
import type { PartKind } from '../key-layout.js';
import { PART_LINES, writeParts, type PartWriterOptions, type PartWriterResult } from './part-writer.js';
import { ExportSpecSchema, type ExportSpec } from '../request/request-body.js';
import { exportLineSelect, segmentPredicate, windowStart, type ShardQuery } from './line-query.js';
import { openReadSource, type ReadSource } from './read-source.js';

const MIB = 1024 * 1024;

export interface ShardWork {
  exportId: string;
  shard: number;
  bucketFrom: number;
  bucketTo: number;
}

/** Removes what an earlier attempt of this shard stored: a retry starts clean, so no user is exported twice. */
async function clearShard(pool: Pool, ws: WorkspaceStore, exportId: string, work: ShardWork): Promise<void> {
  const { rows } = await pool.query<{ object_key: string }>(
    `SELECT object_key FROM export_parts WHERE export_id = $1 AND shard = $2`,
    [exportId, work.shard],
  );
  if (rows.length > 0) await ws.store.delete(rows.map((r) => r.object_key));
  await pool.query(`DELETE FROM export_parts WHERE export_id = $1 AND shard = $2`, [exportId, work.shard]);
  await pool.query(`DELETE FROM export_tails WHERE export_id = $1 AND shard = $2`, [exportId, work.shard]);
  await pool.query(`DELETE FROM export_members WHERE export_id = $1 AND random_bucket >= $2 AND random_bucket < $3`, [
    exportId,
    work.bucketFrom,
    work.bucketTo,
  ]);
  await pool.query(
    `DELETE FROM export_member_changes WHERE export_id = $1 AND random_bucket >= $2 AND random_bucket < $3`,
    [exportId, work.bucketFrom, work.bucketTo],
  );
  await pool.query(`DELETE FROM export_shards_done WHERE export_id = $1 AND shard = $2`, [exportId, work.shard]);
}

/** Streams one COPY of NDJSON lines into parts. */
async function copyParts(
  client: PoolClient,
  sql: string,
  partLines: number,
  opts: PartWriterOptions,
): Promise<PartWriterResult> {
  const copy = client.query(copyTo(`COPY (${sql}) TO STDOUT (FORMAT binary)`));
  let out: PartWriterResult | undefined;
  await pipeline(copy, new CopyBinaryLines(partLines), async (batches: AsyncIterable<LineBatch>) => {
    out = await writeParts(batches, opts);
  });
  return out!;
}

/** Where a shard's member records go (../member-layers.ts), and the SELECT that yields them. */
interface MemberRecords {
  target:
    | 'export_members (export_id, random_bucket, profile_ids)'
    | 'export_member_changes (export_id, profile_id, random_bucket, is_member)';
  select: string;
}

/**
 * The shard's member records: whole lists for a full export and for the delta that ends a chain of layers; otherwise
 * its membership changes relative to its base, from the log or from the comparison.
 */
function memberRecords(
  exp: ExportRow,
  scope: IncrementalScope | null,
  predicate: string,
  work: ShardWork,
): MemberRecords {
  if (!scope || recordsWholeMembers(memberLayers(exp))) {
    return {
      target: 'export_members (export_id, random_bucket, profile_ids)',
      select: wholeMembersSelect(exp.id, exp.workspace_id, predicate, work.bucketFrom, work.bucketTo),
    };
  }
  return {
    target: 'export_member_changes (export_id, profile_id, random_bucket, is_member)',
    select:
      scope.method === 'changes-log'
        ? loggedMembershipChangesSelect(exp.id, scope, exp.workspace_id, predicate)
        : comparedMembershipChangesSelect(
            exp.id,
            scope.baseLayers,
            exp.workspace_id,
            predicate,
            work.bucketFrom,
            work.bucketTo,
          ),
  };
}

/**
 * Records the shard's members (from the read transaction's snapshot) on the primary: by one INSERT when the shard
 * reads from the primary, by piping the replica's COPY into the primary's otherwise.
 */
async function storeMembers(source: ReadSource, primary: PoolClient, records: MemberRecords): Promise<void> {
  if (source.client === primary) {
    await primary.query(`INSERT INTO ${records.target} ${records.select}`);
    return;
  }
  await pipeline(
    source.client.query(copyTo(`COPY (${records.select}) TO STDOUT`)),
    primary.query(copyFrom(`COPY ${records.target} FROM STDIN`)),
  );
}

/**
 * The incremental export's view of its base over this shard's buckets; null for a full export; 'forgotten' when the
 * base's member list went after the export was requested (it cannot be compared with any more).
 */
async function incrementalScope(
  { pool, log, config }: ExportJobDeps,
  exportId: string,
  spec: ExportSpec,
  filter: SegmentFilter,
  work: ShardWork,
): Promise<IncrementalScope | null | 'forgotten' | 'too old'> {
  if (!spec.changesSince) return null;
  const base = spec.changesSince;
  const baseState = await baseMembersState(pool, base.exportId);
  if (!baseState || baseState.forgotten) return 'forgotten';
  if (!(await baseStillRecent(pool, base.exportId, config.TOMBSTONE_RETENTION_DAYS))) return 'too old';
  const shards = await baseShards(pool, base.exportId, work.bucketFrom, work.bucketTo);
  const { method, reason } = chooseIncrementalMethod(shards, filter);
  log.info(
    { exportId, shard: work.shard, baseExportId: base.exportId, method, reason },
    'incremental export shard method chosen',
  );
  return {
    baseExportId: base.exportId,
    baseLayers: memberLayers(baseState),
    shards,
    bucketFrom: work.bucketFrom,
    bucketTo: work.bucketTo,
    method,
  };
}

/** The users query's restriction to what changed since the base, by the scope's method. */
function changesOf(scope: IncrementalScope, workspaceId: string): NonNullable<ShardQuery['changes']> {
  return scope.method === 'changes-log'
    ? { changedIds: changedProfilesSelect(scope, workspaceId) }
    : changedOrJoined(scope);
}

/** One shard being run: its export, and the primary connection that holds the shard's lock. */
interface ShardRun {
  deps: ExportJobDeps;
  work: ShardWork;
  exp: ExportRow;
  spec: ExportSpec;
  filter: SegmentFilter;
  ws: WorkspaceStore;
  client: PoolClient;
}

/** What a shard read: its users' and removed lines' parts, under which snapshot, and from which server. */
interface ShardRead {
  users: PartWriterResult;
  removed: PartWriterResult | null;
  snapshot: string;
  source: ReadSource;
}

const NOTHING_DONE = { users: 0, parts: 0 };

/**
 * Exports one random_bucket range: PostgreSQL streams finished NDJSON lines by binary COPY, full parts go to the
 * store as they fill, and the last short run of lines is kept as the shard's tail for the finishing job.
 */
export async function runShard(deps: ExportJobDeps, work: ShardWork): Promise<{ users: number; parts: number }> {
  const { pool, log } = deps;
  const exp = await loadExport(pool, work.exportId);
  if (!exp || exp.status === 'ready' || exp.status === 'failed') {
    log.info({ exportId: work.exportId, shard: work.shard, status: exp?.status ?? 'missing' }, 'export shard skipped');
    return { ...NOTHING_DONE };
  }
  const spec = ExportSpecSchema.parse(exp.request);
  const filter = SegmentFilterSchema.parse(exp.filter);
  const ws = await openStore(deps, exp);
  const shardLock = lockNames.exportShard(exp.id, work.shard);
  // The shard's COPY runs on this client, which first takes the shard's lock: a shard job queued again while an
  // earlier runner still works (Redis lost the job that runner holds) waits for it here, then finds the shard ended.
  // A runner that dies lets go of the lock with its connection.
  const client = await pool.connect();
  let broken: Error | undefined;
  try {
    await lockSession(client, shardLock);
    return await runLockedShard({ deps, work, exp, spec, filter, ws, client });
  } catch (err) {
    broken = err as Error;
    throw err;
  } finally {
    // A failed runner's connection is closed, not returned (it may be in the middle of a COPY): its lock goes with it.
    if (!broken) await unlockSession(client, shardLock).catch((err: unknown) => (broken = err as Error));
    client.release(broken);
    ws.close();
  }
}

/** The shard under its lock: skipped when it has ended already, otherwise read under the lease and recorded ended. */
async function runLockedShard(run: ShardRun): Promise<{ users: number; parts: number }> {
  const { deps, work, exp, spec } = run;
  const { pool, redis, config, log } = deps;
  const ended = await pool.query('SELECT 1 FROM export_shards_done WHERE export_id = $1 AND shard = $2', [
    exp.id,
    work.shard,
  ]);
  if (ended.rowCount) {
    log.info({ exportId: exp.id, shard: work.shard }, 'export shard already ended');
    return { ...NOTHING_DONE };
  }
  const keyPrefix = await markRunning(pool, exp, run.ws);
  if (!keyPrefix) return { ...NOTHING_DONE };
  const scope = await incrementalScope(deps, exp.id, spec, run.filter, work);
  if (scope === 'forgotten' || scope === 'too old') {
    const why =
      scope === 'forgotten'
        ? 'no longer keeps its member list'
        : 'has grown older than TOMBSTONE_RETENTION_DAYS less a day since this export was requested';
    await failExport(
      deps,
      exp.id,
      `the export named by changes_since (${spec.changesSince!.objectPrefix}) ${why}; take a full export`,
    );
    return { ...NOTHING_DONE };
  }
  const keys = lockKeys(config, exp);
  const result = await withLeaseRenewal(
    redis,
    keys,
    exp.id,
    config.EXPORT_LOCK_LEASE_MS,
    (err) => log.warn({ err, exportId: exp.id }, 'export lock renewal failed'),
    () => readShard(run, keyPrefix, scope),
  );
  await recordShardEnd(pool, run, result);
  // The finishing job (or a sibling shard) may wait in the queue a while: back to the queued lease.
  await renewExportLock(redis, keys, exp.id, config.EXPORT_QUEUED_LEASE_MS);
  const parts = result.users.parts + (result.removed?.parts ?? 0);
  log.info(
    {
      exportId: exp.id,
      shard: work.shard,
      users: result.users.users,
      removed: result.removed?.users,
      parts,
      readFrom: result.source.from,
    },
    'export shard done',
  );
  return { users: result.users.users, parts };
}

/** Clears what an earlier attempt stored, then reads the shard's lines and members from one snapshot of its source. */
async function readShard(run: ShardRun, keyPrefix: string, scope: IncrementalScope | null): Promise<ShardRead> {
  const { deps, work, exp, spec, filter } = run;
  await clearShard(deps.pool, run.ws, exp.id, work);
  const predicate = segmentPredicate(filter);
  const usersSql = exportLineSelect({
    workspaceId: exp.workspace_id,
    filter,
    spec,
    bucketFrom: work.bucketFrom,
    bucketTo: work.bucketTo,
    since: windowStart(exp.created_at),
    ...(scope ? { changes: changesOf(scope, exp.workspace_id) } : {}),
  });
  // The lock stays on the primary's connection; the members may be read from a replica.
  const source = await openReadSource(deps, exp, run.client, work.shard);
  let readBroken: Error | undefined;
  try {
    // One snapshot for the lines, the removed lines and the member list, recorded for the exports relative to
    // this one (src/platform/db/migrations/0170_incremental_exports.sql states the rule).
    await source.client.query('BEGIN ISOLATION LEVEL REPEATABLE READ');
    const { rows } = await source.client.query<{ snapshot: string }>('SELECT pg_current_snapshot()::text AS snapshot');
    const writer = partWriters(run, keyPrefix);
    await setReadPlanner(source, scope);
    const users = await copyParts(source.client, usersSql, writer.lines, writer.options('users'));
    const removed = scope
      ? await copyParts(
          source.client,
          removedLineSelect(scope, exp.workspace_id, predicate),
          writer.lines,
          writer.options('removed'),
        )
      : null;
    const members = memberRecords(exp, scope, predicate, work);
    await storeMembers(source, run.client, members);
    await source.client.query('COMMIT');
    return { users, removed, snapshot: rows[0]!.snapshot, source };
  } catch (err) {
    readBroken = err as Error;
    throw err;
  } finally {
    source.release(readBroken);
  }
}

/** How the shard cuts its lines into parts: lines a part, and the writer's options for each kind. */
function partWriters(run: ShardRun, keyPrefix: string) {
  const { deps, exp, spec, ws, work } = run;
  // The spec's parts are exactly 5,000 lines but the last: each shard leaves its short rest to the finishing job,
  // which merges them. With rows_per_part or part_target_mb a shard uploads its own short last part (large
  // tails in PostgreSQL would cost more than a few short files); by size, the writer cuts the parts itself.
  const bySize = spec.partTargetMb ? spec.partTargetMb * MIB : undefined;
  const lines = bySize ? Number.MAX_SAFE_INTEGER : (spec.rowsPerPart ?? PART_LINES);
  const rest = spec.rowsPerPart || bySize ? 'upload' : 'tail';
  const options = (kind: PartKind) =>
    ({
      ...partWriterOptions(deps, exp, spec, ws, keyPrefix, work.shard, kind),
      rest,
      partBytes: bySize,
    }) as const;
  return { lines, options };
}

/**
 * The planner settings of an incremental shard's read, local to its transaction.
 *
 * The users and removed queries of an incremental shard join the range's profiles with the base's members
 * (full-compare). Without statistics (a table not yet analysed, e.g. just after a bulk import) the planner
 * takes the members for a tiny set and picks a nested loop that unnests every one of them again for each
 * profile: quadratic in the shard, 20 s for 15,000 members where a hash join takes 20 ms. Their only other
 * join (the removed members' names, LATERAL) is a nested loop whatever the setting.
 * changes-log looks each changed profile up by key (LATERAL and subplans: nested loops whatever the
 * setting) and the comparison of a delta's member changes joins sets of unknown size too: nested loops stay
 * off for the whole read. JIT is off for changes-log: the disabled plans' nominal cost would set it
 * compiling (0.28 s a query) for a few thousand rows.
 */
async function setReadPlanner(source: ReadSource, scope: IncrementalScope | null): Promise<void> {
  if (scope) await source.client.query('SET LOCAL enable_nestloop = off');
  if (scope?.method === 'changes-log') await source.client.query('SET LOCAL jit = off');
}

/** Keeps the shard's tails and records it ended, in one transaction: the finishing job counts ended shards. */
async function recordShardEnd(pool: Pool, { exp, work, filter }: ShardRun, result: ShardRead): Promise<void> {
  await withTransaction(pool, async (tx) => {
    for (const [kind, out] of [
      ['users', result.users],
      ['removed', result.removed],
    ] as const) {
      if (!out?.tail) continue;
      await tx.query(
        `INSERT INTO export_tails (export_id, kind, shard, users, data) VALUES ($1, $2, $3, $4, $5)
         ON CONFLICT (export_id, kind, shard) DO UPDATE SET users = excluded.users, data = excluded.data, created_at = now()`,
        [exp.id, kind, work.shard, out.tail.users, out.tail.data],
      );
    }
    await tx.query(
      `INSERT INTO export_shards_done (export_id, shard, users, removed, read_from, replay_lsn, replay_at, bucket_from, bucket_to, snapshot, segment_filter)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11)
       ON CONFLICT (export_id, shard) DO UPDATE
         SET users = excluded.users, removed = excluded.removed, done_at = now(), read_from = excluded.read_from, replay_lsn = excluded.replay_lsn,
             replay_at = excluded.replay_at, bucket_from = excluded.bucket_from, bucket_to = excluded.bucket_to, snapshot = excluded.snapshot,
             segment_filter = excluded.segment_filter`,
      [
        exp.id,
        work.shard,
        result.users.users,
        result.removed?.users ?? 0,
        result.source.from,
        result.source.replayLsn,
        result.source.replayAt,
        work.bucketFrom,
        work.bucketTo,
        result.snapshot,
        JSON.stringify(filter),
      ],
    );
  });
}
