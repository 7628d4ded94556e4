import { eventIdSql, LOGGED_HOURS_FROM, loggedHoursStamp } from './event-log.js';
import type { StateChangeSource } from './event-log-types.js';

/**
 * The UPDATE that writes a batch's aggregates to its profiles (src/profiles/tracked-objects.ts decides them): one
 * statement per shape of rows, the stored values merged in SQL, last-write-wins checked again on the row version it
 * rewrites, the subscription state changes it makes logged in the same statement.
 */

/**
 * SQL merging a batch's {name: {name, first, last, count}} aggregates into the stored ones (migration 0100): first is
 * the earliest, last the latest, counts add, new names join. Only the batch's names are looked up and rebuilt; the
 * stored entries are carried over by the concatenation. (As arrays sorted by name, every stored entry was taken
 * apart, joined, sorted and rebuilt per profile: twice the time over a batch.) PostgreSQL does it (rather than Node)
 * because the process applying batches may also be answering /users/track, and because the stored entries then
 * never travel.
 */
export const mergeCounts = (stored: string, added: string) => `${stored} || (
    SELECT coalesce(jsonb_object_agg(n.key, CASE WHEN o.e IS NULL THEN n.value
             ELSE jsonb_build_object('name', n.key,
                                     'first', LEAST(o.e->>'first' COLLATE "C", n.value->>'first' COLLATE "C"),
                                     'last', GREATEST(o.e->>'last' COLLATE "C", n.value->>'last' COLLATE "C"),
                                     'count', coalesce((o.e->>'count')::bigint, 0) + (n.value->>'count')::bigint) END), '{}')
      FROM jsonb_each(${added}) AS n CROSS JOIN LATERAL (SELECT ${stored}->n.key AS e) AS o)`;

/** Standard columns an attribute may set, with the SQL that reads the value from the `std` object. */
export const STANDARD_COLUMNS: Record<string, string> = {
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
const newer = (field: string) =>
  `(u.times->>(${field})) COLLATE "C" >= coalesce(p.attribute_times->>(${field}), '') COLLATE "C"`;

/**
 * Whether the row the UPDATE locks is the version the batch read while resolving identities (its changed_xid, which
 * every write of a profile stamps, is the one read): then every value the batch decided to write is still at least as
 * new as the stored one, and the UPDATE merges them as they are instead of checking each against attribute_times again
 * (those per-key checks were a tenth of PostgreSQL's time in a CDI sync). A profile this batch created carries the
 * stamp its INSERT returned; one stamped NULL (last written before migration 0170) takes the checks.
 */
const UNCHANGED_SINCE_READ = `(u.seen IS NOT NULL AND p.changed_xid = u.seen)`;

/** What a batch's update rows carry: the statement sets only those columns (cached per shape). */
export interface UpdateShape {
  events: boolean;
  purchases: boolean;
  /** Standard columns some row of the batch sets, in STANDARD_COLUMNS order. */
  standard: string[];
  custom: boolean;
  times: boolean;
}

const updateStatements = new Map<string, string>();

/**
 * The UPDATE of a batch, setting only the columns its rows touch: a batch of events rewrites no standard column's
 * CASE, and a batch of attributes no aggregate's. (One statement for every shape evaluated all of them on every row:
 * 0.55 s of 1.2 s per 10,000 attribute rows of a CDI sync.)
 */
export function updateSql(shape: UpdateShape): string {
  const key = JSON.stringify(shape);
  let sql = updateStatements.get(key);
  if (sql) return sql;
  const sets: string[] = [];
  if (shape.events)
    sets.push(
      `custom_events = CASE WHEN u.ev IS NULL THEN p.custom_events ELSE ${mergeCounts('p.custom_events', 'u.ev')} END`,
    );
  if (shape.purchases) {
    sets.push(`purchases = CASE WHEN u.pu IS NULL THEN p.purchases ELSE ${mergeCounts('p.purchases', 'u.pu')} END`);
    sets.push(
      `total_revenue = CASE WHEN u.rev IS NULL THEN p.total_revenue ELSE coalesce(p.total_revenue, 0) + u.rev END`,
    );
  }
  for (const col of shape.standard)
    sets.push(
      `${col} = CASE WHEN u.std ? '${col}' AND (${UNCHANGED_SINCE_READ} OR ${newer(`'${col}'`)}) THEN ${STANDARD_COLUMNS[col]} ELSE p.${col} END`,
    );
  if (shape.custom) {
    sets.push(`custom_attributes = CASE WHEN u.cset IS NULL AND u.cdel IS NULL THEN p.custom_attributes
    WHEN ${UNCHANGED_SINCE_READ} THEN (p.custom_attributes || coalesce(u.cset, '{}')) - coalesce(u.cdel, '{}'::text[])
    ELSE (p.custom_attributes || coalesce((SELECT jsonb_object_agg(c.key, c.value) FROM jsonb_each(u.cset) AS c
                                            WHERE ${newer(`'custom_attributes.' || c.key`)}), '{}'))
         - coalesce((SELECT array_agg(d) FROM unnest(u.cdel) AS d WHERE ${newer(`'custom_attributes.' || d`)}), '{}'::text[]) END`);
  }
  if (shape.times) {
    sets.push(`attribute_times = CASE WHEN u.times IS NULL THEN p.attribute_times
    WHEN ${UNCHANGED_SINCE_READ} THEN p.attribute_times || u.times
    ELSE p.attribute_times || coalesce((SELECT jsonb_object_agg(t.key, t.value) FROM jsonb_each_text(u.times) AS t
                                         WHERE t.value COLLATE "C" >= coalesce(p.attribute_times->>t.key, '') COLLATE "C"), '{}') END`);
  }
  // Where the log's rows of this profile's events are, for its erasure (migration 0460).
  const stamp = shape.events || shape.purchases ? loggedHoursStamp('u.ev IS NOT NULL OR u.pu IS NOT NULL') : null;
  if (stamp) sets.push(`event_log_hours = ${stamp}`);
  sets.push('updated_at = now()');
  const states = shape.standard.includes('email_subscribe');
  sql = `UPDATE profiles p SET
  ${sets.join(',\n  ')}
FROM jsonb_to_recordset($1::jsonb) AS u(id bigint, seen xid8, ev jsonb, pu jsonb, rev float8, std jsonb, cset jsonb, cdel text[], times jsonb${states ? `, sk text, ss text)${STATE_JOIN}` : ')'}${stamp ? `\n  CROSS JOIN ${LOGGED_HOURS_FROM}` : ''}
WHERE p.id = u.id
RETURNING p.workspace_id, p.id, p.random_bucket${states ? STATE_RETURNING : ''}`;
  updateStatements.set(key, sql);
  return sql;
}

