import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { LIST_PAGE_SIZE, PageParam, queryInteger, queryIsoTime, SortDirectionParam } from '../platform/http/schemas.js';
import { DAY_MS } from '../platform/lib/iso-time.js';
import { segmentDetails } from '../profiles/segments/details.js';
import { SizeNow, segmentSizeSeries } from '../profiles/segments/sizes.js';
import { listSegments } from '../profiles/segments/store.js';

export const SegmentListQuery = z.object({ page: PageParam, sort_direction: SortDirectionParam });
export const SegmentListResponse = z.object({
  message: z.string(),
  segments: z.array(
    z.object({ id: z.string(), name: z.string(), analytics_tracking_enabled: z.boolean(), tags: z.array(z.string()) }),
  ),
});

const SegmentIdParam = z
  .string({ error: 'segment_id is required: the API id of one segment' })
  .min(1, 'segment_id must not be empty')
  .max(255, 'segment_id is at most 255 characters');

export const SegmentDetailsQuery = z.object({ segment_id: SegmentIdParam });
export const SegmentDetailsResponse = z.object({
  message: z.string(),
  name: z.string(),
  description: z.string().describe('The filter in words, generated from the segment definition'),
  text_description: z.string().describe("The workspace file's description of the segment; empty when it gives none"),
  tags: z.array(z.string()),
  teams: z.array(z.string()),
  created_at: z.string(),
  updated_at: z.string(),
});

export const SegmentSeriesQuery = z.object({
  segment_id: SegmentIdParam,
  length: z.string({ error: 'length is required: an integer from 1 to 100' }).pipe(queryInteger('length', 1, 100)),
  // A date alone names a whole day, as for the uninstall KPI.
  ending_at: queryIsoTime('ending_at')
    .transform((t) => (t.hasTime ? t.date : new Date(t.date.getTime() + DAY_MS - 1)))
    .optional(),
});
export const SegmentSeriesResponse = z.object({
  message: z.string(),
  data: z.array(z.object({ time: z.string(), size: z.number().int() })),
});

const segmentsRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const sizeNow = new SizeNow(app.ctx.config.SEGMENT_SIZE_NOW_MAX_AGE_SECONDS);
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

  app.get(
    '/segments/details',
    {
      config: { permission: 'segments.details', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Segment details',
        description:
          'Name, the filter in words (`description`), the declared description (`text_description`), tags, teams and times ' +
          'of one segment, archived ones included. A segment_id the workspace does not have is a 404.',
        tags: ['segments'],
        querystring: SegmentDetailsQuery,
        response: { 200: SegmentDetailsResponse },
      },
    },
    async (req) => {
      const details = await segmentDetails(app.ctx.pool, apiKeyOf(req).workspaceId, req.query.segment_id);
      return { ...details, message: 'success' };
    },
  );

  app.get(
    '/segments/data_series',
    {
      config: { permission: 'segments.data_series', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Segment size by day',
        description:
          'At most `length` UTC days, oldest first, ending on the UTC day of `ending_at` (default now): today is the size ' +
          'now (counted at most once in SEGMENT_SIZE_NOW_MAX_AGE_SECONDS, 60 by default), earlier days ' +
          "the workers' last count of that day. Days without a count (before the first, or still to " +
          'come) are left out. A segment_id the workspace does not have is a 404.',
        tags: ['segments'],
        querystring: SegmentSeriesQuery,
        response: { 200: SegmentSeriesResponse },
      },
    },
    async (req) => {
      const { segment_id: segmentId, length, ending_at: endingAt = new Date() } = req.query;
      const data = await segmentSizeSeries(app.ctx.pool, apiKeyOf(req).workspaceId, segmentId, {
        length,
        endingAt,
        sizeNow,
      });
      return { data, message: 'success' };
    },
  );
};

export default segmentsRoutes;
