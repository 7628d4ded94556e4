import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { publicBaseUrl } from '../platform/config.js';
import { scimTokenOf } from '../platform/http/principals.js';
import {
  AttributeQuery,
  IdParams,
  actorOf,
  canonicalBody,
  listQuery,
  sendPatched,
  refuseInvalid,
  scimHeadersNote,
  scimReply as scim,
  scimRouteConfig,
  scimSchemaCommon,
} from './scim-common.js';
import { PATCH_NAMES, USER_NAMES } from '../features/scim/attribute-names.js';
import {
  SCIM_LIMITS,
  ScimListResponse,
  ScimPatch,
  ScimUser,
  ScimUserCreate,
  ScimUserProjected,
  ScimUserReplace,
} from '../features/scim/schemas.js';
import { createUser, deleteUser, getUser, listUsers, patchUser, replaceUser } from '../features/scim/users.js';

const config = scimRouteConfig;
const common = scimSchemaCommon;
const headersNote = scimHeadersNote;
const ListQuery = listQuery(
  '`eq` on userName (any letter case), externalId, id, active, emails.value or emails[type eq "work"].value, joined by `and`',
);

const scimRoutes: FastifyPluginAsync = async (base) => {
  const baseUrl = publicBaseUrl(base.ctx.config);
  base.addHook('preHandler', async (req) => refuseInvalid(req));
  createUserRoute(base, baseUrl);
  listUsersRoute(base, baseUrl);
  getUserRoute(base, baseUrl);
  replaceUserRoute(base, baseUrl);
  patchUserRoute(base, baseUrl);
  deleteUserRoute(base, baseUrl);
};

/** POST /scim/v2/Users */
function createUserRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
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
}

/** GET /scim/v2/Users */
function listUsersRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
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
}

/** GET /scim/v2/Users/:id */
function getUserRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
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
    async (req, reply) =>
      scim(reply).send(await getUser(pool, scimTokenOf(req).companyId, req.params.id, baseUrl, req.query)),
  );
}

/** PUT /scim/v2/Users/:id */
function replaceUserRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
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
}

/** PATCH /scim/v2/Users/:id */
function patchUserRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
  app.patch(
    '/scim/v2/Users/:id',
    {
      config,
      attachValidation: true,
      preValidation: canonicalBody(PATCH_NAMES),
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
      const user = await patchUser(
        pool,
        scimTokenOf(req).companyId,
        req.params.id,
        req.body.Operations,
        actorOf(req),
        baseUrl,
      );
      return sendPatched(req, reply, user);
    },
  );
}

/** DELETE /scim/v2/Users/:id */
function deleteUserRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
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
}

export default scimRoutes;
