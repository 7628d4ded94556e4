import type { Pool, PoolClient } from '../platform/db/pool.js';

/**
 * Finding profiles by the identifiers the user-data endpoints take: a primary or deprecated external_id, a service_id,
 * a user alias, an email address or a phone number (with Braze's `prioritization` when several profiles share one),
 * a device id. Set-based: one statement per kind of identifier, whatever the number asked.
 */

export const PRIORITIZATIONS = [
  'identified',
  'unidentified',
  'most_recently_updated',
  'least_recently_updated',
] as const;
export type Prioritization = (typeof PRIORITIZATIONS)[number];

export type UserRef =
  | { kind: 'external_id'; value: string }
  | { kind: 'service_id'; value: string }
  | { kind: 'user_alias'; label: string; name: string }
  /** Addresses are compared lower-cased; `prioritization` picks one of several profiles sharing the address. */
  | { kind: 'email'; value: string; prioritization?: Prioritization[] }
  | { kind: 'phone'; value: string; prioritization?: Prioritization[] }
  | { kind: 'device_id'; value: string };

/** A profile a reference matched, with what prioritization reads. */
export interface Candidate {
  id: number;
  identified: boolean;
  updatedAt: Date;
}

type Db = Pick<Pool | PoolClient, 'query'>;

/** How a reference reads in `invalid_user_ids` and in logs of refusals: its value (an alias as `label:name`). */
export function refText(ref: UserRef): string {
  return ref.kind === 'user_alias' ? `${ref.label}:${ref.name}` : ref.value;
}

interface CandidateRow {
  n: number;
  id: number;
  identified: boolean;
  updated_at: Date;
}

const CANDIDATE_COLUMNS = 'p.id, p.external_id IS NOT NULL AS identified, p.updated_at';

/** Kinds an identifier of which may name any number of profiles, and how a profile `p` matches the value `i.v`. */
const SHARED_MATCH = {
  email: 'lower(p.email) = lower(i.v)',
  phone: 'p.phone = i.v',
  // The expression of the index profiles_device_ids (migration 0310), so that the index serves it.
  device_id: `jsonb_path_query_array(p.devices, '$[*].device_id'::jsonpath) @> jsonb_build_array(i.v)`,
} as const;
type SharedKind = keyof typeof SHARED_MATCH;
const isShared = (kind: UserRef['kind']): kind is SharedKind => kind in SHARED_MATCH;

/** Per kind whose identifier names at most one profile: the statement that finds them in workspace `$1`. */
const SINGLE_SQL: Record<Exclude<UserRef['kind'], SharedKind>, string> = {
  external_id: `SELECT i.n::int AS n, ${CANDIDATE_COLUMNS} FROM unnest($2::text[]) WITH ORDINALITY AS i(v, n)
                  JOIN profiles p ON p.workspace_id = $1 AND p.external_id = i.v
                UNION ALL
                SELECT i.n::int, ${CANDIDATE_COLUMNS} FROM unnest($2::text[]) WITH ORDINALITY AS i(v, n)
                  JOIN profile_external_ids x ON x.workspace_id = $1 AND x.external_id = i.v JOIN profiles p ON p.id = x.profile_id`,
  service_id: `SELECT i.n::int AS n, ${CANDIDATE_COLUMNS} FROM unnest($2::text[]) WITH ORDINALITY AS i(v, n)
                 JOIN profiles p ON p.workspace_id = $1 AND p.service_id = i.v`,
  user_alias: `SELECT i.n::int AS n, ${CANDIDATE_COLUMNS} FROM unnest($2::text[], $3::text[]) WITH ORDINALITY AS i(label, name, n)
                 JOIN profile_aliases a ON a.workspace_id = $1 AND a.alias_label = i.label AND a.alias_name = i.name
                 JOIN profiles p ON p.id = a.profile_id`,
};

/**
 * The statement that finds the profiles of `$2` (values, or labels with `$3` names) in workspace `$1`. With `limit`,
 * an identifier that many profiles share gives at most `$3` of them, the most recently updated, read in that order
 * (the rest are never fetched).
 */
export function candidatesSql(kind: UserRef['kind'], options: { limit?: boolean } = {}): string {
  if (!isShared(kind)) return SINGLE_SQL[kind];
  const values = 'FROM unnest($2::text[]) WITH ORDINALITY AS i(v, n)';
  if (!options.limit)
    return `SELECT i.n::int AS n, ${CANDIDATE_COLUMNS} ${values} JOIN profiles p ON p.workspace_id = $1 AND ${SHARED_MATCH[kind]}`;
  return `SELECT i.n::int AS n, c.id, c.identified, c.updated_at ${values}
            CROSS JOIN LATERAL (SELECT ${CANDIDATE_COLUMNS} FROM profiles p WHERE p.workspace_id = $1 AND ${SHARED_MATCH[kind]}
                                 ORDER BY p.updated_at DESC, p.id DESC LIMIT $3) c`;
}

