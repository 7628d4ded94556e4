import { badRequest, notFound } from '../../platform/errors.js';
import { groupStatesOf, groupsOf, type GroupState } from '../../profiles/subscription-group-states.js';
import { withTransaction, type Pool } from '../../platform/db/pool.js';
import { lockWorkspaceProfiles } from '../../profiles/write/locks.js';
import { setEmailStatusIn, SUBSCRIPTION_STATES, type SubscriptionState } from '../subscriptions/email-status.js';
import { checkGroupRequests, setSubscriptionStatusIn } from '../subscriptions/subscription-groups.js';
import type { PageLink } from './links.js';
import { EMAIL_GLOBAL_FIELD, renderLiquid, withHead, type PageFrame, type PageUser } from './render.js';
import { DEFAULT_TITLE } from './write.js';

/**
 * A user's preference center page behind a signed link (./links.ts): shown with the user's states, and its form
 * recorded through the subscription groups' and /email/status's own domain functions, so that the event log gets the
 * same events as from those endpoints. docs/preference-centers.md.
 */

interface CenterRow {
  title: string;
  page_html: string;
  confirmation_page_html: string;
  options: Record<string, unknown>;
}

interface ProfileRow {
  external_id: string | null;
  email: string | null;
  first_name: string | null;
  last_name: string | null;
  email_subscribe: 'opted_in' | 'subscribed' | 'unsubscribed' | null;
}

/** The center and the user a verified link names; either gone since the link was made is a 404. */
async function load(pool: Pool, link: PageLink): Promise<{ center: CenterRow; user: PageUser }> {
  const { rows } = await pool.query<{ center: CenterRow | null; profile: ProfileRow | null }>(
    `SELECT (SELECT to_jsonb(c) FROM (SELECT title, page_html, confirmation_page_html, options FROM preference_centers
              WHERE workspace_id = $1 AND id = $2) c) AS center,
            (SELECT to_jsonb(p) FROM (SELECT external_id, email, first_name, last_name, email_subscribe FROM profiles
              WHERE workspace_id = $1 AND id = $3) p) AS profile`,
    [link.w, link.c, link.p],
  );
  const { center, profile } = rows[0]!;
  if (!center) throw notFound('This preference center no longer exists');
  if (!profile) throw notFound('The user of this link no longer exists');
  const states = await groupStatesOf(pool, link.w, [link.p], null);
  return {
    center,
    user: {
      externalId: profile.external_id,
      email: profile.email,
      firstName: profile.first_name,
      lastName: profile.last_name,
      emailState: profile.email_subscribe ?? 'subscribed',
      groupStates: new Map(states.map((s) => [s.groupId, s.state])),
    },
  };
}

/** Braze adds the viewport tag only when the options give one (the read endpoints show a default: ./read.ts). */
function frameOf(center: CenterRow, submitUrl: string): PageFrame {
  return { title: center.title === '' ? DEFAULT_TITLE : center.title, options: center.options, submitUrl };
}

/** The preference center page of the link's user. */
export async function preferenceCenterPage(pool: Pool, link: PageLink, pageUrl: string): Promise<string> {
  const { center, user } = await load(pool, link);
  const frame = frameOf(center, pageUrl);
  return withHead(renderLiquid(center.page_html, user, frame), frame);
}

/** The choices a submitted form makes: only the fields it carries with a value change anything. */
export interface PageChoices {
  emailState?: SubscriptionState;
  groups: { groupId: string; state: GroupState }[];
}

const GROUP_FIELD = /^subscription_group\[([0-9a-f-]{36})\]$/;

/**
 * The form's fields read into choices; a value outside the states a field takes, or a field of a group the workspace
 * does not have, refuses the whole form (400) before anything is written. Fields the Liquid tags did not make (the
 * page's own inputs) are ignored, as are empty values (an input its script never filled).
 */
export async function readChoices(pool: Pool, link: PageLink, form: Record<string, string>): Promise<PageChoices> {
  const choices: PageChoices = { groups: [] };
  for (const [field, value] of Object.entries(form)) {
    if (value === '') continue;
    if (field === EMAIL_GLOBAL_FIELD) {
      if (!(SUBSCRIPTION_STATES as readonly string[]).includes(value))
        throw badRequest('The email subscription state must be opted_in, subscribed or unsubscribed');
      choices.emailState = value as SubscriptionState;
      continue;
    }
    const group = GROUP_FIELD.exec(field);
    if (!group) continue;
    if (value !== 'subscribed' && value !== 'unsubscribed')
      throw badRequest('A subscription group state must be subscribed or unsubscribed');
    choices.groups.push({ groupId: group[1]!, state: value });
  }
  const known = await groupsOf(
    pool,
    link.w,
    choices.groups.map((g) => g.groupId),
  );
  if (choices.groups.some((g) => !known.has(g.groupId)))
    throw badRequest('This form names an unknown subscription group');
  return choices;
}

/**
 * Records the choices of the link's user, all in one transaction, and answers the confirmation page. The groups are
 * set by the user's external id, the global email state by the user's address: as /email/status does, every
 * user with that address gets it. A user with no external id keeps their groups, one with no address their global
 * state (docs/preference-centers.md).
 */
export async function submitPreferenceCenter(
  pool: Pool,
  link: PageLink,
  pageUrl: string,
  form: Record<string, string>,
): Promise<string> {
  const { user } = await load(pool, link);
  const choices = await readChoices(pool, link, form);
  const externalIds = user.externalId === null ? [] : [user.externalId];
  const groups = externalIds.length === 0 ? [] : choices.groups;
  const requests = groups.map((g) => ({ groupId: g.groupId, state: g.state, externalIds, emails: [], phones: [] }));
  await checkGroupRequests(pool, link.w, requests);
  // Every choice of the form in one transaction: a failure records none of them.
  await withTransaction(pool, async (client) => {
    await lockWorkspaceProfiles(client, [link.w]);
    if (requests.length > 0) await setSubscriptionStatusIn(client, link.w, requests);
    if (choices.emailState && user.email !== null)
      await setEmailStatusIn(client, link.w, [user.email], choices.emailState);
  });
  const after = await load(pool, link);
  const frame = frameOf(after.center, pageUrl);
  return withHead(renderLiquid(after.center.confirmation_page_html, after.user, frame), frame);
}
