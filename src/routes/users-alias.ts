import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { documentedBody } from '../platform/http/schemas.js';
import { acceptAliasUpdates, AliasUpdate, MAX_ALIAS_UPDATES } from '../features/user-data/alias-update.js';
import { acceptAliasNew } from '../features/user-data/accept.js';
import { AliasNewBody, MAX_USER_DATA_ENTRIES } from '../features/user-data/requests.js';

export const AliasUpdateBody = z.object({
  alias_updates: z
    // Each entry is validated on its own by the domain (refused entries are listed in errors), documented by its
    // schema.
    .array(documentedBody(AliasUpdate), { error: 'alias_updates is required: an array of alias update objects' })
    .min(1, 'alias_updates must hold at least one update')
    .max(MAX_ALIAS_UPDATES, `alias_updates may hold at most ${MAX_ALIAS_UPDATES} updates`),
});

export const AliasUpdateResponse = z.object({
  message: z.string(),
  aliases_processed: z.number().int(),
  errors: z
    .array(z.object({ type: z.string(), input_array: z.literal('alias_updates'), index: z.number().int() }))
    .optional(),
});

const usersAliasRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/alias/new',
    {
      config: { permission: 'users.alias.new', rateLimit: RATE_LIMITS.alias, idempotent: true },
      schema: {
        summary: 'Create user aliases',
        description:
          `Up to ${MAX_USER_DATA_ENTRIES} {alias_name, alias_label, external_id (optional)}: with an external_id the alias is added to that user ` +
          '(nothing happens when no user has it, or when the user already has an alias of that label); without one, a new alias-only user is ' +
          "created. An alias that exists already changes nothing. Staged and applied in order with the workspace's tracked objects.",
        tags: ['users'],
        body: AliasNewBody,
        response: { 201: z.object({ aliases_processed: z.number().int(), message: z.string() }) },
      },
    },
    async (req, reply) => {
      const { status, body } = await acceptAliasNew(app.ctx, apiKeyOf(req).workspaceId, req.body, req.idempotency);
      return reply.code(status).send(body);
    },
  );
  app.post(
    '/users/alias/update',
    {
      config: { permission: 'users.alias.update', rateLimit: RATE_LIMITS.alias },
      schema: {
        summary: 'Rename user aliases',
        description:
          `Up to ${MAX_ALIAS_UPDATES} updates, applied in order: when an alias with alias_label and old_alias_name exists, its name becomes ` +
          'new_alias_name; otherwise nothing changes. A rename onto an alias another user holds is refused for that entry and listed in errors.',
        tags: ['users'],
        body: AliasUpdateBody,
        response: { 201: AliasUpdateResponse },
      },
    },
    async (req, reply) => {
      const { aliasesProcessed, errors } = await acceptAliasUpdates(
        app.ctx.pool,
        apiKeyOf(req).workspaceId,
        req.body.alias_updates,
      );
      return reply
        .code(201)
        .send({ message: 'success', aliases_processed: aliasesProcessed, ...(errors.length ? { errors } : {}) });
    },
  );
};

export default usersAliasRoutes;
