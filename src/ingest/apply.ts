import type { PoolClient } from '../db/pool.js';
import type { Logger } from '../logger.js';
import type { Identity, TrackAttributes, TrackObjects } from './types.js';

/**
 * The set-based apply: many requests' (or an import batch's) objects in one transaction, in a fixed number of
 * statements whatever the batch size. Objects are resolved to profiles by identifier, aggregated per profile (and per
 * event name) in memory, then written with one UPDATE: `ON CONFLICT` and `UPDATE ... FROM` both refuse to touch
 * one row twice in a statement, and one row per profile is also what makes a batch cheap.
 */

export interface WorkspaceObjects {
  workspaceId: string;
  objects: TrackObjects;
}

export interface ApplyResult {
  events: number;
  purchases: number;
  attributes: number;
  /** Objects whose user does not exist and may not be created (their identifier matched no profile). */
  unmatched: number;
  profilesCreated: number;
}

interface Counts {
  first: string;
  last: string;
  count: number;
}

interface ProfileChange {
  events?: Map<string, Counts>;
  purchases?: Map<string, Counts>;
  revenue?: number;
  attributes?: TrackAttributes[];
}

const YIELD_EVERY = 500;
export const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));

/** What the merge needs of a profile, read while resolving identities. */
interface CurrentRow {
  id: number;
  email: string | null;
  times: Record<string, string> | null;
}

/**
 * Takes the whole of each workspace's ingestion: every partition's batches wait until this transaction ends. For
 * writers of profiles outside ingestion (alias renames, email states) that would otherwise deadlock with a batch
 * updating the same profiles in another order.
 */
export async function lockWorkspaces(client: PoolClient, workspaceIds: string[]): Promise<void> {
  // One statement per workspace, in a fixed order: the order of lock calls inside one statement is not guaranteed.
  for (const ws of [...new Set(workspaceIds)].sort()) {
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`ces-ingest:${ws}`]);
  }
}

/**
 * Serializes ingestion batches of one partition of each workspace (src/ingest/partitions.ts), while batches of the
 * other partitions go on: a shared hold on the workspace's lock (which `lockWorkspaces` takes whole) and the
 * partition's own lock.
 */
export async function lockIngestPartition(client: PoolClient, workspaceIds: string[], part: number): Promise<void> {
  for (const ws of [...new Set(workspaceIds)].sort()) {
    await client.query('SELECT pg_advisory_xact_lock_shared(hashtextextended($1, 0))', [`ces-ingest:${ws}`]);
    await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`ces-ingest:${ws}:${part}`]);
  }
}

/**
 * Runs a batch transaction again when PostgreSQL broke a deadlock by aborting it. Batches of different partitions
 * can lock the same profile only when one user is named by two identifier types, in an order of their own; the
 * aborted transaction rolled back whole (its staged rows or import position included), so running it again applies
 * it exactly once.
 */
export async function retryOnDeadlock<T>(run: () => Promise<T>, log: Logger, attempts = 5): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await run();
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || attempt >= attempts) throw err;
      log.warn({ err, attempt }, 'ingestion batch chosen as a deadlock victim; applying it again');
    }
  }
}

/** The wal_compression value this role may set for its batches (null: none), found once per process. */
let batchWalCompression: Promise<string | null> | undefined;

async function walCompressionFor(client: PoolClient): Promise<string | null> {
  // has_parameter_privilege (PostgreSQL 15) tells whether this role may SET the superuser-only parameter: a
  // superuser, or a role granted `SET ON PARAMETER wal_compression`. Asked so that a refusal never aborts a batch.
  const version = await client.query<{ v: number }>(`SELECT current_setting('server_version_num')::int AS v`);
  if (version.rows[0]!.v < 150000) return null;
  const { rows } = await client.query<{ allowed: boolean; values: string[] | null }>(
    `SELECT has_parameter_privilege('wal_compression', 'SET') AS allowed, enumvals AS values FROM pg_settings WHERE name = 'wal_compression'`,
  );
  const r = rows[0];
  if (!r?.allowed) return null;
  return r.values?.includes('lz4') ? 'lz4' : 'on';
}

