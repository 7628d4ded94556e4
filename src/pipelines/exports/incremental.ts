import { escapeLiteral } from 'pg';
import type { Pool, PoolClient } from '../../platform/db/pool.js';
import { badRequest } from '../../platform/errors.js';
import { filterMovesWithTime, SegmentFilterSchema, type SegmentFilter } from '../../profiles/segments/filter.js';
import { heldBy, heldMembers, MAX_MEMBER_LAYERS, memberLayers } from './member-layers.js';

/**
 * Incremental exports (`changes_since`): what an export needs of the earlier export it is relative to (its base), and
 * the SQL that compares with it. The rule is in src/platform/db/migrations/0170_incremental_exports.sql: every shard
 * records the snapshot it read in and the members it found; a later export holds the members whose last write that
 * snapshot could not see, the members the base did not hold, and, as `removed`, the base's members that are no longer
 * members (or no longer exist).
 */

/** The export an incremental export is relative to, as stored in its request (ExportSpec.changesSince). */
export interface ExportBase {
  exportId: string;
  objectPrefix: string;
}

/** One shard of the base: the random_bucket range it read, the snapshot it read in and the filter it selected with. */
export interface BaseShard {
  bucketFrom: number;
  bucketTo: number;
  snapshot: string;
  /** The segment filter as the shard recorded it (jsonb text); null for shards from before migration 0240. */
  segmentFilter: unknown;
}

/**
 * Resolves `changes_since` to the base export: a ready export of the same segment in the same workspace whose shards
 * all recorded their snapshot and whose members are still kept. Anything else is a 400 naming the prefix. With the
 * base's member layers (./member-layers.ts), which the new export's are laid on.
 */
export async function resolveExportBase(
  pool: Pool,
  workspaceId: string,
  segmentId: string,
  objectPrefix: string,
  tombstoneDays: number,
): Promise<{ base: ExportBase; memberLayers: string[] } | { tooOld: string }> {
  const named = `changes_since ${JSON.stringify(objectPrefix)}`;
  const { rows } = await pool.query<{
    id: string;
    segment_id: string;
    status: string;
    shard_count: number;
    snapshots: number;
    kept: boolean;
    recent: boolean;
    member_layers: string[] | null;
  }>(
    `SELECT e.id, e.segment_id, e.status, COALESCE(e.shard_count, 1) AS shard_count, e.member_layers,
            (SELECT count(*)::int FROM export_shards_done d WHERE d.export_id = e.id AND d.snapshot IS NOT NULL) AS snapshots,
            e.members_forgotten_at IS NULL AS kept, ${BASE_IS_RECENT('e', '$3')} AS recent
       FROM exports e WHERE e.workspace_id = $1 AND e.object_prefix = $2`,
    [workspaceId, objectPrefix, tombstoneDays],
  );
  const base = rows[0];
  if (!base) throw badRequest(`${named} does not name an export of this workspace`);
  if (base.segment_id !== segmentId)
    throw badRequest(
      `${named} is an export of another segment; an incremental export is relative to an export of the same segment`,
    );
  if (base.status !== 'ready')
    throw badRequest(
      `${named} names an export that is ${base.status}, not ready; only a finished export can be a base`,
    );
  if (base.snapshots < base.shard_count) {
    throw badRequest(
      `${named} names an export from before incremental exports were recorded; take a full export first`,
    );
  }
  if (!base.kept) {
    throw badRequest(
      `${named} names an export whose member list is no longer kept (EXPORT_INCREMENTAL_RETENTION_DAYS); take a full export first`,
    );
  }
  if (!base.recent) {
    return {
      tooOld: `${named} is older than TOMBSTONE_RETENTION_DAYS less a day: users deleted since may have no tombstone left to name them`,
    };
  }
  return { base: { exportId: base.id, objectPrefix }, memberLayers: memberLayers(base) };
}

/**
 * Whether export `<e>` is recent enough to be a base, `<days>` being TOMBSTONE_RETENTION_DAYS: a delta names the
 * users deleted since its base read them from their tombstones, which go after that many days whatever export is kept
 * (`forgetExportBases`). A deletion that began up to a day before the base was requested may commit after it read
 * (the margin the tombstones' other pruning keeps too), so the base must be younger than the bound less a day.
 */
const BASE_IS_RECENT = (e: string, days: string) =>
  `(${e}.created_at >= now() - make_interval(days => ${days}) + interval '1 day')`;

/**
 * The latest ready export of a segment that can still be a base (its member list kept, and recent enough for its
 * tombstones: `BASE_IS_RECENT`), optionally only among one
 * schedule's runs: what `ces export --changes-since last` and incremental schedules are relative to. Null when none.
 */
