import type { PoolClient } from '../platform/db/pool.js';
import { writeProfilesLogged } from './change-log.js';
import type { Identity } from './tracked-types.js';

/** Resolving a batch's objects to profiles by identifier, creating those that may be created. */

/** What the merge needs of a profile, read while resolving identities. */
export interface CurrentRow {
  id: number;
  email: string | null;
  times: Record<string, string> | null;
  /**
   * The profile's changed_xid as read (text), or null: the UPDATE trusts the decisions made from `times` only while
   * the row it locks still carries this value (nothing wrote it since the read).
   */
  seen: string | null;
  /** Its identifiers, for the event log; stable until the batch commits (renames and merges take its lock whole). */
  service_id: string;
  external_id: string | null;
}

export interface Wanted {
  ws: string;
  identity: Identity;
  create: boolean;
  profileId?: number;
}

const TYPE_INDEX = { external_id: 0, service_id: 1, email: 2, user_alias: 3 } as const;

/**
 * The batch's distinct identities, each with the profile it resolves to: a map per workspace and identifier type,
 * keyed by the identifier itself. (One string key per identity, built by concatenation, cost a new string and its
 * hashing on every lookup, twice per object: a third of the apply's time in Node.)
 */
export class Identities {
  private readonly maps = new Map<string, Map<string, Wanted>[]>();
  readonly all: Wanted[] = [];

  private mapOf(ws: string, identity: Identity): Map<string, Wanted> {
    let byType = this.maps.get(ws);
    if (!byType) this.maps.set(ws, (byType = [new Map(), new Map(), new Map(), new Map()]));
    return byType[TYPE_INDEX[identity.type]]!;
  }

  private static keyOf(identity: Identity): string {
    return identity.type === 'user_alias' ? `${identity.label}\u0000${identity.name}` : identity.value;
  }

  /** The entry of an identity, added when new; `create` once any object naming it may create the profile. */
  want(ws: string, identity: Identity, create: boolean): Wanted {
    const map = this.mapOf(ws, identity);
    const key = Identities.keyOf(identity);
    let w = map.get(key);
    if (!w) {
      map.set(key, (w = { ws, identity, create }));
      this.all.push(w);
    } else if (create) w.create = true;
    return w;
  }

  find(ws: string, identity: Identity): Wanted | undefined {
    return this.mapOf(ws, identity).get(Identities.keyOf(identity));
  }
}

/**
 * Resolves every distinct identity of the batch to a profile id (one statement per workspace in the batch), then
 * creates profiles for unknown external_ids that may be created. An external_id names a profile by its primary id or
 * by a deprecated one (POST /users/external_ids/rename); a deprecated id is never created anew.
 */
export async function resolveIdentities(
  client: PoolClient,
  wanted: Identities,
  current: Map<number, CurrentRow>,
): Promise<number> {
  const byWorkspace = new Map<string, Wanted[]>();
  for (const w of wanted.all) {
    const list = byWorkspace.get(w.ws);
    if (list) list.push(w);
    else byWorkspace.set(w.ws, [w]);
  }
  for (const [ws, list] of byWorkspace) await resolveInWorkspace(client, wanted, ws, list, current);
  return createProfiles(client, wanted, current);
}

/** What the merge reads of a profile (a CurrentRow), as columns of `profiles p`. */
const CURRENT_COLUMNS =
  'p.id, p.email, p.attribute_times AS times, p.changed_xid::text AS seen, p.service_id, p.external_id';
/** The CurrentRow of a result row that carries CURRENT_COLUMNS among others. */
const currentRow = (r: CurrentRow): CurrentRow => ({
  id: r.id,
  email: r.email,
  times: r.times,
  seen: r.seen,
  service_id: r.service_id,
  external_id: r.external_id,
});

