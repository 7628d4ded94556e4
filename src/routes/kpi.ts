import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { uninstallSeries } from '../features/uninstalls/uninstalls.js';
import { userKpiSeries } from '../features/analytics/series.js';
import { DailySeriesQuery, seriesResponse } from './series-schemas.js';

export const UninstallSeriesQuery = DailySeriesQuery;
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
  userKpiRoutes(base);
};

/** Daily new, active and monthly active users, from the activity rollups (docs/analytics.md). */
function userKpiRoutes(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  const kpis = [
    ['new_users', 'kpi.new_users.data_series', 'Daily new users', 'people whose first active day it is'],
    ['dau', 'kpi.dau.data_series', 'Daily active users', 'people active that day'],
    ['mau', 'kpi.mau.data_series', 'Monthly active users', 'people active on some day of the 30 ending with it'],
  ] as const;
  for (const [as, permission, summary, what] of kpis) {
    app.get(
      `/kpi/${as}/data_series`,
      {
        config: { permission, rateLimit: RATE_LIMITS.default },
        schema: {
          summary,
          description:
            `One entry per UTC day, oldest first, for \`length\` days ending on the UTC day of \`ending_at\` (default now): the ${what}. ` +
            'A person is active on a day when a custom event or purchase of theirs for that day is accepted. An app_id ' +
            'counts what was sent with it (any id: unknown ones count 0).',
          tags: ['kpi'],
          querystring: DailySeriesQuery,
          response: { 200: seriesResponse(as) },
        },
      },
      async (req) => {
        const { length, ending_at: endingAt = new Date(), app_id: appId } = req.query;
        const data = await userKpiSeries(app.ctx.pool, apiKeyOf(req).workspaceId, { length, endingAt, appId }, as);
        return { data, message: 'success' };
      },
    );
  }
}

export default kpiRoutes;
