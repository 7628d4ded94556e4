import type { FastifyError, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../auth/rate-limit.js';
import { publicBaseUrl } from '../config.js';
import { AppError } from '../errors.js';
import { describeValidation } from '../http/error-handler.js';
import { scimTokenOf } from '../http/principals.js';
import { canonicalNames, USER_NAMES, type NameTree } from '../scim/attribute-names.js';
import type { ScimActor } from '../scim/audit.js';
import { SCIM_LIMITS, ScimListResponse, ScimPatch, ScimUser, ScimUserCreate, ScimUserProjected, ScimUserReplace } from '../scim/schemas.js';
import { createUser, deleteUser, getUser, listUsers, patchUser, replaceUser } from '../scim/users.js';

/** RFC 7644 3.1: SCIM messages are application/scim+json, which every identity provider accepts. */
export const SCIM_JSON = 'application/scim+json; charset=utf-8';

/** Authentication, daily budget and error bodies of every SCIM route (the discovery routes share them). */
export const scimRouteConfig = { auth: 'scim', rateLimit: RATE_LIMITS.scim, errorFormat: 'scim' } as const;
export const scimSchemaCommon = { tags: ['scim'], security: [{ scimToken: [] }] };
export const scimHeadersNote = 'Needs a SCIM token (`Authorization: Bearer`) and `X-Request-Origin`; counts against the daily SCIM limit of the company.';
const config = scimRouteConfig;
const common = scimSchemaCommon;
const headersNote = scimHeadersNote;

const IdParams = z.object({ id: z.string().describe('The id a create or a filtered GET returned') });

/** RFC 7644 3.4.2.5: attribute names, comma-separated; id and schemas are always returned. */
const AttributeQuery = z.object({
  attributes: z.string({ error: 'attributes must be given once' }).optional().describe('Return only these attributes (comma-separated; `name.givenName`, URN-qualified names allowed)'),
  excludedAttributes: z.string({ error: 'excludedAttributes must be given once' }).optional().describe('Return all attributes but these'),
});

/** RFC 7644 3.4.2.4: a startIndex below 1 means 1, a negative count means 0; we return at most SCIM_LIMITS.maxCount. */
const ListQuery = AttributeQuery.extend({
  filter: z
    .string({ error: 'filter must be given once' })
    .optional()
    .describe('`eq` on userName (any letter case), externalId, id, active, emails.value or emails[type eq "work"].value, joined by `and`'),
  startIndex: z.coerce
    .number({ error: 'startIndex must be an integer' })
    .int('startIndex must be an integer')
    .max(2 ** 31 - 1, 'startIndex is too large')
    .transform((v) => Math.max(1, v))
    .default(1),
  count: z.coerce
    .number({ error: 'count must be an integer' })
    .int('count must be an integer')
    .transform((v) => Math.min(SCIM_LIMITS.maxCount, Math.max(0, v)))
    .default(SCIM_LIMITS.defaultCount),
});

/**
 * Body and query refusals carry RFC 7644's scimType. Validation is attached rather than thrown by Fastify so that it
 * arrives here, where the SCIM family adds `invalidSyntax` (not a JSON object) or `invalidValue` (a field is wrong).
 */
function refuseInvalid(req: FastifyRequest): void {
  const err = req.validationError as (FastifyError & { validationContext?: string }) | undefined;
  if (!err) return;
  const body = req.body;
  if (err.validationContext === 'body' && (typeof body !== 'object' || body === null || Array.isArray(body))) {
    throw new AppError('bad_request', 'The request body must be a JSON object (a SCIM User resource)', { scimType: 'invalidSyntax' });
  }
  const issues = (err.validation ?? []) as { instancePath?: string; message?: string }[];
  throw new AppError('bad_request', describeValidation(err.validationContext, issues), { scimType: 'invalidValue' });
}

function actorOf(req: FastifyRequest): ScimActor {
  const token = scimTokenOf(req);
  return { tokenId: token.tokenId, tokenName: token.tokenName, origin: req.scimOrigin ?? '' };
}

const scim = (reply: FastifyReply) => reply.type(SCIM_JSON);

/** RFC 7643 2.1: a body's attribute names in any letter case, read in the schema's spelling (src/scim/attribute-names.ts). */
export const canonicalBody = (names: NameTree) => async (req: FastifyRequest) => {
  req.body = canonicalNames(req.body, names);
};

const scimRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const baseUrl = publicBaseUrl(app.ctx.config);
  const { pool } = app.ctx;
  app.addHook('preHandler', async (req) => refuseInvalid(req));

  app.post(
    '/scim/v2/Users',
    {
      config: { ...config, errors: [409] },
      attachValidation: true,
      preValidation: canonicalBody(USER_NAMES),
      schema: {
        ...common,
        summary: 'Create a dashboard user (SCIM)',
        description: `${headersNote} 409 when the company already has the userName (in any letter case).`,
        body: ScimUserCreate,
        response: { 201: ScimUser },
      },
    },
    async (req, reply) => {
      const user = await createUser(pool, scimTokenOf(req).companyId, req.body, actorOf(req), baseUrl);
      return scim(reply).code(201).header('Location', user.meta.location).send(user);
    },
  );

  app.get(
    '/scim/v2/Users',
    {
      config,
      attachValidation: true,
      schema: {
        ...common,
        summary: 'Find dashboard users (SCIM ListResponse)',
        description: `${headersNote} With \`filter\` (e.g. \`userName eq "<EMAIL>"\`): the users that match. Without: the company's users. Deactivated users are included. By creation time, paged by startIndex (from 1) and count (default ${SCIM_LIMITS.defaultCount}, at most ${SCIM_LIMITS.maxCount}).`,
        querystring: ListQuery,
        response: { 200: ScimListResponse },
      },
    },
    async (req, reply) => scim(reply).send(await listUsers(pool, scimTokenOf(req).companyId, req.query, baseUrl)),
  );

  app.get(
    '/scim/v2/Users/:id',
    {
      config,
      attachValidation: true,
      schema: {
        ...common,
        summary: 'Get a dashboard user (SCIM)',
        description: `${headersNote} Deactivated users (active false) are returned too.`,
        params: IdParams,
        querystring: AttributeQuery,
        response: { 200: ScimUserProjected },
      },
    },
    async (req, reply) => scim(reply).send(await getUser(pool, scimTokenOf(req).companyId, req.params.id, baseUrl, req.query)),
  );

  app.put(
    '/scim/v2/Users/:id',
    {
      config,
      attachValidation: true,
      preValidation: canonicalBody(USER_NAMES),
      schema: {
        ...common,
        summary: 'Replace a dashboard user (SCIM)',
        description: `${headersNote} Replaces name, and displayName, department, permissions, active, externalId and emails when given (kept when omitted, cleared by null); userName cannot change (another letter case is stored as sent).`,
        params: IdParams,
        body: ScimUserReplace,
        response: { 200: ScimUser },
      },
    },
    async (req, reply) => {
      const user = await replaceUser(pool, scimTokenOf(req).companyId, req.params.id, req.body, actorOf(req), baseUrl);
      return scim(reply).send(user);
    },
  );

  app.patch(
    '/scim/v2/Users/:id',
    {
      config,
      attachValidation: true,
      schema: {
        ...common,
        summary: 'Modify a dashboard user (SCIM PATCH)',
        description: `${headersNote} RFC 7644 PatchOp: add, replace, remove (op in any letter case), with a path or a partial resource as value. All or nothing. 200 with the user, or 204 with \`Prefer: return=minimal\`.`,
        params: IdParams,
        body: ScimPatch,
        response: { 200: ScimUser, 204: z.null().describe('No content: the request asked for Prefer: return=minimal') },
      },
    },
    async (req, reply) => {
      const user = await patchUser(pool, scimTokenOf(req).companyId, req.params.id, req.body.Operations, actorOf(req), baseUrl);
      if (/\breturn=minimal\b/i.test(String(req.headers.prefer ?? ''))) return reply.code(204).header('Preference-Applied', 'return=minimal').send(null);
      return scim(reply).send(user);
    },
  );

  app.delete(
    '/scim/v2/Users/:id',
    {
      config,
      attachValidation: true,
      schema: {
        ...common,
        summary: 'Delete a dashboard user (SCIM)',
        description: `${headersNote} 204 with no body.`,
        params: IdParams,
        response: { 204: z.null().describe('No content: the user is deleted') },
      },
    },
    async (req, reply) => {
      await deleteUser(pool, scimTokenOf(req).companyId, req.params.id, actorOf(req), baseUrl);
      return reply.code(204).send(null);
    },
  );
};

export default scimRoutes;
