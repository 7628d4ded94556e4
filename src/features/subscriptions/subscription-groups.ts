import { z } from 'zod';
import { badRequest } from '../../platform/errors.js';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { lockWorkspaceProfiles } from '../../profiles/write/locks.js';
import {
  GROUP_STATES,
  groupStatesOf,
  groupsOf,
  setGroupStates,
  type GroupState,
  type GroupStateChange,
} from '../../profiles/subscription-group-states.js';
import { E164 } from './invalid-phone-numbers.js';

/**
 * Subscription groups through the API (docs/subscription-groups.md): setting users' states, one group
 * (/subscription/status/set) or several (/v2/subscription/status/set), and reading them per group
 * (/subscription/status/get) or per user (/subscription/user/status). Users are named by external id, email address or
 * phone number; every profile of the workspace with the address or number is changed, as the public API does. A name
 * that matches no profile changes nothing (no profile is created here: /users/track does that). Every check is made
 * before the first write, so a refused request changes nothing.
 */

export const MAX_USERS_PER_REQUEST = 50;
/** Groups one /v2/subscription/status/set request may set (the public API gives no figure; ours). */
export const MAX_GROUPS_PER_REQUEST = 50;

/** Braze's own words, for a group the workspace does not declare and for an address given beside a number. */
export const INVALID_GROUP = 'Invalid subscription group ID';
export const EMAIL_AND_PHONE = 'Either an email address or a phone number should be provided, but not both.';

const oneOrMany = (name: string, item: z.ZodType<string>) =>
  z
    .union([item, z.array(item).min(1, `${name} must name at least one user`)], {
      error: `${name} must be a string or an array of strings`,
    })
    .transform((v) => (Array.isArray(v) ? v : [v]))
    .refine((v) => v.length <= MAX_USERS_PER_REQUEST, `${name} may list at most ${MAX_USERS_PER_REQUEST} users`)
    .optional();

const ExternalId = z.string().min(1, 'an external_id must not be empty').max(512);
const Email = z
  .string()
  .trim()
  .max(255, 'an email address may be at most 255 characters')
  .regex(/^[^\s@]+@[^\s@]+$/, 'email must be email addresses');
const Phone = z.string().regex(E164, 'phone must be E.164 numbers such as +15555550123');
const GroupId = z.string({ error: 'subscription_group_id is required: a string' }).min(1, INVALID_GROUP);
const State = z.enum(GROUP_STATES, { error: 'subscription_state is required: subscribed or unsubscribed' });
/** SMS double opt-in: taken and ignored, as this service sends no SMS. */
const DoubleOptIn = z.boolean({ error: 'use_double_opt_in_logic must be a boolean' }).optional();

/** The body of POST /subscription/status/set. */
export const SubscriptionStatusSetBody = z.object({
  subscription_group_id: GroupId,
  subscription_state: State,
  external_id: oneOrMany('external_id', ExternalId),
  email: oneOrMany('email', Email),
  phone: oneOrMany('phone', Phone),
  use_double_opt_in_logic: DoubleOptIn,
});
export type SubscriptionStatusSetBody = z.infer<typeof SubscriptionStatusSetBody>;

/** One group of POST /v2/subscription/status/set. */
const V2Group = z.object({
  subscription_group_id: GroupId,
  subscription_state: State,
  external_ids: oneOrMany('external_ids', ExternalId),
  emails: oneOrMany('emails', Email),
  phones: oneOrMany('phones', Phone),
  use_double_opt_in_logic: DoubleOptIn,
});

/** The body of POST /v2/subscription/status/set. */
export const SubscriptionStatusSetV2Body = z.object({
  subscription_groups: z
    .array(V2Group, { error: 'subscription_groups is required: an array of groups' })
    .min(1, 'subscription_groups must name at least one group')
    .max(MAX_GROUPS_PER_REQUEST, `subscription_groups may list at most ${MAX_GROUPS_PER_REQUEST} groups`),
});
export type SubscriptionStatusSetV2Body = z.infer<typeof SubscriptionStatusSetV2Body>;

/** One group's change: the users named by each kind of identifier. */
export interface GroupStatusRequest {
  groupId: string;
  state: GroupState;
  externalIds: string[];
  emails: string[];
  phones: string[];
}

