import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { publicBaseUrl } from '../platform/config.js';
import {
  canonicalBody,
  refuseInvalid,
  scimHeadersNote as headersNote,
  scimReply as scim,
  scimRouteConfig as config,
  scimSchemaCommon as common,
} from './scim-common.js';
import { scimTokenOf } from '../platform/http/principals.js';
import { nameTree } from '../features/scim/attribute-names.js';
import { listGroups } from '../features/scim/groups.js';
import { listQueryOf, ScimSearchRequest, searchAll } from '../features/scim/search.js';
import { listUsers } from '../features/scim/users.js';

const SearchResponse = z.object({
  schemas: z.array(z.string()),
  totalResults: z.number().int(),
  startIndex: z.number().int(),
  itemsPerPage: z.number().int(),
  Resources: z.array(z.looseObject({ schemas: z.array(z.string()), id: z.string() })),
});

/** The names of a SearchRequest message, in any letter case (RFC 7643 2.1). */
const SEARCH_NAMES = nameTree([], {
  schemas: undefined,
  attributes: undefined,
  excludedAttributes: undefined,
  filter: undefined,
  sortBy: undefined,
  sortOrder: undefined,
  startIndex: undefined,
  count: undefined,
});

/** RFC 7644 3.4.3: queries by POST, at the root (Users and Groups) and per resource type. */
const scimSearchRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const baseUrl = publicBaseUrl(app.ctx.config);
  const { pool } = app.ctx;
  app.addHook('preHandler', async (req) => refuseInvalid(req));

  const routes = [
    { url: '/scim/v2/.search', what: 'users and groups (users first, paged as one list)', run: searchAll },
    {
      url: '/scim/v2/Users/.search',
      what: 'users',
      run: (p: typeof pool, c: string, r: ScimSearchRequest, b: string) => listUsers(p, c, listQueryOf(r), b),
    },
    {
      url: '/scim/v2/Groups/.search',
      what: 'groups',
      run: (p: typeof pool, c: string, r: ScimSearchRequest, b: string) => listGroups(p, c, listQueryOf(r), b),
    },
  ];
  for (const route of routes) {
    app.post(
      route.url,
      {
        config,
        attachValidation: true,
        preValidation: canonicalBody(SEARCH_NAMES),
        schema: {
          ...common,
          summary: `Search ${route.what.split(' ')[0]} by POST (SCIM SearchRequest)`,
          description: `${headersNote} Finds ${route.what} with the filter, attributes, excludedAttributes, startIndex and count of the GET list, in a SearchRequest body; 200 ListResponse.`,
          body: ScimSearchRequest,
          response: { 200: SearchResponse },
        },
      },
      async (req, reply) =>
        scim(reply)
          .code(200)
          .send(await route.run(pool, scimTokenOf(req).companyId, req.body, baseUrl)),
    );
  }
};

export default scimSearchRoutes;
