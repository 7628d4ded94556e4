import type { Pool, PoolClient } from '../platform/db/pool.js';
import { eventIdSql } from './event-log.js';

/**
 * Users' states in subscription groups (migration 0420, docs/subscription-groups.md): one row per profile and group,
 * `subscribed` or `unsubscribed`; no row is "Unknown". Written by /subscription/status/set, its v2 and the
 * `subscription_groups` of /users/track attributes objects, each in the caller's transaction (which holds the
 * workspace's profile lock, whole or a partition). The latest `set_at` wins, so an attributes object accepted before
 * an API call but applied after it does not undo the call. A change of state stamps the profile (so an incremental
 * export sends it again) and is logged as `users.behaviors.subscriptiongroup.StateChange` in the same statement.
 */

export const GROUP_STATES = ['subscribed', 'unsubscribed'] as const;
export type GroupState = (typeof GROUP_STATES)[number];

/**
 * What set a group state: `api`, a /users/track attributes object; `cdi`, a Cloud Data Ingestion row;
 * `subscription_status`, /subscription/status/set or its v2.
 */
export type GroupStateSource = 'api' | 'cdi' | 'subscription_status';

/** One state to set. */
export interface GroupStateChange {
  workspaceId: string;
  profileId: number;
  groupId: string;
  state: GroupState;
  /** When it was set (ISO 8601): an API call's time, an attributes object's acceptance. */
  at: string;
  /** The event log's key of the change (an accepted object's place and the group); null: a fresh id. */
  key: string | null;
  source: GroupStateSource;
}

interface StoredState {
  state: GroupState;
  at: number;
}

/**
 * Sets the states, the latest of each profile and group winning (ties: the later in the list), against what is stored
 * (read locked first, so that the state a change replaces is the one it logs). A state in a group its workspace does
 * not declare is dropped. Returns how many states changed.
 */
export async function setGroupStates(client: PoolClient, changes: GroupStateChange[]): Promise<number> {
  if (changes.length === 0) return 0;
  const declared = await declaredGroups(client, changes);
  const latest = new Map<string, GroupStateChange>();
  for (const c of changes) {
    if (!declared.has(`${c.workspaceId}/${c.groupId}`)) continue;
    const k = `${c.profileId}/${c.groupId}`;
    const seen = latest.get(k);
    if (!seen || Date.parse(c.at) >= Date.parse(seen.at)) latest.set(k, c);
  }
  if (latest.size === 0) return 0;
  const wanted = [...latest.values()].sort((a, b) => a.profileId - b.profileId || (a.groupId < b.groupId ? -1 : 1));
  const stored = await lockedStates(client, wanted);
  const winners = wanted.filter(
    (c) => Date.parse(c.at) >= (stored.get(`${c.profileId}/${c.groupId}`)?.at ?? -Infinity),
  );
  if (winners.length === 0) return 0;
  const changed = winners.map((c) => stored.get(`${c.profileId}/${c.groupId}`)?.state !== c.state);
  const { rows } = await client.query<{ n: number }>(UPSERT_SQL, [
    winners.map((c) => c.workspaceId),
    winners.map((c) => c.profileId),
    winners.map((c) => c.groupId),
    winners.map((c) => c.state),
    winners.map((c) => c.at),
    winners.map((c) => c.key),
    winners.map((c) => c.source),
    changed,
  ]);
  return rows[0]!.n;
}

/** `workspace/group` of the changes' groups that their workspaces declare. */
async function declaredGroups(client: PoolClient, changes: GroupStateChange[]): Promise<Set<string>> {
  const { rows } = await client.query<{ key: string }>(
    `SELECT workspace_id || '/' || id AS key FROM subscription_groups WHERE id = ANY($1::uuid[])`,
    [[...new Set(changes.map((c) => c.groupId))]],
  );
  return new Set(rows.map((r) => r.key));
}

/** The stored states of the pairs, locked in (profile, group) order. */
async function lockedStates(client: PoolClient, pairs: GroupStateChange[]): Promise<Map<string, StoredState>> {
  const { rows } = await client.query<{ profile_id: string; group_id: string; state: GroupState; at: Date }>(
    `SELECT s.profile_id, s.group_id, s.state, s.set_at AS at
       FROM subscription_group_states s
       JOIN unnest($1::bigint[], $2::uuid[]) AS w(profile_id, group_id) USING (profile_id, group_id)
      ORDER BY s.profile_id, s.group_id FOR UPDATE OF s`,
    [pairs.map((c) => c.profileId), pairs.map((c) => c.groupId)],
  );
  return new Map(rows.map((r) => [`${r.profile_id}/${r.group_id}`, { state: r.state, at: r.at.getTime() }]));
}

