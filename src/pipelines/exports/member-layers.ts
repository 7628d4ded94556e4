import { escapeLiteral } from 'pg';

/**
 * An export's member list, kept so that a later export can be relative to it (changes_since), in layers (migration
 * 0240): a full export records its members whole, one sorted bigint[] per random_bucket (export_members); a delta
 * records only the profiles whose membership it changed relative to its base (export_member_changes), and its
 * members are its own changes over its base's members. `member_layers` lists the exports that make up an export's
 * members, newest first, itself included; the last holds whole lists. A delta therefore records what changed, not
 * the segment; every MAX_MEMBER_LAYERS-th export of a chain records its members whole again, so that a lookup reads
 * at most that many layers and older exports can be forgotten.
 */

/** The most layers an export's members may span; the export that would make more records its members whole. */
export const MAX_MEMBER_LAYERS = 8;

/** The layers of an export as stored (exports from before migration 0240 have none recorded: they are whole). */
export function memberLayers(row: { id: string; member_layers: string[] | null }): string[] {
  return row.member_layers && row.member_layers.length > 0 ? row.member_layers : [row.id];
}

/** The layers of a new export relative to `base` (null for a full export). */
export function newMemberLayers(exportId: string, baseLayers: string[] | null): string[] {
  if (!baseLayers || baseLayers.length >= MAX_MEMBER_LAYERS) return [exportId];
  return [exportId, ...baseLayers];
}

/** Whether an export with these layers records its members whole (export_members) or as changes. */
export function recordsWholeMembers(layers: string[]): boolean {
  return layers.length === 1;
}

const uuidArray = (ids: string[]) => `ARRAY[${ids.map((id) => `${escapeLiteral(id)}::uuid`).join(', ')}]::uuid[]`;

/**
 * Whether the export with `layers` held profile `<id>` of bucket `<bucket>`, as one SQL expression: the newest diff
 * layer naming the profile (one index probe), else the whole layer's array for the bucket (one lookup by key).
 */
export function heldBy(layers: string[], bucket: string, id: string): string {
  const whole = `EXISTS (SELECT 1 FROM export_members m WHERE m.export_id = ${escapeLiteral(layers.at(-1)!)}::uuid AND m.random_bucket = ${bucket} AND ${id} = ANY (m.profile_ids))`;
  const diffs = layers.slice(0, -1);
  if (diffs.length === 0) return whole;
  return `COALESCE((SELECT d.is_member FROM export_member_changes d WHERE d.profile_id = ${id} AND d.export_id = ANY (${uuidArray(diffs)})
                     ORDER BY array_position(${uuidArray(diffs)}, d.export_id) LIMIT 1),
                   ${whole})`;
}

/**
 * The members of the export with `layers` in [bucketFrom, bucketTo), one row (random_bucket, id) each: the whole
 * layer's members that no diff layer names, and the profiles whose newest diff says they are members. Its joins are
 * between these sets and want hashing (the shard reads with nested loops off).
 */
export function heldMembers(layers: string[], bucketFrom: number, bucketTo: number): string {
  const range = (column: string) => `${column} >= ${Math.trunc(bucketFrom)} AND ${column} < ${Math.trunc(bucketTo)}`;
  const whole = `SELECT m.random_bucket, unnest(m.profile_ids) AS id FROM export_members m
                  WHERE m.export_id = ${escapeLiteral(layers.at(-1)!)}::uuid AND ${range('m.random_bucket')}`;
  const diffs = layers.slice(0, -1);
  if (diffs.length === 0) return whole;
  const named = `SELECT DISTINCT ON (d.profile_id) d.profile_id, d.random_bucket, d.is_member FROM export_member_changes d
                  WHERE d.export_id = ANY (${uuidArray(diffs)}) AND ${range('d.random_bucket')}
                  ORDER BY d.profile_id, array_position(${uuidArray(diffs)}, d.export_id)`;
  return `SELECT w.random_bucket, w.id FROM (${whole}) w
           WHERE NOT EXISTS (SELECT 1 FROM export_member_changes d WHERE d.export_id = ANY (${uuidArray(diffs)}) AND d.profile_id = w.id)
          UNION ALL
          SELECT n.random_bucket, n.profile_id FROM (${named}) n WHERE n.is_member`;
}

/** The members in [bucketFrom, bucketTo) now, whole: rows (export_id, random_bucket, sorted ids) for `export_members`. */
export function wholeMembersSelect(
  exportId: string,
  workspaceId: string,
  predicate: string,
  bucketFrom: number,
  bucketTo: number,
): string {
  return `SELECT ${escapeLiteral(exportId)}::uuid, p.random_bucket, array_agg(p.id ORDER BY p.id)
    FROM profiles p
   WHERE p.workspace_id = ${escapeLiteral(workspaceId)}::uuid
     AND p.random_bucket >= ${Math.trunc(bucketFrom)} AND p.random_bucket < ${Math.trunc(bucketTo)}
     AND (${predicate})
   GROUP BY p.random_bucket`;
}

/**
 * The membership changes in [bucketFrom, bucketTo) relative to the base with `baseLayers`, found by comparing every
 * member now with every member the base held: rows (export_id, profile_id, random_bucket, is_member) for
 * `export_member_changes`. The full-compare method's way; the changes-log method names its changes from the log.
 */
export function comparedMembershipChangesSelect(
  exportId: string,
  baseLayers: string[],
  workspaceId: string,
  predicate: string,
  bucketFrom: number,
  bucketTo: number,
): string {
  return `SELECT ${escapeLiteral(exportId)}::uuid, COALESCE(n.id, b.id), COALESCE(n.random_bucket, b.random_bucket), n.id IS NOT NULL
    FROM (SELECT p.random_bucket, p.id FROM profiles p
           WHERE p.workspace_id = ${escapeLiteral(workspaceId)}::uuid
             AND p.random_bucket >= ${Math.trunc(bucketFrom)} AND p.random_bucket < ${Math.trunc(bucketTo)}
             AND (${predicate})) n
    FULL JOIN (${heldMembers(baseLayers, bucketFrom, bucketTo)}) b ON b.id = n.id
   WHERE n.id IS NULL OR b.id IS NULL`;
}
