import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { listFeedCards } from '../features/feed/list.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { LIST_PAGE_SIZE, PageParam, QueryBoolean, SortDirectionParam } from '../platform/http/schemas.js';

export const FeedListQuery = z.object({
  page: PageParam,
  include_archived: QueryBoolean.default(false),
  sort_direction: SortDirectionParam,
});
export const FeedListResponse = z.object({
  message: z.string(),
  cards: z.array(
    z.object({
      id: z.string(),
      type: z.enum(['NewsItem', 'CaptionedImage', 'Banner']),
      title: z.string(),
      tags: z.array(z.string()),
    }),
  ),
});

const feedRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/feed/list',
    {
      config: { permission: 'feed.list', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'List news feed cards',
        description: `Up to ${LIST_PAGE_SIZE} cards a page by creation time; archived ones only with include_archived=true.`,
        tags: ['news feed'],
        querystring: FeedListQuery,
        response: { 200: FeedListResponse },
      },
    },
    async (req) => {
      const q = req.query;
      const cards = await listFeedCards(
        app.ctx.pool,
        apiKeyOf(req).workspaceId,
        { page: q.page, direction: q.sort_direction, includeArchived: q.include_archived },
        LIST_PAGE_SIZE,
      );
      return { cards, message: 'success' };
    },
  );
};

export default feedRoutes;
