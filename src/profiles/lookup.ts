import type { Pool, PoolClient } from '../db/pool.js';

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

/** Per kind: the statement that finds the profiles of `$2` (values, or labels with `$3` names) in workspace `$1`. */
const CANDIDATE_SQL: Record<UserRef['kind'], string> = {
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
  email: `SELECT i.n::int AS n, ${CANDIDATE_COLUMNS} FROM unnest($2::text[]) WITH ORDINALITY AS i(v, n)
            JOIN profiles p ON p.workspace_id = $1 AND lower(p.email) = lower(i.v)`,
  phone: `SELECT i.n::int AS n, ${CANDIDATE_COLUMNS} FROM unnest($2::text[]) WITH ORDINALITY AS i(v, n)
            JOIN profiles p ON p.workspace_id = $1 AND p.phone = i.v`,
  // No index holds device ids (no ingestion path writes devices): this reads the workspace's profiles. docs/user-data.md.
  device_id: `SELECT i.n::int AS n, ${CANDIDATE_COLUMNS} FROM unnest($2::text[]) WITH ORDINALITY AS i(v, n)
                JOIN profiles p ON p.workspace_id = $1 AND p.devices @> jsonb_build_array(jsonb_build_object('device_id', i.v))`,
};

/**
 * Every profile each reference matches, in the references' order, most recently updated first: one profile for an
 * external_id, service_id or alias; any number for an email address, phone number or device id.
 */
export async function findCandidates(db: Db, workspaceId: string, refs: UserRef[]): Promise<Candidate[][]> {
  const found: Candidate[][] = refs.map(() => []);
  const kinds = [...new Set(refs.map((r) => r.kind))];
  for (const kind of kinds) {
    const positions = refs.flatMap((r, i) => (r.kind === kind ? [i] : []));
    const mine = positions.map((i) => refs[i]!);
    const params: unknown[] =
      kind === 'user_alias'
        ? [workspaceId, mine.map((r) => (r as { label: string }).label), mine.map((r) => (r as { name: string }).name)]
        : [workspaceId, mine.map((r) => (r as { value: string }).value)];
    const { rows } = await db.query<CandidateRow>(CANDIDATE_SQL[kind], params);
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
