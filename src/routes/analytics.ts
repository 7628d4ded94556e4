import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { PageParam } from '../platform/http/schemas.js';
import {
  EVENTS_PAGE_SIZE,
  NAMES_PAGE_SIZE,
  listCustomEvents,
  listEventNames,
  listProducts,
} from '../features/analytics/names.js';
import { eventSeries, purchaseSeries, segmentEventSeries } from '../features/analytics/series.js';
import { DailySeriesQuery, seriesResponse } from './series-schemas.js';

/**
 * What happened, and when: Braze's custom event and purchase exports (docs/analytics.md). Series read the rollups of
 * migration 0380; the lists read the names the rollups recorded.
 */

const requiredText = (name: string) =>
  z
    .string({ error: `${name} is required: one ${name === 'event' ? 'custom event name' : 'value'}` })
    .min(1, `${name} must not be empty`)
    .max(255, `${name} is at most 255 characters`);

const UnitParam = z.enum(['day', 'hour'], { error: "unit must be 'day' or 'hour'" }).default('day');

const SeriesBase = DailySeriesQuery.extend({ unit: UnitParam });
export const EventSeriesQuery = SeriesBase.extend({
  event: requiredText('event'),
  segment_id: requiredText('segment_id').optional(),
});
export const PurchaseSeriesQuery = SeriesBase.extend({ product: requiredText('product').optional() });

export const EventNamesResponse = z.object({ message: z.string(), events: z.array(z.string()) });
export const ProductsResponse = z.object({ message: z.string(), products: z.array(z.string()) });
export const CustomEventsResponse = z.object({
  message: z.string(),
  events: z.array(
    z.object({
      name: z.string(),
      description: z.string().nullable(),
      included_in_analytics_report: z.boolean(),
      status: z.string(),
      tag_names: z.array(z.string()),
    }),
  ),
});

const seriesNote =
  'One point a UTC day (`time` YYYY-MM-DD) or hour (`unit=hour`, `time` YYYY-MM-DDTHH:00:00Z), oldest first, `length` ' +
  'points ending with the one holding `ending_at` (default now; a date alone is that whole day; an offset is ' +
  'honoured), each counted whole. Points without data are 0, as are names nobody sent.';

function listRoutes(app: FastifyInstance): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    '/events/list',
    {
      config: { permission: 'events.list', rateLimit: RATE_LIMITS.customDataLists },
      schema: {
        summary: 'Custom event names',
        description: `The names of the custom events recorded, ${NAMES_PAGE_SIZE} a page, alphabetical.`,
        tags: ['analytics'],
        querystring: z.object({ page: PageParam }),
        response: { 200: EventNamesResponse },
      },
    },
    async (req) => ({
      message: 'success',
      events: await listEventNames(app.ctx.pool, apiKeyOf(req).workspaceId, req.query.page),
    }),
  );
  typed.get(
    '/events',
    {
      config: { permission: 'events.get', rateLimit: RATE_LIMITS.customDataLists },
      schema: {
        summary: 'Custom events',
        description: `The custom events recorded, ${EVENTS_PAGE_SIZE} a page, alphabetical. When more follow, a relative \`Link: </events?cursor=...>; rel="next"\` header names the next page.`,
        tags: ['analytics'],
        querystring: z.object({
          cursor: z.string().optional().describe('Opaque cursor from the Link header of the previous page'),
        }),
        response: { 200: CustomEventsResponse },
      },
    },
    async (req, reply) => {
      const page = await listCustomEvents(app.ctx.pool, apiKeyOf(req).workspaceId, req.query.cursor);
      if (page.next) reply.header('Link', `</events?cursor=${page.next}>; rel="next"`);
      return { message: 'success', events: page.events };
    },
  );
  typed.get(
    '/purchases/product_list',
    {
      config: { permission: 'purchases.product_list', rateLimit: RATE_LIMITS.customDataLists },
      schema: {
        summary: 'Product ids',
        description: `The product ids of the purchases recorded, ${NAMES_PAGE_SIZE} a page, alphabetical.`,
        tags: ['analytics'],
        querystring: z.object({ page: PageParam }),
        response: { 200: ProductsResponse },
      },
    },
    async (req) => ({
      message: 'success',
      products: await listProducts(app.ctx.pool, apiKeyOf(req).workspaceId, req.query.page),
    }),
  );
}

function eventSeriesRoute(app: FastifyInstance): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  typed.get(
    '/events/data_series',
    {
      config: { permission: 'events.data_series', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Occurrences of a custom event',
        description:
          `${seriesNote} With \`segment_id\`, only the segment's members (as they are now), read from the event log: a ` +
          'range starting before the oldest day the log holds is a 400; an unknown segment a 404.',
        tags: ['analytics'],
        querystring: EventSeriesQuery,
        response: { 200: seriesResponse('count') },
      },
    },
    async (req) => {
      const { event, segment_id: segmentId, length, unit, ending_at: endingAt = new Date(), app_id: appId } = req.query;
      const ws = apiKeyOf(req).workspaceId;
      const range = { length, unit, endingAt, appId };
      const data =
        segmentId === undefined
          ? await eventSeries(app.ctx.pool, ws, event, range)
          : await segmentEventSeries(app.ctx.pool, ws, event, segmentId, range);
      return { message: 'success', data };
    },
  );
}

function purchaseSeriesRoutes(app: FastifyInstance): void {
  const typed = app.withTypeProvider<ZodTypeProvider>();
  const measures = [
    ['/purchases/quantity_series', 'purchases.quantity_series', 'purchase_quantity', 'Items purchased'],
    ['/purchases/revenue_series', 'purchases.revenue_series', 'revenue', 'Revenue (price x quantity)'],
  ] as const;
  for (const [url, permission, as, summary] of measures) {
    typed.get(
      url,
      {
        config: { permission, rateLimit: RATE_LIMITS.default },
        schema: {
          summary,
          description: `${seriesNote} Of one \`product\`, or of all. Revenue adds prices in whatever currency they came in.`,
          tags: ['analytics'],
          querystring: PurchaseSeriesQuery,
          response: { 200: seriesResponse(as) },
        },
      },
      async (req) => {
        const { product, length, unit, ending_at: endingAt = new Date(), app_id: appId } = req.query;
        const range = { length, unit, endingAt, appId };
        const data = await purchaseSeries(app.ctx.pool, apiKeyOf(req).workspaceId, product, range, as);
        return { message: 'success', data };
      },
    );
  }
}

const analyticsRoutes: FastifyPluginAsync = async (app) => {
  listRoutes(app);
  eventSeriesRoute(app);
  purchaseSeriesRoutes(app);
};

export default analyticsRoutes;