/**
 * Session settings of a transaction that applies a batch (a staging drain or an import chunk), which writes tens of
 * megabytes of WAL, mostly full-page images of the profile pages it is first to touch after a checkpoint:
 * - wal_compression, where the role may set it: compressing those images (lz4, else pglz) shrinks the WAL that
 *   every acknowledgement's commit must flush before it (acknowledgements mostly wait on that flush, IO:WALSync;
 *   what it saved is in BENCHMARKS.md);
 * - no waiting for the commit's flush: the batch's inputs (staged rows, an import's position) change in the same
 *   transaction, so a crash that loses the commit loses them with it and the batch is applied again, once.
 */
export async function tuneBatchTransaction(client: PoolClient): Promise<void> {
  // A batch's update rows (megabytes of JSON) would otherwise spill to temporary files at the default work_mem.
  await client.query(`SET LOCAL synchronous_commit = off; SET LOCAL work_mem = '128MB'`);
  batchWalCompression ??= walCompressionFor(client).catch(() => null);
  const compression = await batchWalCompression;
  if (compression) await client.query(`SET LOCAL wal_compression = ${compression}`);
}

interface Wanted {
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
class Identities {
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
 * creates profiles for unknown external_ids that may be created.
 */
async function resolveIdentities(client: PoolClient, wanted: Identities, current: Map<number, CurrentRow>): Promise<number> {
  const byWorkspace = new Map<string, Wanted[]>();
  for (const w of wanted.all) {
    const list = byWorkspace.get(w.ws);
    if (list) list.push(w);
    else byWorkspace.set(w.ws, [w]);
  }
  for (const [ws, list] of byWorkspace) {
    const values = (type: Identity['type']) => list.filter((w) => w.identity.type === type).map((w) => (w.identity as { value: string }).value);
    const aliases = list.flatMap((w) => (w.identity.type === 'user_alias' ? [w.identity] : []));
    // An email may be on several profiles: the most recently updated one is the user (as the public API does).
    const cols = 'p.id, p.email, p.attribute_times AS times';
    const { rows } = await client.query<CurrentRow & { t: string; k: string; l: string | null }>(
      `SELECT 'e' AS t, p.external_id AS k, NULL AS l, ${cols} FROM profiles p WHERE p.workspace_id = $1 AND p.external_id = ANY($2::text[])
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
      [ws, values('external_id'), values('service_id'), values('email'), aliases.map((a) => a.label), aliases.map((a) => a.name)],
    );
    for (const r of rows) {
      const identity: Identity =
        r.t === 'a'
          ? { type: 'user_alias', label: r.l!, name: r.k }
          : { type: r.t === 'e' ? 'external_id' : r.t === 's' ? 'service_id' : 'email', value: r.k };
      const w = wanted.find(ws, identity);
      if (w) w.profileId = r.id;
      current.set(r.id, { id: r.id, email: r.email, times: r.times });
    }
  }

  const toCreate = wanted.all.filter((w) => w.profileId === undefined && w.create);
  if (toCreate.length === 0) return 0;
  const ext = (w: Wanted) => (w.identity as { value: string }).value;
  const claim = (rows: (CurrentRow & { workspace_id: string; external_id: string })[]) => {
    for (const r of rows) {
      wanted.find(r.workspace_id, { type: 'external_id', value: r.external_id })!.profileId = r.id;
      current.set(r.id, { id: r.id, email: r.email, times: r.times });
    }
  };
  // service_id: 24 hex digits of a random (v4) UUID; random_bucket uniform over 0..9999.
  const created = await client.query<CurrentRow & { workspace_id: string; external_id: string }>(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket)
     SELECT i.ws, left(replace(gen_random_uuid()::text, '-', ''), 24), i.v, floor(random() * 10000)::int
       FROM unnest($1::uuid[], $2::text[]) AS i(ws, v)
     ON CONFLICT (workspace_id, external_id) WHERE external_id IS NOT NULL DO NOTHING
     RETURNING id, workspace_id, external_id, NULL AS email, '{}'::jsonb AS times`,
    [toCreate.map((w) => w.ws), toCreate.map(ext)],
  );
  claim(created.rows);
  // A writer outside ingestion (which holds no workspace lock) created some of them meanwhile: read those.
  const raced = toCreate.filter((w) => w.profileId === undefined);
  if (raced.length > 0) {
    const again = await client.query<CurrentRow & { workspace_id: string; external_id: string }>(
      `SELECT p.id, p.workspace_id, p.external_id, p.email, p.attribute_times AS times FROM unnest($1::uuid[], $2::text[]) AS i(ws, v)
         JOIN profiles p ON p.workspace_id = i.ws AND p.external_id = i.v`,
      [raced.map((w) => w.ws), raced.map(ext)],
    );
    claim(again.rows);
  }
  return created.rowCount ?? 0;
}

function addCount(map: Map<string, Counts>, name: string, time: string, n: number): void {
  const c = map.get(name);
  if (!c) map.set(name, { first: time, last: time, count: n });
  else {
    if (time < c.first) c.first = time;
    if (time > c.last) c.last = time;
    c.count += n;
  }
}

/** A batch's aggregates as stored: an object keyed by name, each value the whole {name, first, last, count} entry. */
const countsJson = (map: Map<string, Counts>) => {
  // No prototype: an event named "__proto__" is a key like any other.
  const byName = Object.create(null) as Record<string, Counts & { name: string }>;
  for (const [name, c] of map) byName[name] = { name, first: c.first, last: c.last, count: c.count };
  return byName;
};

/**
 * SQL merging a batch's {name: {name, first, last, count}} aggregates into the stored ones (migration 0100): first is
 * the earliest, last the latest, counts add, new names join. Only the batch's names are looked up and rebuilt; the
 * stored entries are carried over by the concatenation. (As arrays sorted by name, every stored entry was taken
 * apart, joined, sorted and rebuilt per profile: twice the time over a batch.) PostgreSQL does it (rather than Node)
 * because the process applying batches may also be answering /users/track, and because the stored entries then
 * never travel.
 */
const mergeCounts = (stored: string, added: string) => `${stored} || (
    SELECT coalesce(jsonb_object_agg(n.key, CASE WHEN o.e IS NULL THEN n.value
             ELSE jsonb_build_object('name', n.key,
                                     'first', LEAST(o.e->>'first' COLLATE "C", n.value->>'first' COLLATE "C"),
                                     'last', GREATEST(o.e->>'last' COLLATE "C", n.value->>'last' COLLATE "C"),
                                     'count', coalesce((o.e->>'count')::bigint, 0) + (n.value->>'count')::bigint) END), '{}')
      FROM jsonb_each(${added}) AS n CROSS JOIN LATERAL (SELECT ${stored}->n.key AS e) AS o)`;

/** Standard columns an attribute may set, with the SQL that reads the value from the `std` object. */
const STANDARD_COLUMNS: Record<string, string> = {
  first_name: "u.std->>'first_name'",
  last_name: "u.std->>'last_name'",
  email: "u.std->>'email'",
  dob: "(u.std->>'dob')::date",
  home_city: "u.std->>'home_city'",
  country: "u.std->>'country'",
  phone: "u.std->>'phone'",
  language: "u.std->>'language'",
  time_zone: "u.std->>'time_zone'",
  gender: "u.std->>'gender'",
  email_subscribe: "u.std->>'email_subscribe'",
  push_subscribe: "u.std->>'push_subscribe'",
  attributed_campaign: "u.std->>'attributed_campaign'",
  attributed_source: "u.std->>'attributed_source'",
  attributed_adgroup: "u.std->>'attributed_adgroup'",
  attributed_ad: "u.std->>'attributed_ad'",
  last_coordinates:
    "CASE WHEN jsonb_typeof(u.std->'last_coordinates') = 'array' THEN ARRAY[(u.std->'last_coordinates'->>0)::float8, (u.std->'last_coordinates'->>1)::float8] END",
};

/**
 * Whether the batch's time for an attribute (a key of u.times) is at least the time stored with the row as the
 * UPDATE finds it. The batch decided its values from the row as read while resolving identities; a batch of
 * another partition (the same user named by another identifier) may have committed a newer value since, and under
 * READ COMMITTED the UPDATE sees that row version, so the stored value then stays.
 */
const newer = (field: string) => `(u.times->>(${field})) COLLATE "C" >= coalesce(p.attribute_times->>(${field}), '') COLLATE "C"`;

const UPDATE_SQL = `
UPDATE profiles p SET
  custom_events = CASE WHEN u.ev IS NULL THEN p.custom_events ELSE ${mergeCounts('p.custom_events', 'u.ev')} END,
  purchases = CASE WHEN u.pu IS NULL THEN p.purchases ELSE ${mergeCounts('p.purchases', 'u.pu')} END,
  total_revenue = CASE WHEN u.rev IS NULL THEN p.total_revenue ELSE coalesce(p.total_revenue, 0) + u.rev END,
  ${Object.entries(STANDARD_COLUMNS)
    .map(([col, expr]) => `${col} = CASE WHEN u.std ? '${col}' AND ${newer(`'${col}'`)} THEN ${expr} ELSE p.${col} END`)
    .join(',\n  ')},
  custom_attributes = CASE WHEN u.cset IS NULL AND u.cdel IS NULL THEN p.custom_attributes
    ELSE (p.custom_attributes || coalesce((SELECT jsonb_object_agg(c.key, c.value) FROM jsonb_each(u.cset) AS c
                                            WHERE ${newer(`'custom_attributes.' || c.key`)}), '{}'))
         - coalesce((SELECT array_agg(d) FROM unnest(u.cdel) AS d WHERE ${newer(`'custom_attributes.' || d`)}), '{}'::text[]) END,
  attribute_times = CASE WHEN u.times IS NULL THEN p.attribute_times
    ELSE p.attribute_times || coalesce((SELECT jsonb_object_agg(t.key, t.value) FROM jsonb_each_text(u.times) AS t
                                         WHERE t.value COLLATE "C" >= coalesce(p.attribute_times->>t.key, '') COLLATE "C"), '{}') END,
  updated_at = now()
FROM jsonb_to_recordset($1::jsonb) AS u(id bigint, ev jsonb, pu jsonb, rev float8, std jsonb, cset jsonb, cdel text[], times jsonb)
WHERE p.id = u.id`;

interface UpdateRow {
  id: number;
  ev?: unknown;
  pu?: unknown;
  rev?: number;
  std?: Record<string, unknown>;
  cset?: Record<string, unknown>;
  cdel?: string[];
  times?: Record<string, string>;
}

/**
 * Last-write-wins per attribute: a value is written when its object's time is at least the time of the value
 * stored (profiles.attribute_times); within the batch the later object wins, ties going to the later one sent.
 * Returns the email address the winning values tie to the user, if they tie a new one.
 */
function decideAttributes(objects: TrackAttributes[], cur: CurrentRow, row: UpdateRow): string | null {
  // Stable sort: equal times keep the order they were sent in.
  objects.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  const std: Record<string, unknown> = {};
  const custom: Record<string, unknown> = {};
  const times: Record<string, string> = {};
  const stored = cur.times ?? {};
  for (const o of objects) {
    for (const [field, value] of Object.entries(o.standard)) {
      if (o.at >= (stored[field] ?? '')) {
        std[field] = value;
        times[field] = o.at;
      }
    }
    for (const [name, value] of Object.entries(o.custom)) {
      const field = `custom_attributes.${name}`;
      if (o.at >= (stored[field] ?? '')) {
        custom[name] = value;
        times[field] = o.at;
      }
    }
  }
  if (Object.keys(times).length === 0) return null;
  if (Object.keys(std).length > 0) row.std = std;
  const set = Object.entries(custom).filter(([, v]) => v !== null);
  const del = Object.entries(custom).filter(([, v]) => v === null).map(([k]) => k);
  if (set.length > 0) row.cset = Object.fromEntries(set);
  if (del.length > 0) row.cdel = del;
  row.times = times;
  // The object tied an address to this user: a state stored for the address applies, unless one was set too.
  const newEmail = typeof std.email === 'string' ? std.email.toLowerCase() : null;
  return newEmail !== null && newEmail !== cur.email?.toLowerCase() && !('email_subscribe' in std) ? newEmail : null;
}

/**
 * Applies validated objects to profiles inside the caller's transaction, which must hold `lockIngestPartition`
 * (or `lockWorkspaces`) for every workspace of the batch. Last-write-wins is decided here from the values read
 * while resolving identities, and checked again by the UPDATE against the row it locks (`newer` above).
 */
export async function applyObjects(client: PoolClient, batches: WorkspaceObjects[]): Promise<ApplyResult> {
  const result: ApplyResult = { events: 0, purchases: 0, attributes: 0, unmatched: 0, profilesCreated: 0 };
  const wanted = new Identities();
  // The entry of each object's identity, in the order the loop below walks the objects.
  const targets: Wanted[] = [];
  for (const { workspaceId: ws, objects } of batches) {
    for (const o of objects.events) targets.push(wanted.want(ws, o.identity, o.create));
    for (const o of objects.purchases) targets.push(wanted.want(ws, o.identity, o.create));
    for (const o of objects.attributes) targets.push(wanted.want(ws, o.identity, o.create));
  }
  if (wanted.all.length === 0) return result;
  const current = new Map<number, CurrentRow>();
  result.profilesCreated = await resolveIdentities(client, wanted, current);

  const changes = new Map<number, ProfileChange>();
  let next = 0;
  const changeOfNext = (): ProfileChange | undefined => {
    const id = targets[next++]!.profileId;
    if (id === undefined) {
      result.unmatched++;
      return undefined;
    }
    let c = changes.get(id);
    if (!c) changes.set(id, (c = {}));
    return c;
  };
  for (const { objects } of batches) {
    for (const e of objects.events) {
      const c = changeOfNext();
      if (!c) continue;
      addCount((c.events ??= new Map()), e.name, e.time, 1);
      result.events++;
    }
    for (const p of objects.purchases) {
      const c = changeOfNext();
      if (!c) continue;
      // A purchase of quantity n counts as n purchases, as the public API records it.
      addCount((c.purchases ??= new Map()), p.product_id, p.time, p.quantity);
      c.revenue = (c.revenue ?? 0) + p.price * p.quantity;
      result.purchases++;
    }
    for (const a of objects.attributes) {
      const c = changeOfNext();
      if (!c) continue;
      (c.attributes ??= []).push(a);
      result.attributes++;
    }
  }
  if (changes.size === 0) return result;

  // The merge runs in the process that also answers /users/track (`ces start`): it yields every few hundred
  // profiles so that acknowledgements are not held behind a whole batch, and serializes row by row for the same reason.
  const parts: string[] = [];
  const tied = { ids: [] as number[], emails: [] as string[] };
  let sinceYield = 0;
  // In id order, the UPDATE walks the table (and its pages in the buffer cache) forward instead of at random.
  for (const id of [...changes.keys()].sort((a, b) => a - b)) {
    const c = changes.get(id)!;
    if (++sinceYield === YIELD_EVERY) {
      sinceYield = 0;
      await yieldToEventLoop();
    }
    const cur = current.get(id)!;
    const row: UpdateRow = { id: cur.id };
    if (c.events) row.ev = countsJson(c.events);
    if (c.purchases) {
      row.pu = countsJson(c.purchases);
      row.rev = c.revenue;
    }
    const tiedEmail = c.attributes ? decideAttributes(c.attributes, cur, row) : null;
    if (tiedEmail !== null) {
      tied.ids.push(cur.id);
      tied.emails.push(tiedEmail);
    }
    // Attributes that all lost to newer stored values leave nothing to write.
    if (row.ev || row.pu || row.times) parts.push(JSON.stringify(row));
  }
  if (parts.length > 0) await client.query(UPDATE_SQL, [`[${parts.join(',')}]`]);
  if (tied.ids.length > 0) {
    // Only where the address was written: a newer address from another partition's batch keeps its own state.
    await client.query(
      `UPDATE profiles p SET email_subscribe = s.state
         FROM unnest($1::bigint[], $2::text[]) AS t(id, email), email_subscriptions s
        WHERE p.id = t.id AND lower(p.email) = t.email AND s.workspace_id = p.workspace_id AND s.email = t.email`,
      [tied.ids, tied.emails],
    );
  }
  return result;
}
