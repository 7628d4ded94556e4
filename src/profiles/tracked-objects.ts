import type { PoolClient } from '../platform/db/pool.js';
import { writeProfilesLoggedEach } from './change-log.js';
import { yieldToEventLoop } from '../platform/lib/event-loop.js';
import { Identities, resolveIdentities, type CurrentRow, type Wanted } from './identities.js';
import { eventIdSql, logEvents, prepareLog, type PreparedLog } from './event-log.js';
import {
  LOG_STATE_CHANGES,
  STANDARD_COLUMNS,
  updateSql,
  type UpdateRow,
  type UpdateShape,
} from './tracked-update-sql.js';
import type { EventEntry } from './event-log-types.js';
import { setGroupStates, type GroupStateChange } from './subscription-group-states.js';
import type { StateChangeSource } from './event-log-types.js';
import type { TrackAttributes, TrackObjects } from './tracked-types.js';

/**
 * The set-based apply: many requests' (or an import batch's) objects in one transaction, in a few statements: one
 * lookup, then one UPDATE per UPDATE_CHUNK profiles. Objects are resolved to profiles by identifier, aggregated per
 * profile (and per event name) in memory, then written with one row per profile: `ON CONFLICT` and `UPDATE ... FROM`
 * both refuse to touch one row twice in a statement, and one row per profile is also what makes a batch cheap.
 */

export interface WorkspaceObjects {
  workspaceId: string;
  objects: TrackObjects;
  /** What the attributes come from, as a subscription state they change is logged: /users/track's (default) or CDI. */
  source?: Extract<StateChangeSource, 'api' | 'cdi'>;
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
  /** Where the attributes come from (WorkspaceObjects.source). */
  source?: StateChangeSource;
}

const YIELD_EVERY = 500;

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

/** The object whose value of a standard field won (decideAttributes): the last, in time order, not older than stored. */
function winnerOf(objects: TrackAttributes[], field: string, stored: Record<string, string>): TrackAttributes {
  for (let i = objects.length - 1; i >= 0; i--) {
    const o = objects[i]!;
    if (field in o.standard && o.at >= (stored[field] ?? '')) return o;
  }
  throw new Error(`no object set ${field}`);
}

/**
 * Last-write-wins per attribute: a value is written when its object's time is at least the time of the value
 * stored (profiles.attribute_times); within the batch the later object wins, ties going to the later one sent.
 * Returns the email address the winning values tie to the user, if they tie a new one, with the object that tied it.
 */
function decideAttributes(
  objects: TrackAttributes[],
  cur: CurrentRow,
  row: UpdateRow,
  source: StateChangeSource,
): { email: string; by: TrackAttributes } | null {
  // Stable sort: equal times keep the order they were sent in. (Loops below over Object.keys, not Object.entries and
  // its array per entry: this runs once per profile of every batch, and was a tenth of a CDI sync's own time.)
  if (objects.length > 1) objects.sort((a, b) => (a.at < b.at ? -1 : a.at > b.at ? 1 : 0));
  const std: Record<string, unknown> = {};
  const custom: Record<string, unknown> = {};
  const times: Record<string, string> = {};
  const stored = cur.times ?? {};
  let anyStandard = false;
  let anyCustom = false;
  for (const o of objects) {
    for (const field of Object.keys(o.standard)) {
      if (o.at >= (stored[field] ?? '')) {
        std[field] = o.standard[field as keyof typeof o.standard];
        times[field] = o.at;
        anyStandard = true;
      }
    }
    for (const name of Object.keys(o.custom)) {
      const field = `custom_attributes.${name}`;
      if (o.at >= (stored[field] ?? '')) {
        custom[name] = o.custom[name];
        times[field] = o.at;
        anyCustom = true;
      }
    }
  }
  if (!anyStandard && !anyCustom) return null;
  if (anyStandard) row.std = std;
  if (anyCustom) {
    let set: Record<string, unknown> | undefined;
    let del: string[] | undefined;
    for (const name of Object.keys(custom)) {
      const value = custom[name];
      if (value === null) (del ??= []).push(name);
      else (set ??= {})[name] = value;
    }
    if (set) row.cset = set;
    if (del) row.cdel = del;
  }
  row.times = times;
  if ('email_subscribe' in std) {
    const key = winnerOf(objects, 'email_subscribe', stored).logKey;
    if (key !== undefined) row.sk = `${key}:email_subscribe`;
    row.ss = source;
  }
  // The object tied an address to this user: a state stored for the address applies, unless one was set too.
  const newEmail = typeof std.email === 'string' ? std.email.toLowerCase() : null;
  if (newEmail === null || newEmail === cur.email?.toLowerCase() || 'email_subscribe' in std) return null;
  return { email: newEmail, by: winnerOf(objects, 'email', stored) };
}