export async function latestBaseCandidate(
  pool: Pool,
  workspaceId: string,
  segmentApiId: string,
  tombstoneDays: number,
  scheduledBy: string | null = null,
): Promise<{ objectPrefix: string; request: { fields?: string[]; customAttributes?: string[] | null } } | null> {
  const { rows } = await pool.query<{
    object_prefix: string;
    request: { fields?: string[]; customAttributes?: string[] | null };
  }>(
    `SELECT e.object_prefix, e.request FROM exports e JOIN segments s ON s.id = e.segment_id
      WHERE e.workspace_id = $1 AND s.api_id = $2 AND e.status = 'ready' AND e.members_forgotten_at IS NULL
        AND ($3::text IS NULL OR e.scheduled_by = $3) AND ${BASE_IS_RECENT('e', '$4')}
      ORDER BY e.created_at DESC LIMIT 1`,
    [workspaceId, segmentApiId, scheduledBy, tombstoneDays],
  );
  return rows[0] ? { objectPrefix: rows[0].object_prefix, request: rows[0].request } : null;
}

/**
 * Whether a delta's base is still recent enough for the tombstones its removed parts read (checked again when a shard
 * runs: a delta queued for more than a day may have outlived it).
 */
export async function baseStillRecent(pool: Pool, baseExportId: string, tombstoneDays: number): Promise<boolean> {
  const { rows } = await pool.query<{ recent: boolean }>(
    `SELECT ${BASE_IS_RECENT('e', '$2')} AS recent FROM exports e WHERE e.id = $1`,
    [baseExportId, tombstoneDays],
  );
  return rows[0]?.recent === true;
}

/** The base's shards that overlap [bucketFrom, bucketTo). */
export async function baseShards(
  pool: Pool,
  baseExportId: string,
  bucketFrom: number,
  bucketTo: number,
): Promise<BaseShard[]> {
  const { rows } = await pool.query<{
    bucket_from: number;
    bucket_to: number;
    snapshot: string;
    segment_filter: unknown;
  }>(
    `SELECT bucket_from, bucket_to, snapshot::text, segment_filter FROM export_shards_done
      WHERE export_id = $1 AND snapshot IS NOT NULL AND bucket_from < $3 AND bucket_to > $2 ORDER BY bucket_from`,
    [baseExportId, bucketFrom, bucketTo],
  );
  return rows.map((r) => ({
    bucketFrom: r.bucket_from,
    bucketTo: r.bucket_to,
    snapshot: r.snapshot,
    segmentFilter: r.segment_filter,
  }));
}

/**
 * The snapshot of the base shard that covered `<bucket>` (a random_bucket column), as one SQL expression (literals:
 * COPY takes no parameters).
 */
function baseSnapshotExpr(shards: BaseShard[], bucket = 'p.random_bucket'): string {
  if (shards.length === 0) throw new Error('the base export recorded no snapshot for these buckets');
  const snap = (s: BaseShard) => `${escapeLiteral(s.snapshot)}::pg_snapshot`;
  if (shards.length === 1) return snap(shards[0]!);
  const arms = shards.map(
    (s) => `WHEN ${bucket} >= ${Math.trunc(s.bucketFrom)} AND ${bucket} < ${Math.trunc(s.bucketTo)} THEN ${snap(s)}`,
  );
  return `CASE ${arms.join(' ')} END`;
}

/** The oldest xmin of the shards' snapshots: every transaction below it is visible to all of them. */
function oldestXmin(shards: BaseShard[]): bigint {
  return shards.map((s) => BigInt(s.snapshot.split(':')[0]!)).reduce((a, b) => (b < a ? b : a));
}

/**
 * How a delta finds what changed since its base:
 * - `changes-log`: the profiles written or deleted since the base's snapshot, from profile_changes and the tombstones
 *   (migration 0240); the delta reads only those profiles, so its cost follows the change, not the segment.
 * - `full-compare`: every member of the range against the base's members and snapshot (migration 0170). For bases
 *   whose shards ended before the log existed, for a segment whose filter was edited since the base (members may have
 *   joined or left without a write), and for filters whose membership moves with time (`within_days`).
 */
export type IncrementalMethod = 'changes-log' | 'full-compare';

export interface IncrementalScope {
  baseExportId: string;
  /** The base's member layers (./member-layers.ts), newest first. */
  baseLayers: string[];
  shards: BaseShard[];
  bucketFrom: number;
  bucketTo: number;
  method: IncrementalMethod;
}