/**
 * The upsert of the winning states (the condition checked again against a row another transaction inserted since the
 * read), the stamp of the profiles whose state changed, and their StateChange events, in one statement. The event
 * names the profile's address or number on the group's channel.
 */
const UPSERT_SQL = `WITH input AS (
    SELECT * FROM unnest($1::uuid[], $2::bigint[], $3::uuid[], $4::text[], $5::timestamptz[], $6::text[], $7::text[], $8::bool[])
      AS i(workspace_id, profile_id, group_id, state, at, key, source, changed)),
  written AS (
    INSERT INTO subscription_group_states AS s (profile_id, group_id, workspace_id, state, set_at)
    SELECT profile_id, group_id, workspace_id, state, at FROM input
    ON CONFLICT (profile_id, group_id) DO UPDATE SET state = EXCLUDED.state, set_at = EXCLUDED.set_at
      WHERE s.set_at <= EXCLUDED.set_at
    RETURNING s.profile_id, s.group_id),
  changes AS (
    SELECT i.* FROM input i JOIN written w USING (profile_id, group_id) WHERE i.changed),
  stamped AS (
    UPDATE profiles p SET updated_at = now() FROM (SELECT DISTINCT profile_id FROM changes) c
     WHERE p.id = c.profile_id
    RETURNING p.id, p.service_id, p.external_id, p.email, p.phone),
  logged AS (
    INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, data)
    SELECT c.workspace_id, ${eventIdSql('c.workspace_id', 'c.key')}, 'users.behaviors.subscriptiongroup.StateChange',
           c.at, c.profile_id, p.service_id, p.external_id,
           jsonb_build_object('subscription_group_id', c.group_id, 'subscription_status', c.state,
                              'channel', g.channel, 'state_change_source', c.source,
                              'email_address', CASE WHEN g.channel = 'email' THEN p.email END,
                              'phone_number', CASE WHEN g.channel = 'sms' THEN p.phone END)
      FROM changes c JOIN stamped p ON p.id = c.profile_id
      JOIN subscription_groups g ON g.workspace_id = c.workspace_id AND g.id = c.group_id)
  SELECT count(*)::int AS n FROM changes`;

/** One stored state, as the read endpoints give it. */
export interface StoredGroupState {
  profileId: number;
  groupId: string;
  state: GroupState;
  setAt: Date;
}

/** The states of these profiles, in the given groups (all groups: null), by profile then group. */
export async function groupStatesOf(
  db: Pick<Pool | PoolClient, 'query'>,
  workspaceId: string,
  profileIds: number[],
  groupIds: string[] | null,
): Promise<StoredGroupState[]> {
  const { rows } = await db.query<{ profile_id: string; group_id: string; state: GroupState; set_at: Date }>(
    `SELECT profile_id, group_id, state, set_at FROM subscription_group_states
      WHERE workspace_id = $1 AND profile_id = ANY($2::bigint[]) AND ($3::uuid[] IS NULL OR group_id = ANY($3::uuid[]))
      ORDER BY profile_id, group_id`,
    [workspaceId, profileIds, groupIds],
  );
  return rows.map((r) => ({ profileId: Number(r.profile_id), groupId: r.group_id, state: r.state, setAt: r.set_at }));
}

/** The workspace's groups among these ids, with their channels. */
export async function groupsOf(
  db: Pick<Pool | PoolClient, 'query'>,
  workspaceId: string,
  groupIds: string[],
): Promise<Map<string, { name: string; channel: 'email' | 'sms' }>> {
  const valid = groupIds.filter((g) => /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i.test(g));
  const { rows } = await db.query<{ id: string; name: string; channel: 'email' | 'sms' }>(
    `SELECT id, name, channel FROM subscription_groups WHERE workspace_id = $1 AND id = ANY($2::uuid[])`,
    [workspaceId, valid.map((g) => g.toLowerCase())],
  );
  return new Map(rows.map((r) => [r.id, { name: r.name, channel: r.channel }]));
}