/**
 * Applies validated objects to profiles inside the caller's transaction, which must hold `lockProfilePartition`
 * (or `lockWorkspaceProfiles`) for every workspace of the batch. Last-write-wins is decided here from the values read
 * while resolving identities, and checked again by the UPDATE against the row it locks (`newer` above).
 */
export async function applyObjects(client: PoolClient, batches: WorkspaceObjects[]): Promise<ApplyResult> {
  const result: ApplyResult = { events: 0, purchases: 0, attributes: 0, unmatched: 0, profilesCreated: 0 };
  const { wanted, targets } = wantIdentities(batches);
  if (wanted.all.length === 0) return result;
  const current = new Map<number, CurrentRow>();
  result.profilesCreated = await resolveIdentities(client, wanted, current);

  const changes = aggregateChanges(batches, targets, result);
  if (changes.size === 0) return result;
  const tied: TiedEmails = { ids: [], emails: [], keys: [], times: [], sources: [] };
  // The log's rows are made while PostgreSQL rewrites the profiles (a turn of the event loop later, so that the first
  // statement has gone out): their encoding is most of what the log costs this process, and on the drain's path it adds
  // to every batch. The identifiers it takes are final: resolved above, under the lock renames and merges take whole.
  const log = new Promise<PreparedLog>((resolve, reject) =>
    setImmediate(() => {
      try {
        resolve(prepareLog(loggedEvents(batches, targets, current)));
      } catch (err) {
        reject(err as Error);
      }
    }),
  );
  // Its failure is seen where it is awaited below, or not at all once the rewrite has failed.
  log.catch(() => {});
  await writeProfilesLoggedEach(client, chunkedUpdates(changes, current, tied), 'SELECT count(*) FROM written');
  if (tied.ids.length > 0) await applyTiedEmailStates(client, tied);
  await logEvents(client, await log);
  await setGroupStates(client, trackedGroupStates(batches, targets));
  return result;
}

/**
 * The subscription group states of the batch's attributes objects that matched a profile, each as of its object's
 * acceptance (src/profiles/subscription-group-states.ts drops those of groups the workspace does not declare).
 */
function trackedGroupStates(batches: WorkspaceObjects[], targets: Wanted[]): GroupStateChange[] {
  const changes: GroupStateChange[] = [];
  let next = 0;
  for (const { workspaceId, objects, source } of batches) {
    next += objects.events.length + objects.purchases.length;
    for (const a of objects.attributes) {
      const profileId = targets[next++]!.profileId;
      if (profileId === undefined || !a.groups) continue;
      for (const g of a.groups) {
        const key = a.logKey === undefined ? null : `${a.logKey}:g:${g.id}`;
        changes.push({ workspaceId, profileId, groupId: g.id, state: g.state, at: a.at, key, source: source ?? 'api' });
      }
    }
  }
  return changes;
}

