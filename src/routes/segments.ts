import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { LIST_PAGE_SIZE, PageParam, SortDirectionParam } from '../platform/http/schemas.js';
import { listSegments } from '../profiles/segments/store.js';

export const SegmentListQuery = z.object({ page: PageParam, sort_direction: SortDirectionParam });
export const SegmentListResponse = z.object({
  message: z.string(),
  segments: z.array(
    z.object({ id: z.string(), name: z.string(), analytics_tracking_enabled: z.boolean(), tags: z.array(z.string()) }),
  ),
});

const segmentsRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/segments/list',
    {
      config: { permission: 'segments.list', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'List segments',
        description: `Up to ${LIST_PAGE_SIZE} unarchived segments a page, by creation time.`,
        tags: ['segments'],
        querystring: SegmentListQuery,
        response: { 200: SegmentListResponse },
      },
    },
    async (req) => {
      const key = apiKeyOf(req);
      const segments = await listSegments(
        app.ctx.pool,
        key.workspaceId,
        req.query.page,
        req.query.sort_direction,
        LIST_PAGE_SIZE,
      );
      return { segments, message: 'success' };
    },
  );
};

export default segmentsRoutes;
