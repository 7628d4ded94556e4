import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { listCanvases } from '../features/canvases/list.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { LIST_PAGE_SIZE, PageParam, QueryBoolean, SortDirectionParam, queryIsoTime } from '../platform/http/schemas.js';

export const CanvasListQuery = z.object({
  page: PageParam,
  include_archived: QueryBoolean.default(false),
  sort_direction: SortDirectionParam,
  'last_edit.time[gt]': queryIsoTime('last_edit.time[gt]').optional(),
});
export const CanvasListResponse = z.object({
  canvases: z.array(z.object({ id: z.string(), last_edited: z.string(), name: z.string(), tags: z.array(z.string()) })),
  message: z.string(),
});

const canvasListRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/canvas/list',
    {
      config: { permission: 'canvas.list', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'List canvases',
        description:
          `Up to ${LIST_PAGE_SIZE} canvases a page by creation time; archived ones only with include_archived=true. ` +
          '`last_edit.time[gt]` (yyyy-MM-DDTHH:mm:ss, UTC unless a zone is given) keeps canvases edited after it.',
        tags: ['canvases'],
        querystring: CanvasListQuery,
        response: { 200: CanvasListResponse },
      },
    },
    async (req) => {
      const q = req.query;
      const canvases = await listCanvases(
        app.ctx.pool,
        apiKeyOf(req).workspaceId,
        {
          page: q.page,
          direction: q.sort_direction,
          includeArchived: q.include_archived,
          editedAfter: q['last_edit.time[gt]']?.date,
        },
        LIST_PAGE_SIZE,
      );
      return { canvases, message: 'success' };
    },
  );
};

export default canvasListRoutes;