/** The events and purchases of the batch that matched a profile, as the event log keeps them. */
function loggedEvents(batches: WorkspaceObjects[], targets: Wanted[], current: Map<number, CurrentRow>): EventEntry[] {
  const entries: EventEntry[] = [];
  let next = 0;
  // Each entry is made whole in one literal (a spread of the identifiers made and copied an object per event: 0.8 µs
  // of the worker's time an event in bench:ingest). A profile the batch did not read leaves its identifiers
  // undefined: the log reads them.
  for (const { workspaceId, objects } of batches) {
    for (const e of objects.events) {
      const profileId = targets[next++]!.profileId;
      if (profileId === undefined) continue;
      const cur = current.get(profileId);
      entries.push({
        type: 'users.behaviors.CustomEvent',
        workspaceId,
        key: e.logKey ?? null,
        profileId,
        userId: cur?.service_id,
        externalUserId: cur?.external_id,
        time: e.time,
        appId: e.app_id ?? null,
        name: e.name,
        properties: e.properties ?? null,
      });
    }
    for (const p of objects.purchases) {
      const profileId = targets[next++]!.profileId;
      if (profileId === undefined) continue;
      const cur = current.get(profileId);
      entries.push({
        type: 'users.behaviors.Purchase',
        workspaceId,
        key: p.logKey ?? null,
        profileId,
        userId: cur?.service_id,
        externalUserId: cur?.external_id,
        time: p.time,
        appId: p.app_id ?? null,
        name: p.product_id,
        properties: p.properties ?? null,
        data: { price: p.price, currency: p.currency, quantity: p.quantity },
      });
    }
    next += objects.attributes.length;
  }
  return entries;
}

/** The identities the objects name, and each object's entry among them (in the order `aggregateChanges` walks). */
function wantIdentities(batches: WorkspaceObjects[]): { wanted: Identities; targets: Wanted[] } {
  const wanted = new Identities();
  const targets: Wanted[] = [];
  for (const { workspaceId: ws, objects } of batches) {
    for (const o of objects.events) targets.push(wanted.want(ws, o.identity, o.create));
    for (const o of objects.purchases) targets.push(wanted.want(ws, o.identity, o.create));
    for (const o of objects.attributes) targets.push(wanted.want(ws, o.identity, o.create));
  }
  return { wanted, targets };
}

/** The objects aggregated per profile, counted in `result` (those whose identifier matched no profile as unmatched). */
function aggregateChanges(
  batches: WorkspaceObjects[],
  targets: Wanted[],
  result: ApplyResult,
): Map<number, ProfileChange> {
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
  for (const { objects, source } of batches) {
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
      c.source = source ?? 'api';
      result.attributes++;
    }
  }
  return changes;
}

/**
 * Profiles whose attributes tied a new email address to them, and that address (lower case); for the event log, the
 * key of the object that tied it (null: none), its time, and where it came from.
 */
interface TiedEmails {
  ids: number[];
  emails: string[];
  keys: (string | null)[];
  times: string[];
  sources: StateChangeSource[];
}

/**
 * Profiles per UPDATE statement. The statements of a batch are sent as they are built (writeProfilesLoggedEach), so
 * PostgreSQL rewrites one chunk of profiles while this process decides the next: as one statement, PostgreSQL waited
 * for the whole batch's decisions (a sixth of a CDI lane's time), and this process for the statement.
 */
const UPDATE_CHUNK = 1_000;

/**
 * The batch's UPDATE statements, one per chunk of profiles in id order, each setting only the columns its rows touch
 * (`updateSql`), and into `tied` the email addresses the winning attributes tie to their users. The merge runs in the
 * process that also answers /users/track (`ces start`): it yields every few hundred profiles so that acknowledgements
 * are not held behind a whole batch, and serializes row by row for the same reason.
 */
