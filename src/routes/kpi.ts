import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { queryInteger, queryIsoTime } from '../platform/http/schemas.js';
import { uninstallSeries } from '../features/uninstalls/uninstalls.js';
import { DAY_MS } from '../platform/lib/iso-time.js';

export const UninstallSeriesQuery = z.object({
  length: z.string({ error: 'length is required: an integer from 1 to 100' }).pipe(queryInteger('length', 1, 100)),
  // A date alone names a whole day: the series ends at that day's last millisecond.
  ending_at: queryIsoTime('ending_at')
    .transform((t) => (t.hasTime ? t.date : new Date(t.date.getTime() + DAY_MS - 1)))
    .optional(),
  app_id: z
    .string({ error: 'app_id must be one app id' })
    .min(1, 'app_id must not be empty')
    .max(255, 'app_id is at most 255 characters')
    .optional(),
});
export const UninstallSeriesResponse = z.object({
  message: z.string(),
  data: z.array(z.object({ time: z.string(), uninstalls: z.number().int() })),
});

const kpiRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/kpi/uninstalls/data_series',
    {
      config: { permission: 'kpi.uninstalls.data_series', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Daily uninstalls',
        description:
          'One entry per UTC day, oldest first, for `length` days ending on the UTC day of `ending_at` (default now), counted up to ' +
          '`ending_at`; days without uninstalls count 0. A date-only `ending_at` means the end of that day. An unknown app_id is a 400.',
        tags: ['kpi'],
        querystring: UninstallSeriesQuery,
        response: { 200: UninstallSeriesResponse },
      },
    },
    async (req) => {
      const { length, ending_at: endingAt = new Date(), app_id: appId } = req.query;
      const data = await uninstallSeries(app.ctx.pool, apiKeyOf(req).workspaceId, { length, endingAt, appId });
      return { data, message: 'success' };
    },
  );
};

export default kpiRoutes;