/** Finds the profiles a workspace's identities name, in one statement, and reads what the merge needs of them. */
async function resolveInWorkspace(
  client: PoolClient,
  wanted: Identities,
  ws: string,
  list: Wanted[],
  current: Map<number, CurrentRow>,
): Promise<void> {
  const values = (type: Identity['type']) =>
    list.filter((w) => w.identity.type === type).map((w) => (w.identity as { value: string }).value);
  const aliases = list.flatMap((w) => (w.identity.type === 'user_alias' ? [w.identity] : []));
  // An email may be on several profiles: the most recently updated one is the user (as the public API does).
  const cols = CURRENT_COLUMNS;
  const { rows } = await client.query<CurrentRow & { t: string; k: string; l: string | null }>(
    `SELECT 'e' AS t, p.external_id AS k, NULL AS l, ${cols} FROM profiles p WHERE p.workspace_id = $1 AND p.external_id = ANY($2::text[])
     UNION ALL
     SELECT 'e', x.external_id, NULL, ${cols} FROM profile_external_ids x JOIN profiles p ON p.id = x.profile_id
      WHERE x.workspace_id = $1 AND x.external_id = ANY($2::text[])
     UNION ALL
     SELECT 's', p.service_id, NULL, ${cols} FROM profiles p WHERE p.workspace_id = $1 AND p.service_id = ANY($3::text[])
     UNION ALL
     (SELECT DISTINCT ON (lower(p.email)) 'm', lower(p.email), NULL, ${cols} FROM profiles p
       WHERE p.workspace_id = $1 AND lower(p.email) = ANY($4::text[]) ORDER BY lower(p.email), p.updated_at DESC, p.id DESC)
     UNION ALL
     SELECT 'a', a.alias_name, a.alias_label, ${cols}
       FROM unnest($5::text[], $6::text[]) AS i(label, name)
       JOIN profile_aliases a ON a.workspace_id = $1 AND a.alias_label = i.label AND a.alias_name = i.name
       JOIN profiles p ON p.id = a.profile_id`,
    [
      ws,
      values('external_id'),
      values('service_id'),
      values('email'),
      aliases.map((a) => a.label),
      aliases.map((a) => a.name),
    ],
  );
  for (const r of rows) {
    const identity: Identity =
      r.t === 'a'
        ? { type: 'user_alias', label: r.l!, name: r.k }
        : { type: r.t === 'e' ? 'external_id' : r.t === 's' ? 'service_id' : 'email', value: r.k };
    const w = wanted.find(ws, identity);
    if (w) w.profileId = r.id;
    current.set(r.id, currentRow(r));
  }
}

/** Creates the profiles of unresolved external_ids that may be created; returns how many this statement created. */
async function createProfiles(
  client: PoolClient,
  wanted: Identities,
  current: Map<number, CurrentRow>,
): Promise<number> {
  const toCreate = wanted.all.filter((w) => w.profileId === undefined && w.create);
  if (toCreate.length === 0) return 0;
  const ext = (w: Wanted) => (w.identity as { value: string }).value;
  const claim = (rows: (CurrentRow & { workspace_id: string; external_id: string })[]) => {
    for (const r of rows) {
      wanted.find(r.workspace_id, { type: 'external_id', value: r.external_id })!.profileId = r.id;
      current.set(r.id, currentRow(r));
    }
  };
  // service_id: 24 hex digits of a random (v4) UUID; random_bucket uniform over 0..9999.
  const created = await writeProfilesLogged<CurrentRow & { workspace_id: string; external_id: string }>(
    client,
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket)
     SELECT i.ws, left(replace(gen_random_uuid()::text, '-', ''), 24), i.v, floor(random() * 10000)::int
       FROM unnest($1::uuid[], $2::text[]) AS i(ws, v)
     ON CONFLICT (workspace_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
     RETURNING id, workspace_id, service_id, external_id, random_bucket, NULL AS email, '{}'::jsonb AS times,
               changed_xid::text AS seen`,
    [toCreate.map((w) => w.ws), toCreate.map(ext)],
  );
  claim(created.rows);
  // A writer outside ingestion (which holds no workspace lock) created some of them meanwhile: read those.
  const raced = toCreate.filter((w) => w.profileId === undefined);
  if (raced.length > 0) {
    const again = await client.query<CurrentRow & { workspace_id: string; external_id: string }>(
      `SELECT p.workspace_id, p.external_id, ${CURRENT_COLUMNS} FROM unnest($1::uuid[], $2::text[]) AS i(ws, v)
         JOIN profiles p ON p.workspace_id = i.ws AND p.external_id = i.v`,
      [raced.map((w) => w.ws), raced.map(ext)],
    );
    claim(again.rows);
  }
  return created.rowCount ?? 0;
}