async function* chunkedUpdates(
  changes: Map<number, ProfileChange>,
  current: Map<number, CurrentRow>,
  tied: TiedEmails,
): AsyncGenerator<{ statement: string; params: unknown[]; more?: string }> {
  const noShape = (): UpdateShape => ({ events: false, purchases: false, standard: [], custom: false, times: false });
  let rows: string[] = [];
  let shape = noShape();
  let standardSeen = new Set<string>();
  // Profiles of the chunk whose rows set email_subscribe (STATE_JOIN's $2).
  let stateIds: number[] = [];
  const chunk = () => {
    shape.standard = Object.keys(STANDARD_COLUMNS).filter((col) => standardSeen.has(col));
    const rowsJson = `[${rows.join(',')}]`;
    const statement =
      stateIds.length > 0
        ? { statement: updateSql(shape), params: [rowsJson, stateIds], more: LOG_STATE_CHANGES }
        : { statement: updateSql(shape), params: [rowsJson] };
    rows = [];
    shape = noShape();
    standardSeen = new Set<string>();
    stateIds = [];
    return statement;
  };
  let sinceYield = 0;
  // In id order, the UPDATE walks the table (and its pages in the buffer cache) forward instead of at random; and
  // the chunks, each in id order, lock their profiles in the same order as one statement would.
  for (const id of [...changes.keys()].sort((a, b) => a - b)) {
    const c = changes.get(id)!;
    if (++sinceYield === YIELD_EVERY) {
      sinceYield = 0;
      await yieldToEventLoop();
    }
    const cur = current.get(id)!;
    const row: UpdateRow = { id: cur.id };
    if (cur.seen !== null) row.seen = cur.seen;
    if (c.events) row.ev = countsJson(c.events);
    if (c.purchases) {
      row.pu = countsJson(c.purchases);
      row.rev = c.revenue;
    }
    const tiedEmail = c.attributes ? decideAttributes(c.attributes, cur, row, c.source ?? 'api') : null;
    if (tiedEmail !== null) {
      tied.ids.push(cur.id);
      tied.emails.push(tiedEmail.email);
      tied.keys.push(tiedEmail.by.logKey === undefined ? null : `${tiedEmail.by.logKey}:email_subscribe`);
      tied.times.push(tiedEmail.by.at);
      tied.sources.push(c.source ?? 'api');
    }
    // Attributes that all lost to newer stored values leave nothing to write.
    if (!(row.ev || row.pu || row.times)) continue;
    rows.push(JSON.stringify(row));
    if (row.ss !== undefined) stateIds.push(cur.id);
    if (row.ev) shape.events = true;
    if (row.pu) shape.purchases = true;
    if (row.cset || row.cdel) shape.custom = true;
    if (row.times) shape.times = true;
    if (row.std) for (const col of Object.keys(row.std)) standardSeen.add(col);
    if (rows.length === UPDATE_CHUNK) yield chunk();
  }
  if (rows.length > 0) yield chunk();
}

/**
 * A subscription state stored for an address applies to the user the address was just tied to; where that changes
 * the user's state, the change is logged (users.behaviors.subscription.GlobalStateChange) in the same statement.
 */
async function applyTiedEmailStates(client: PoolClient, tied: TiedEmails): Promise<void> {
  // Only where the address was written: a newer address from another partition's batch keeps its own state. A row
  // already in that state is left alone (the condition is checked again on the version the UPDATE rewrites), so every
  // row written is a change.
  await client.query(
    `WITH changed AS (
       UPDATE profiles p SET email_subscribe = s.state
         FROM unnest($1::bigint[], $2::text[], $3::text[], $4::timestamptz[], $5::text[]) AS t(id, email, key, at, source),
              email_subscriptions s
        WHERE p.id = t.id AND lower(p.email) = t.email AND s.workspace_id = p.workspace_id AND s.email = t.email
          AND p.email_subscribe IS DISTINCT FROM s.state
       RETURNING p.workspace_id, p.id, p.service_id, p.external_id, p.email, p.email_subscribe, t.key, t.at, t.source)
     INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, data)
     SELECT c.workspace_id, ${eventIdSql('c.workspace_id', 'c.key')}, 'users.behaviors.subscription.GlobalStateChange',
            c.at, c.id, c.service_id, c.external_id,
            jsonb_build_object('subscription_status', c.email_subscribe, 'channel', 'email', 'email_address', c.email,
                               'state_change_source', c.source)
       FROM changed c`,
    [tied.ids, tied.emails, tied.keys, tied.times, tied.sources],
  );
}