/**
 * Sets the states in one transaction (which takes the workspace's profiles, as /email/status does, so that it cannot
 * deadlock with an ingestion batch). Returns how many states changed.
 */
export async function setSubscriptionStatus(
  pool: Pool,
  workspaceId: string,
  requests: GroupStatusRequest[],
): Promise<{ changed: number }> {
  await checkGroupRequests(pool, workspaceId, requests);
  return withTransaction(pool, async (client) => {
    await lockWorkspaceProfiles(client, [workspaceId]);
    return setSubscriptionStatusIn(client, workspaceId, requests);
  });
}

/** A request's faults, as 400s: no user named, an email and a phone together, a group unknown or of the other channel. */
export async function checkGroupRequests(
  db: Pick<Pool | PoolClient, 'query'>,
  workspaceId: string,
  requests: GroupStatusRequest[],
): Promise<void> {
  for (const r of requests) {
    if (r.externalIds.length + r.emails.length + r.phones.length === 0)
      throw badRequest('external_id, email or phone is required');
    if (r.emails.length > 0 && r.phones.length > 0) throw badRequest(EMAIL_AND_PHONE);
  }
  const groups = await groupsOf(db, workspaceId, [...new Set(requests.map((r) => r.groupId))]);
  for (const r of requests) {
    const group = groups.get(r.groupId.toLowerCase());
    if (!group) throw badRequest(INVALID_GROUP);
    if (group.channel === 'email' && r.phones.length > 0)
      throw badRequest('phone can name users of SMS subscription groups only; this group is an email group');
    if (group.channel === 'sms' && r.emails.length > 0)
      throw badRequest('email can name users of email subscription groups only; this group is an SMS group');
  }
}

/**
 * setSubscriptionStatus's writes, in the caller's transaction, which holds the workspace's profiles lock
 * (`lockWorkspaceProfiles`) and has checked the requests (`checkGroupRequests`).
 */
export async function setSubscriptionStatusIn(
  client: PoolClient,
  workspaceId: string,
  requests: GroupStatusRequest[],
): Promise<{ changed: number }> {
  const at = new Date().toISOString();
  // Every group's names resolved in one statement, then handed back to each group.
  const all: UserNames = {
    externalIds: [...new Set(requests.flatMap((r) => r.externalIds))],
    emails: [...new Set(requests.flatMap((r) => r.emails))],
    phones: [...new Set(requests.flatMap((r) => r.phones))],
  };
  const named = await namedProfiles(client, workspaceId, all);
  const changes: GroupStateChange[] = [];
  for (const r of requests) {
    const wanted = new Set([
      ...r.externalIds.map((v) => `external_id/${v}`),
      ...r.emails.map((v) => `email/${v.toLowerCase()}`),
      ...r.phones.map((v) => `phone/${v}`),
    ]);
    const profileIds = new Set(
      named
        .filter((p) => wanted.has(`${p.kind}/${p.kind === 'email' ? p.name.toLowerCase() : p.name}`))
        .map((p) => p.id),
    );
    for (const profileId of profileIds)
      changes.push({
        workspaceId,
        profileId,
        groupId: r.groupId.toLowerCase(),
        state: r.state,
        at,
        key: null,
        source: 'subscription_status',
      });
  }
  return { changed: await setGroupStates(client, changes) };
}

/** Names as a request gives them (lists), for the read endpoints and setting alike. */
export interface UserNames {
  externalIds: string[];
  emails: string[];
  phones: string[];
}

/** The workspace's profiles named (external id, address in any case, number), each with the name that matched it. */
async function namedProfiles(
  db: Pick<PoolClient, 'query'>,
  workspaceId: string,
  names: UserNames,
): Promise<{ id: number; kind: 'external_id' | 'email' | 'phone'; name: string }[]> {
  const { rows } = await db.query<{ id: string; kind: 'external_id' | 'email' | 'phone'; name: string }>(
    `SELECT p.id, 'external_id' AS kind, p.external_id AS name FROM profiles p
      WHERE p.workspace_id = $1 AND p.external_id = ANY($2::text[])
     UNION ALL
     SELECT p.id, 'email', e.v FROM unnest($3::text[]) AS e(v)
       JOIN profiles p ON p.workspace_id = $1 AND p.email IS NOT NULL AND lower(p.email) = lower(e.v)
     UNION ALL
     SELECT p.id, 'phone', p.phone FROM profiles p WHERE p.workspace_id = $1 AND p.phone = ANY($4::text[])
     ORDER BY 1`,
    [workspaceId, names.externalIds, names.emails, names.phones],
  );
  return rows.map((r) => ({ id: Number(r.id), kind: r.kind, name: r.name }));
}