/**
 * A chunk whose rows set email_subscribe also learns which profiles' state it changed, for the event log
 * (users.behaviors.subscription.GlobalStateChange): the state each profile had just before this write, read from the
 * row version the UPDATE rewrites. A plain join of profiles would read the statement's snapshot, which a batch of
 * another partition may have overtaken (READ COMMITTED re-evaluates only the UPDATE's own row), so the rows setting a
 * state ($2) are locked first, FOR UPDATE returning their latest version; the UPDATE then rewrites that same version.
 * Chunks without email_subscribe keep the statement they had.
 */
const STATE_JOIN = `
  LEFT JOIN (SELECT id, email_subscribe FROM profiles WHERE id = ANY($2::bigint[]) ORDER BY id FOR UPDATE) AS was ON was.id = u.id`;
const STATE_RETURNING = `, p.service_id, p.external_id, p.email, p.email_subscribe, was.email_subscribe AS was_subscribe,
  u.std ? 'email_subscribe' AS sets_subscribe, u.times->>'email_subscribe' AS subscribe_at, u.sk, u.ss`;

/** The event log's rows of the state changes a chunk's UPDATE made (STATE_RETURNING), a CTE over `written`. */
export const LOG_STATE_CHANGES = `states AS (
    INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, data)
    SELECT w.workspace_id, ${eventIdSql('w.workspace_id', 'w.sk')}, 'users.behaviors.subscription.GlobalStateChange',
           w.subscribe_at::timestamptz, w.id, w.service_id, w.external_id,
           jsonb_build_object('subscription_status', w.email_subscribe, 'channel', 'email', 'email_address', w.email,
                              'state_change_source', w.ss)
      FROM written w
     WHERE w.sets_subscribe AND w.email_subscribe IS NOT NULL AND w.email_subscribe IS DISTINCT FROM w.was_subscribe)`;

export interface UpdateRow {
  id: number;
  /** The changed_xid read with the profile (UNCHANGED_SINCE_READ). */
  seen?: string;
  ev?: unknown;
  pu?: unknown;
  rev?: number;
  std?: Record<string, unknown>;
  cset?: Record<string, unknown>;
  cdel?: string[];
  times?: Record<string, string>;
  /** Rows setting email_subscribe: the event log's key of the object whose state won, and where it came from. */
  sk?: string;
  ss?: StateChangeSource;
}
