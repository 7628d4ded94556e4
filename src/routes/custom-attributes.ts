import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { CUSTOM_ATTRIBUTES_PAGE_SIZE, listCustomAttributes } from '../profiles/custom-attribute-names.js';

export const CustomAttributesQuery = z.object({
  cursor: z
    .string({ error: 'cursor must be one value' })
    .optional()
    .describe('Opaque cursor from the Link header of the previous page'),
});
export const CustomAttributesResponse = z.object({
  message: z.string(),
  attributes: z.array(
    z.object({
      name: z.string(),
      data_type: z.string().describe('String, Number, Boolean, Time, Array, Array of objects or Object'),
      array_length: z.number().int().nullable(),
      description: z.string().nullable(),
      status: z.string(),
      tag_names: z.array(z.string()),
    }),
  ),
});

const customAttributesRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/custom_attributes',
    {
      config: { permission: 'custom_attributes.get', rateLimit: RATE_LIMITS.customDataLists },
      schema: {
        summary: 'List custom attributes',
        description:
          `${CUSTOM_ATTRIBUTES_PAGE_SIZE} attributes a page, by name. When more follow, a relative ` +
          '`Link: </custom_attributes?cursor=...>; rel="next"` header names the next page. The names are those the ' +
          "workers' stats pass found on the workspace's profiles (every WORKSPACE_STATS_INTERVAL_SECONDS) and those the " +
          'workspace file declares.',
        tags: ['custom attributes'],
        querystring: CustomAttributesQuery,
        response: { 200: CustomAttributesResponse },
      },
    },
    async (req, reply) => {
      const page = await listCustomAttributes(app.ctx.pool, apiKeyOf(req).workspaceId, req.query.cursor);
      if (page.next) reply.header('Link', `</custom_attributes?cursor=${page.next}>; rel="next"`);
      return { attributes: page.attributes, message: 'success' };
    },
  );
};

export default customAttributesRoutes;