/**
 * Every profile each reference matches, in the references' order, most recently updated first: one profile for an
 * external_id, service_id or alias; any number for an email address, phone number or device id, or at most
 * `limitPerRef` of them (the most recently updated) when it is given.
 */
export async function findCandidates(
  db: Db,
  workspaceId: string,
  refs: UserRef[],
  options: { limitPerRef?: number } = {},
): Promise<Candidate[][]> {
  const found: Candidate[][] = refs.map(() => []);
  const kinds = [...new Set(refs.map((r) => r.kind))];
  for (const kind of kinds) {
    const positions = refs.flatMap((r, i) => (r.kind === kind ? [i] : []));
    const mine = positions.map((i) => refs[i]!);
    const limit = isShared(kind) ? options.limitPerRef : undefined;
    const params: unknown[] =
      kind === 'user_alias'
        ? [workspaceId, mine.map((r) => (r as { label: string }).label), mine.map((r) => (r as { name: string }).name)]
        : [workspaceId, mine.map((r) => (r as { value: string }).value), ...(limit === undefined ? [] : [limit])];
    const { rows } = await db.query<CandidateRow>(candidatesSql(kind, { limit: limit !== undefined }), params);
    for (const r of rows) {
      const list = found[positions[r.n - 1]!]!;
      if (!list.some((c) => c.id === r.id)) list.push({ id: r.id, identified: r.identified, updatedAt: r.updated_at });
    }
  }
  for (const list of found) list.sort((a, b) => b.updatedAt.getTime() - a.updatedAt.getTime() || b.id - a.id);
  return found;
}

/**
 * The one profile a reference names, or why not: `missing` when none matches; `ambiguous` when several do and the
 * prioritization does not narrow them to one ("if more than one user matches from a prioritization, [nothing]
 * occurs", as the public API has it). Without a prioritization an email or phone must match exactly one profile.
 */
export function pickOne(
  candidates: Candidate[],
  prioritization: Prioritization[] = [],
): { id: number } | 'missing' | 'ambiguous' {
  let set = candidates;
  for (const rule of prioritization) {
    if (set.length <= 1) break;
    if (rule === 'identified' || rule === 'unidentified') {
      const narrowed = set.filter((c) => c.identified === (rule === 'identified'));
      if (narrowed.length > 0) set = narrowed;
    } else {
      const newest = rule === 'most_recently_updated';
      // Candidates come most recently updated first.
      set = [newest ? set[0]! : set[set.length - 1]!];
    }
  }
  if (set.length === 0) return 'missing';
  return set.length === 1 ? { id: set[0]!.id } : 'ambiguous';
}

/** The one profile of each reference (see `pickOne`), in order. */
export async function resolveOne(
  db: Db,
  workspaceId: string,
  refs: UserRef[],
): Promise<Array<{ id: number } | 'missing' | 'ambiguous'>> {
  const candidates = await findCandidates(db, workspaceId, refs);
  return refs.map((ref, i) =>
    pickOne(candidates[i]!, ref.kind === 'email' || ref.kind === 'phone' ? ref.prioritization : undefined),
  );
}

/** The service_id of each profile id found in the workspace (ids of other workspaces or gone are left out). */
export async function serviceIdsOf(db: Db, workspaceId: string, ids: number[]): Promise<Map<number, string>> {
  const { rows } = await db.query<{ id: number; service_id: string }>(
    'SELECT id, service_id FROM profiles WHERE workspace_id = $1 AND id = ANY($2::bigint[])',
    [workspaceId, ids],
  );
  return new Map(rows.map((r) => [r.id, r.service_id]));
}

/** Profile ids of the workspace's primary external_ids among those given (deprecated ones are not looked at). */
export async function idsByExternalId(
  db: Db,
  workspaceId: string,
  externalIds: string[],
): Promise<Map<string, number>> {
  const { rows } = await db.query<{ external_id: string; id: number }>(
    `SELECT external_id, id FROM profiles WHERE workspace_id = $1 AND external_id = ANY($2)`,
    [workspaceId, externalIds],
  );
  return new Map(rows.map((r) => [r.external_id, r.id]));
}