/** JSON text with every object's keys sorted: a filter read back from jsonb and one parsed by zod compare equal. */
function canonicalJson(value: unknown): string {
  return JSON.stringify(value, (_key, v: unknown) =>
    v && typeof v === 'object' && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );
}

/**
 * Changed profiles one shard of a changes-log delta is sized for. A delta's work follows its changes, not its
 * buckets: cut into the configured number of shards, 20,000 changes make eight shards of 2,500 lines, each too
 * short for a part of its own, and the finishing job merges all of them alone (0.4 s of a 1.3 s delta). Cut by this
 * size, shards fill whole parts in parallel.
 */
export const DELTA_CHANGES_PER_SHARD = 10_000;

/**
 * random_bucket values per shard for a delta relative to `base`: fewer, larger shards than configured when the
 * delta reads the log (never more), from the number of log entries since the base (counted up to what the
 * configured shards would hold, so the count costs at most that).
 */
export async function deltaShardBuckets(
  pool: Pool,
  workspaceId: string,
  baseExportId: string,
  filter: unknown,
  configured: number,
): Promise<number> {
  const configuredShards = Math.ceil(10_000 / Math.min(Math.max(configured, 1), 10_000));
  const shards = await baseShards(pool, baseExportId, 0, 10_000);
  const parsed = SegmentFilterSchema.safeParse(filter);
  if (shards.length === 0 || !parsed.success || chooseIncrementalMethod(shards, parsed.data).method !== 'changes-log')
    return configured;
  const cap = configuredShards * DELTA_CHANGES_PER_SHARD;
  const { rows } = await pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM (SELECT 1 FROM profile_changes WHERE workspace_id = $1 AND xid >= $2::xid8 LIMIT $3) c`,
    [workspaceId, oldestXmin(shards).toString(), cap],
  );
  const wanted = Math.min(configuredShards, Math.max(1, Math.ceil(rows[0]!.n / DELTA_CHANGES_PER_SHARD)));
  return Math.max(configured, Math.ceil(10_000 / wanted));
}

/** The method for a delta over these base shards, with the reason a full comparison is needed when it is. */
export function chooseIncrementalMethod(
  shards: BaseShard[],
  filter: SegmentFilter,
): { method: IncrementalMethod; reason: string } {
  if (shards.some((s) => s.segmentFilter === null || s.segmentFilter === undefined)) {
    return { method: 'full-compare', reason: 'the base export is older than the change log' };
  }
  const now = canonicalJson(filter);
  if (shards.some((s) => canonicalJson(s.segmentFilter) !== now))
    return { method: 'full-compare', reason: "the segment's filter changed since the base export" };
  if (filterMovesWithTime(filter))
    return { method: 'full-compare', reason: "the segment's membership moves with time (within_days)" };
  return { method: 'changes-log', reason: 'profiles written or deleted since the base export' };
}

/**
 * For the users query over `profiles p` (full-compare): a join and a condition keeping the members that changed since
 * the base read them or that the base did not hold. A write the base's snapshot could not see (committed after it,
 * or in progress when it was taken) counts as a change; rows last written before migration 0170 (changed_xid NULL)
 * never do.
 */
export function changedOrJoined(scope: IncrementalScope): { join: string; condition: string } {
  return {
    join: `LEFT JOIN (${heldMembers(scope.baseLayers, scope.bucketFrom, scope.bucketTo)}) base ON base.id = p.id`,
    condition: `(base.id IS NULL OR (p.changed_xid IS NOT NULL AND NOT pg_visible_in_snapshot(p.changed_xid, ${baseSnapshotExpr(scope.shards)})))`,
  };
}

/**
 * (changes-log) The profiles of the range written or deleted by a transaction the base's snapshot of their bucket
 * could not see, one row (random_bucket, id) each: the only profiles whose membership or line can differ from the
 * base's. Entries below the oldest xmin of those snapshots are visible to all of them and are not read at all (the
 * index range starts there). The fence (OFFSET 0) keeps the set apart: what is joined to it is looked up by key.
 */
export function changedProfilesSelect(scope: IncrementalScope, workspaceId: string): string {
  const workspace = `${escapeLiteral(workspaceId)}::uuid`;
  const from = Math.trunc(scope.bucketFrom);
  const to = Math.trunc(scope.bucketTo);
  const xmin = `'${oldestXmin(scope.shards)}'::xid8`;
  return `SELECT c.random_bucket, c.profile_id AS id FROM profile_changes c
             WHERE c.workspace_id = ${workspace} AND c.xid >= ${xmin} AND c.random_bucket >= ${from} AND c.random_bucket < ${to}
               AND NOT pg_visible_in_snapshot(c.xid, ${baseSnapshotExpr(scope.shards, 'c.random_bucket')})
           UNION
           SELECT t.random_bucket, t.profile_id FROM profile_tombstones t
             WHERE t.workspace_id = ${workspace} AND t.deleted_xid >= ${xmin} AND t.random_bucket >= ${from} AND t.random_bucket < ${to}
               AND NOT pg_visible_in_snapshot(t.deleted_xid, ${baseSnapshotExpr(scope.shards, 't.random_bucket')})
           OFFSET 0`;
}

/**
 * (changes-log) The changed profiles with two flags: whether the base held them (`was_member`) and whether they are
 * members now (`is_member`). Both are EXISTS in the select list, so each is a lookup by key per changed profile
 * (a subplan the planner never turns into a join over the range or the base, whatever it estimates the set's size).
 */
function changedWithMembership(scope: IncrementalScope, workspaceId: string, predicate: string): string {
  return `SELECT c.random_bucket, c.id,
                 ${heldBy(scope.baseLayers, 'c.random_bucket', 'c.id')} AS was_member,
                 ${memberNow(workspaceId, predicate, 'c.id')} AS is_member
            FROM (${changedProfilesSelect(scope, workspaceId)}) c
          OFFSET 0`;
}

/** Whether profile `<id>` of the workspace is a member now. */
function memberNow(workspaceId: string, predicate: string, id: string): string {
  return `EXISTS (SELECT 1 FROM profiles p WHERE p.id = ${id} AND p.workspace_id = ${escapeLiteral(workspaceId)}::uuid AND (${predicate}))`;
}

/** One removed line: the profile's names, from its row or its tombstone (a line of nulls when even that is gone). */
function removedLine(workspaceId: string, ids: string): string {
  const workspace = `${escapeLiteral(workspaceId)}::uuid`;
  return `SELECT '{"external_id":' || COALESCE(to_json(n.external_id)::text, 'null') || ',"service_id":' || COALESCE(to_json(n.service_id)::text, 'null') || '}'
    FROM (${ids}) gone
    LEFT JOIN LATERAL (SELECT p.external_id, p.service_id FROM profiles p WHERE p.id = gone.id AND p.workspace_id = ${workspace}
                       UNION ALL
                       SELECT t.external_id, t.service_id FROM profile_tombstones t WHERE t.profile_id = gone.id AND t.workspace_id = ${workspace}
                       LIMIT 1) n ON true
   ORDER BY gone.random_bucket, gone.id`;
}

/**
 * One line `{"external_id":…,"service_id":…}` per member of the base (in this range) that is no longer a member:
 * its profile fails the segment's predicate now, or is gone. `predicate` is the compiled segment filter over `p`.
 *
 * changes-log: only the changed profiles can have left; each is checked against its bucket's base array and its row.
 * full-compare: the base's members are compared with the range's members now as one anti-join (a hash join under the
 * shard's settings: a bucket-range scan), not one profile lookup per base member (0.7 s for 125,000 members); the
 * fence (OFFSET 0) keeps the lookup of names to the few that left.
 */
export function removedLineSelect(scope: IncrementalScope, workspaceId: string, predicate: string): string {
  if (scope.method === 'changes-log') {
    return removedLine(
      workspaceId,
      `SELECT ch.random_bucket, ch.id FROM (${changedWithMembership(scope, workspaceId, predicate)}) ch WHERE ch.was_member AND NOT ch.is_member`,
    );
  }
  const workspace = `${escapeLiteral(workspaceId)}::uuid`;
  return removedLine(
    workspaceId,
    `SELECT b.random_bucket, b.id FROM (${heldMembers(scope.baseLayers, scope.bucketFrom, scope.bucketTo)}) b
      WHERE NOT EXISTS (SELECT 1 FROM profiles p
                         WHERE p.id = b.id AND p.workspace_id = ${workspace}
                           AND p.random_bucket >= ${Math.trunc(scope.bucketFrom)} AND p.random_bucket < ${Math.trunc(scope.bucketTo)}
                           AND (${predicate}))
     OFFSET 0`,
  );
}

/**
 * (changes-log) This export's membership changes in [bucketFrom, bucketTo) relative to its base, for
 * `export_member_changes` (./member-layers.ts): the changed profiles whose membership differs from the base's, rows
 * (export_id, profile_id, random_bucket, is_member). Reads the changed profiles, not the segment.
 */
export function loggedMembershipChangesSelect(
  exportId: string,
  scope: IncrementalScope,
  workspaceId: string,
  predicate: string,
): string {
  return `SELECT ${escapeLiteral(exportId)}::uuid, c.id, c.random_bucket, c.is_member
            FROM (${changedWithMembership(scope, workspaceId, predicate)}) c
           WHERE c.is_member <> c.was_member`;
}

/**
 * Forgets what only bases need once no export can be a base any more: the member lists of failed exports, and of ready
 * exports finished more than `retentionDays` ago that a newer ready export of their segment supersedes, no unfinished
 * export is relative to and no kept export's members are layered on (./member-layers.ts); then the tombstones older
 * than every export of their workspace still kept (with a day's margin for deletions that began before an export was
 * requested and committed after it read), and those older than `tombstoneDays` whatever is kept (a hard bound: personal
 * data, docs/privacy.md); then the change log (migration 0240) below what any export of the workspace may still compare
 * with: the oldest xmin of the snapshots of its kept exports, of the snapshots its unfinished exports may yet take
 * (their created_xmin), and of the running transactions. An entry below that is visible to every such snapshot, so no
 * delta reads it.
 */
export async function forgetExportBases(
  pool: Pool | PoolClient,
  retentionDays: number,
  tombstoneDays: number,
): Promise<{ exports: number; tombstones: number; changes: number }> {
  // An export a kept one's members are layered on goes once that one has gone: a chain goes one layer a statement.
  let exportsForgotten = 0;
  for (let layer = 0; layer <= MAX_MEMBER_LAYERS; layer++) {
    const pass = await pool.query(
      `WITH forgotten AS (
         UPDATE exports e SET members_forgotten_at = now()
          WHERE e.members_forgotten_at IS NULL
            AND (e.status = 'failed'
                 OR (e.status = 'ready'
                     AND e.finished_at < now() - make_interval(days => $1)
                     AND EXISTS (SELECT 1 FROM exports n WHERE n.segment_id = e.segment_id AND n.status = 'ready' AND n.created_at > e.created_at)
                     AND NOT EXISTS (SELECT 1 FROM exports u WHERE u.changes_since = e.id AND u.status IN ('queued', 'running'))
                     -- A layer of a kept export's members goes only after it (the next statement).
                     AND NOT EXISTS (SELECT 1 FROM exports k WHERE k.id <> e.id AND k.members_forgotten_at IS NULL AND k.status <> 'failed'
                                                               AND e.id = ANY (k.member_layers))))
         RETURNING e.id),
       dropped AS (DELETE FROM export_members m USING forgotten f WHERE m.export_id = f.id),
       dropped_changes AS (DELETE FROM export_member_changes c USING forgotten f WHERE c.export_id = f.id)
       SELECT count(*)::int AS n FROM forgotten`,
      [retentionDays],
    );
    const n = (pass.rows[0] as { n: number }).n;
    exportsForgotten += n;
    if (n === 0) break;
  }
  // Whatever export is kept, no tombstone outlives TOMBSTONE_RETENTION_DAYS: a base older than that is refused
  // (`BASE_IS_RECENT`).
  const tombstones = await pool.query(
    `DELETE FROM profile_tombstones t
      WHERE t.deleted_at < now() - make_interval(days => $1)
         OR t.deleted_at < COALESCE((SELECT min(e.created_at) FROM exports e
                                      WHERE e.workspace_id = t.workspace_id AND e.status <> 'failed' AND e.members_forgotten_at IS NULL),
                                    now()) - interval '1 day'`,
    [tombstoneDays],
  );
  // Per workspace, so that one workspace's long-kept base does not keep every other workspace's log. (Workspaces are
  // never deleted by the service; rows of one deleted by hand stay until deleted the same way.)
  const changes = await pool.query(
    `WITH bounds AS (
       SELECT w.id AS workspace_id,
              LEAST((SELECT min(pg_snapshot_xmin(d.snapshot)) FROM exports e JOIN export_shards_done d ON d.export_id = e.id
                      WHERE e.workspace_id = w.id AND e.status <> 'failed' AND e.members_forgotten_at IS NULL AND d.snapshot IS NOT NULL),
                    (SELECT min(e.created_xmin) FROM exports e WHERE e.workspace_id = w.id AND e.status IN ('queued', 'running')),
                    pg_snapshot_xmin(pg_current_snapshot())) AS bound
         FROM workspaces w)
     DELETE FROM profile_changes c USING bounds b WHERE c.workspace_id = b.workspace_id AND c.xid < b.bound`,
  );
  return { exports: exportsForgotten, tombstones: tombstones.rowCount ?? 0, changes: changes.rowCount ?? 0 };
}
