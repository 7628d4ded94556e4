import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { getPreferenceCenter, listPreferenceCenters } from '../features/preference-centers/read.js';

const Summary = z.object({
  name: z.string(),
  preference_center_api_id: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
});
export const PreferenceCenterListResponse = z.object({ preference_centers: z.array(Summary) });
export const PreferenceCenterDetailResponse = Summary.extend({
  preference_center_title: z.string(),
  preference_center_page_html: z.string(),
  confirmation_page_html: z.string(),
  redirect_page_html: z.string().nullable(),
  preference_center_options: z.looseObject({ 'meta-viewport-content': z.string() }),
  state: z.string(),
});
export const PreferenceCenterParams = z.object({
  preferenceCenterExternalID: z.string().min(1).max(255, 'preferenceCenterExternalID is at most 255 characters'),
});

const preferenceCenterRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/preference_center/v1/list',
    {
      config: { permission: 'preference_center.list', rateLimit: RATE_LIMITS.preferenceCenter },
      schema: {
        summary: 'List preference centers',
        description: 'Every preference center of the workspace, oldest first.',
        tags: ['preference centers'],
        response: { 200: PreferenceCenterListResponse },
      },
    },
    async (req) => ({ preference_centers: await listPreferenceCenters(app.ctx.pool, apiKeyOf(req).workspaceId) }),
  );
  app.get(
    '/preference_center/v1/:preferenceCenterExternalID',
    {
      config: { permission: 'preference_center.get', rateLimit: RATE_LIMITS.preferenceCenter },
      schema: {
        summary: 'View a preference center',
        description: 'Every field of one preference center; an unknown id is a 404.',
        tags: ['preference centers'],
        params: PreferenceCenterParams,
        response: { 200: PreferenceCenterDetailResponse },
      },
    },
    async (req) => getPreferenceCenter(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.preferenceCenterExternalID),
  );
};

export default preferenceCenterRoutes;