async function profilesNamed(db: Pick<PoolClient, 'query'>, workspaceId: string, names: UserNames): Promise<number[]> {
  return [...new Set((await namedProfiles(db, workspaceId, names)).map((p) => p.id))];
}

/** Capitalised, as GET /subscription/status/get answers them. */
export type StatusWord = 'Subscribed' | 'Unsubscribed' | 'Unknown';
const WORDS: Record<GroupState, StatusWord> = { subscribed: 'Subscribed', unsubscribed: 'Unsubscribed' };

/**
 * Each name's state in the group, keyed by the name as given: external ids when any are given (the public API then
 * ignores the addresses and numbers), else the addresses or the numbers. A name that matches no profile, or whose
 * profiles have no state in the group, is "Unknown"; of several profiles sharing an address, the latest state set
 * answers.
 */
export async function subscriptionStatusOf(
  pool: Pool,
  workspaceId: string,
  groupId: string,
  names: UserNames,
): Promise<Record<string, StatusWord>> {
  if (names.externalIds.length > 0) names = { externalIds: names.externalIds, emails: [], phones: [] };
  else if (names.emails.length > 0 && names.phones.length > 0) throw badRequest(EMAIL_AND_PHONE);
  else if (names.emails.length + names.phones.length === 0) throw badRequest('external_id, email or phone is required');
  const groups = await groupsOf(pool, workspaceId, [groupId]);
  if (!groups.has(groupId.toLowerCase())) throw badRequest(INVALID_GROUP);
  const profiles = await namedProfiles(pool, workspaceId, names);
  const states = await groupStatesOf(
    pool,
    workspaceId,
    [...new Set(profiles.map((p) => p.id))],
    [groupId.toLowerCase()],
  );
  const byProfile = new Map(states.map((s) => [s.profileId, s]));
  const status: Record<string, StatusWord> = {};
  const latest = new Map<string, Date>();
  const given = [...names.externalIds, ...names.emails, ...names.phones];
  for (const name of given) status[name] = 'Unknown';
  for (const p of profiles) {
    const s = byProfile.get(p.id);
    const key = given.find((g) => (p.kind === 'email' ? g.toLowerCase() === p.name.toLowerCase() : g === p.name));
    if (!s || key === undefined) continue;
    if ((latest.get(key)?.getTime() ?? -Infinity) > s.setAt.getTime()) continue;
    latest.set(key, s.setAt);
    status[key] = WORDS[s.state];
  }
  return status;
}

/** One group of a user, as GET /subscription/user/status lists it. */
export interface UserGroupStatus {
  subscription_group_id: string;
  subscription_status: GroupState;
}

/**
 * The groups in which the named users have a state (a group never set for them is not listed, as in the public API),
 * `offset` and `limit` over the list in (group id) order. Of several profiles with a state in one group, the latest
 * state set is listed.
 */
export async function userSubscriptionGroups(
  pool: Pool,
  workspaceId: string,
  names: UserNames,
  page: { limit: number; offset: number },
): Promise<UserGroupStatus[]> {
  if (names.externalIds.length + names.emails.length + names.phones.length === 0)
    throw badRequest('external_id, email or phone is required');
  const profileIds = await profilesNamed(pool, workspaceId, names);
  const states = await groupStatesOf(pool, workspaceId, profileIds, null);
  const byGroup = new Map<string, { state: GroupState; at: number }>();
  for (const s of states) {
    const seen = byGroup.get(s.groupId);
    if (!seen || s.setAt.getTime() >= seen.at) byGroup.set(s.groupId, { state: s.state, at: s.setAt.getTime() });
  }
  return [...byGroup.keys()]
    .sort()
    .slice(page.offset, page.offset + page.limit)
    .map((id) => ({ subscription_group_id: id, subscription_status: byGroup.get(id)!.state }));
}
