import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { MessageResponse, QueryStringList, mergeArrayParam, queryInteger } from '../platform/http/schemas.js';
import {
  MAX_GROUPS_PER_REQUEST,
  MAX_USERS_PER_REQUEST,
  SubscriptionStatusSetBody,
  SubscriptionStatusSetV2Body,
  setSubscriptionStatus,
  subscriptionStatusOf,
  userSubscriptionGroups,
  type UserNames,
} from '../features/subscriptions/subscription-groups.js';

// An unencoded `+` of an E.164 number arrives as a space (Braze's own examples send `phone=+1...`).
const plusFromSpace = (s: string) => s.replace(/ /g, '+');

const names = {
  external_id: QueryStringList,
  'external_id[]': QueryStringList,
  email: QueryStringList,
  'email[]': QueryStringList,
  phone: QueryStringList,
  'phone[]': QueryStringList,
};
type NameParams = { [K in keyof typeof names]?: string | string[] };

/** The names of a query, each list at most MAX_USERS_PER_REQUEST long. */
function namesOf(q: NameParams, ctx: z.RefinementCtx): UserNames {
  const list = (key: 'external_id' | 'email' | 'phone') => {
    const values = mergeArrayParam(q[key], q[`${key}[]`]).map((v) => (key === 'external_id' ? v : plusFromSpace(v)));
    if (values.length > MAX_USERS_PER_REQUEST)
      ctx.addIssue({ code: 'custom', path: [key], message: `${key} takes at most ${MAX_USERS_PER_REQUEST} values` });
    return values;
  };
  return { externalIds: list('external_id'), emails: list('email'), phones: list('phone') };
}

export const SubscriptionStatusGetQuery = z
  .object({ subscription_group_id: z.string({ error: 'subscription_group_id is required' }), ...names })
  .transform((q, ctx) => ({ groupId: q.subscription_group_id, names: namesOf(q, ctx) }));

export const UserSubscriptionGroupsQuery = z
  .object({
    ...names,
    limit: queryInteger('limit', 1, 100).default(100),
    offset: queryInteger('offset', 0).default(0),
  })
  .transform((q, ctx) => ({ names: namesOf(q, ctx), limit: q.limit, offset: q.offset }));

const StatusResponse = z.object({
  status: z.record(z.string(), z.enum(['Subscribed', 'Unsubscribed', 'Unknown'])),
  message: z.string(),
});
const UserGroupsResponse = z.object({
  success: z.boolean(),
  subscription_groups: z.array(
    z.object({ subscription_group_id: z.string(), subscription_status: z.enum(['subscribed', 'unsubscribed']) }),
  ),
});

const setLimits =
  `Users are named by external id, email address (email groups) or phone number (SMS groups), at most ${MAX_USERS_PER_REQUEST} of each; ` +
  'every profile with the address or number is set; a name that matches no profile changes nothing. ' +
  'An unknown group, or email beside phone, is refused whole (400) and changes nothing. ' +
  'Shares its rate limit with the other version.';

type Base = Parameters<FastifyPluginAsync>[0];

/** The two versions of the set call, sharing one rate-limit bucket. */
function setRoutes(base: Base): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/subscription/status/set',
    {
      config: { permission: 'subscription.status.set', rateLimit: RATE_LIMITS.subscriptionSet },
      schema: {
        summary: "Set users' state in a subscription group",
        description: setLimits,
        tags: ['subscription groups'],
        body: SubscriptionStatusSetBody,
        response: { 201: MessageResponse },
      },
    },
    async (req, reply) => {
      const b = req.body;
      await setSubscriptionStatus(app.ctx.pool, apiKeyOf(req).workspaceId, [
        {
          groupId: b.subscription_group_id,
          state: b.subscription_state,
          externalIds: b.external_id ?? [],
          emails: b.email ?? [],
          phones: b.phone ?? [],
        },
      ]);
      return reply.code(201).send({ message: 'success' });
    },
  );
  app.post(
    '/v2/subscription/status/set',
    {
      config: { permission: 'subscription.status.set', rateLimit: RATE_LIMITS.subscriptionSet },
      schema: {
        summary: "Set users' states in several subscription groups",
        description: `${setLimits} At most ${MAX_GROUPS_PER_REQUEST} groups a request, all set in one transaction.`,
        tags: ['subscription groups'],
        body: SubscriptionStatusSetV2Body,
        response: { 201: MessageResponse },
      },
    },
    async (req, reply) => {
      await setSubscriptionStatus(
        app.ctx.pool,
        apiKeyOf(req).workspaceId,
        req.body.subscription_groups.map((g) => ({
          groupId: g.subscription_group_id,
          state: g.subscription_state,
          externalIds: g.external_ids ?? [],
          emails: g.emails ?? [],
          phones: g.phones ?? [],
        })),
      );
      return reply.code(201).send({ message: 'success' });
    },
  );
}

/** The reads: one group's states of named users, and a user's groups. */
function readRoutes(base: Base): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/subscription/status/get',
    {
      config: { permission: 'subscription.status.get', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: "Users' state in a subscription group",
        description:
          'Keyed by the names given: external_id (then email and phone are ignored), else email or phone (not both). ' +
          'Unknown: no profile, or no state set in the group.',
        tags: ['subscription groups'],
        querystring: SubscriptionStatusGetQuery,
        response: { 200: StatusResponse },
      },
    },
    async (req) => {
      const { groupId, names: n } = req.query;
      const status = await subscriptionStatusOf(app.ctx.pool, apiKeyOf(req).workspaceId, groupId, n);
      return { status, message: 'success' };
    },
  );
  app.get(
    '/subscription/user/status',
    {
      config: { permission: 'subscription.groups.get', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: "A user's subscription groups",
        description:
          'The groups in which the named users have a state (groups never set for them are not listed), in group id order; ' +
          'limit (at most 100, the default) and offset page through them.',
        tags: ['subscription groups'],
        querystring: UserSubscriptionGroupsQuery,
        response: { 200: UserGroupsResponse },
      },
    },
    async (req) => {
      const { names: n, limit, offset } = req.query;
      const groups = await userSubscriptionGroups(app.ctx.pool, apiKeyOf(req).workspaceId, n, { limit, offset });
      return { success: true, subscription_groups: groups };
    },
  );
}

const subscriptionGroupRoutes: FastifyPluginAsync = async (base) => {
  setRoutes(base);
  readRoutes(base);
};

export default subscriptionGroupRoutes;
