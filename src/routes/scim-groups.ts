import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { publicBaseUrl } from '../platform/config.js';
import {
  AttributeQuery,
  IdParams,
  actorOf,
  canonicalBody,
  listQuery,
  sendPatched,
  refuseInvalid,
  scimHeadersNote as headersNote,
  scimReply as scim,
  scimRouteConfig as config,
  scimSchemaCommon as common,
} from './scim-common.js';
import { scimTokenOf } from '../platform/http/principals.js';
import { GROUP_NAMES, PATCH_NAMES } from '../features/scim/attribute-names.js';
import { ScimGroup, ScimGroupBody } from '../features/scim/group-schemas.js';
import { createGroup, deleteGroup, getGroup, listGroups, patchGroup, replaceGroup } from '../features/scim/groups.js';
import { ScimPatch, SCIM_LIMITS } from '../features/scim/schemas.js';

const ListQuery = listQuery(
  '`eq` on displayName (any letter case), externalId, id or members.value, or `members[value eq "<user id>"]`, joined by `and`',
);
const GroupProjected = z.union([
  ScimGroup,
  z
    .looseObject({ schemas: z.array(z.string()), id: z.string() })
    .describe('The group narrowed by attributes or excludedAttributes'),
]);
const GroupList = z.object({
  schemas: z.array(z.string()),
  totalResults: z.number().int(),
  startIndex: z.number().int(),
  itemsPerPage: z.number().int(),
  Resources: z.array(GroupProjected),
});
const rolesNote =
  'A group carries a role through urn:ietf:params:scim:schemas:extension:ces:2.0:Group: the permissions it grants each member.';

/** RFC 7644 /Groups: what Okta Group Push and Entra ID group provisioning call (docs/scim.md "Groups"). */
const scimGroupRoutes: FastifyPluginAsync = async (base) => {
  const baseUrl = publicBaseUrl(base.ctx.config);
  base.addHook('preHandler', async (req) => refuseInvalid(req));
  createGroupRoute(base, baseUrl);
  listGroupsRoute(base, baseUrl);
  getGroupRoute(base, baseUrl);
  replaceGroupRoute(base, baseUrl);
  patchGroupRoute(base, baseUrl);
  deleteGroupRoute(base, baseUrl);
};

/** POST /scim/v2/Groups */
function createGroupRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
  app.post(
    '/scim/v2/Groups',
    {
      config: { ...config, errors: [409] },
      attachValidation: true,
      preValidation: canonicalBody(GROUP_NAMES),
      schema: {
        ...common,
        summary: 'Create a group (SCIM)',
        description: `${headersNote} ${rolesNote} 409 when the company has a group of that displayName (any letter case). Members naming no user of the company are ignored.`,
        body: ScimGroupBody,
        response: { 201: ScimGroup },
      },
    },
    async (req, reply) => {
      const group = await createGroup(pool, scimTokenOf(req).companyId, req.body, actorOf(req), baseUrl);
      return scim(reply).code(201).header('Location', group.meta.location).send(group);
    },
  );
}

/** GET /scim/v2/Groups */
function listGroupsRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
  app.get(
    '/scim/v2/Groups',
    {
      config,
      attachValidation: true,
      schema: {
        ...common,
        summary: 'Find groups (SCIM ListResponse)',
        description: `${headersNote} By creation time, paged by startIndex and count (default ${SCIM_LIMITS.defaultCount}, at most ${SCIM_LIMITS.maxCount}); \`excludedAttributes=members\` skips reading members.`,
        querystring: ListQuery,
        response: { 200: GroupList },
      },
    },
    async (req, reply) => scim(reply).send(await listGroups(pool, scimTokenOf(req).companyId, req.query, baseUrl)),
  );
}

/** GET /scim/v2/Groups/:id */
function getGroupRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
  app.get(
    '/scim/v2/Groups/:id',
    {
      config,
      attachValidation: true,
      schema: {
        ...common,
        summary: 'Get a group (SCIM)',
        description: `${headersNote} 404 Group not found.`,
        params: IdParams,
        querystring: AttributeQuery,
        response: { 200: GroupProjected },
      },
    },
    async (req, reply) =>
      scim(reply).send(await getGroup(pool, scimTokenOf(req).companyId, req.params.id, baseUrl, req.query)),
  );
}

/** PUT /scim/v2/Groups/:id */
function replaceGroupRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
  app.put(
    '/scim/v2/Groups/:id',
    {
      config: { ...config, errors: [409] },
      attachValidation: true,
      preValidation: canonicalBody(GROUP_NAMES),
      schema: {
        ...common,
        summary: 'Replace a group (SCIM)',
        description: `${headersNote} Replaces displayName, and externalId, members and the role when given (kept when omitted).`,
        params: IdParams,
        body: ScimGroupBody,
        response: { 200: ScimGroup },
      },
    },
    async (req, reply) =>
      scim(reply).send(
        await replaceGroup(pool, scimTokenOf(req).companyId, req.params.id, req.body, actorOf(req), baseUrl),
      ),
  );
}

/** PATCH /scim/v2/Groups/:id */
function patchGroupRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
  app.patch(
    '/scim/v2/Groups/:id',
    {
      config: { ...config, errors: [409] },
      attachValidation: true,
      preValidation: canonicalBody(PATCH_NAMES),
      schema: {
        ...common,
        summary: 'Modify a group (SCIM PATCH)',
        description: `${headersNote} RFC 7644 PatchOp, in Okta's and Entra ID's forms: members add/remove/replace, members[value eq "<id>"] remove, displayName, the role. All or nothing. 200 with the group, or 204 with \`Prefer: return=minimal\`.`,
        params: IdParams,
        body: ScimPatch,
        response: {
          200: ScimGroup,
          204: z.null().describe('No content: the request asked for Prefer: return=minimal'),
        },
      },
    },
    async (req, reply) => {
      const group = await patchGroup(
        pool,
        scimTokenOf(req).companyId,
        req.params.id,
        req.body.Operations,
        actorOf(req),
        baseUrl,
      );
      return sendPatched(req, reply, group);
    },
  );
}

/** DELETE /scim/v2/Groups/:id */
function deleteGroupRoute(base: FastifyInstance, baseUrl: string): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const { pool } = app.ctx;
  app.delete(
    '/scim/v2/Groups/:id',
    {
      config,
      attachValidation: true,
      schema: {
        ...common,
        summary: 'Delete a group (SCIM)',
        description: `${headersNote} 204; its members lose what it granted at once.`,
        params: IdParams,
        response: { 204: z.null().describe('No content: the group is deleted') },
      },
    },
    async (req, reply) => {
      await deleteGroup(pool, scimTokenOf(req).companyId, req.params.id, actorOf(req), baseUrl);
      return reply.code(204).send(null);
    },
  );
}

export default scimGroupRoutes;
