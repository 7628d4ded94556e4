import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { publicBaseUrl } from '../platform/config.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { documentedBody } from '../platform/http/schemas.js';
import { preferenceCenterUrl } from '../features/preference-centers/links.js';
import { getPreferenceCenter, listPreferenceCenters } from '../features/preference-centers/read.js';
import {
  createPreferenceCenter,
  PreferenceCenterCreateBody,
  PreferenceCenterUpdateBody,
  updatePreferenceCenter,
} from '../features/preference-centers/write.js';

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

export const PreferenceCenterCreated = z.object({
  preference_center_api_id: z.string(),
  liquid_tag: z.string(),
  created_at: z.string(),
  message: z.literal('success'),
});
export const PreferenceCenterUpdated = z.object({
  preference_center_api_id: z.string(),
  created_at: z.string(),
  updated_at: z.string(),
  message: z.literal('success'),
});
export const PreferenceCenterUrlParams = PreferenceCenterParams.extend({
  userID: z.string().min(1).max(512, 'userID is at most 512 characters'),
});
export const PreferenceCenterUrlResponse = z.object({ preference_center_url: z.string() });

const preferenceCenterRoutes: FastifyPluginAsync = async (base) => {
  readRoutes(base);
  writeRoutes(base);
  urlRoute(base);
};

/** GET /preference_center/v1/list and /{id} */
function readRoutes(base: FastifyInstance): void {
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
}

/** POST /preference_center/v1 and PUT /preference_center/v1/{id}: the body is validated by the domain. */
function writeRoutes(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/preference_center/v1',
    {
      config: { permission: 'preference_center.update', rateLimit: RATE_LIMITS.preferenceCenterWrite },
      schema: {
        summary: 'Create a preference center',
        description:
          'name: letters, digits, - and _, unique in the workspace, fixed once created; both pages required; state ' +
          'active (default) or draft; options: meta-viewport-content and links-tags.',
        tags: ['preference centers'],
        body: documentedBody(PreferenceCenterCreateBody),
        response: { 201: PreferenceCenterCreated },
      },
    },
    async (req, reply) => {
      const created = await createPreferenceCenter(app.ctx.pool, apiKeyOf(req).workspaceId, req.body);
      return reply.code(201).send({ ...created, message: 'success' as const });
    },
  );
  app.put(
    '/preference_center/v1/:preferenceCenterExternalID',
    {
      config: { permission: 'preference_center.update', rateLimit: RATE_LIMITS.preferenceCenterWrite },
      schema: {
        summary: 'Update a preference center',
        description:
          "Both pages replaced; title, state and options kept when not sent. `name` may be sent, as the center's own: " +
          'a center cannot be renamed.',
        tags: ['preference centers'],
        params: PreferenceCenterParams,
        body: documentedBody(PreferenceCenterUpdateBody),
        response: { 200: PreferenceCenterUpdated },
      },
    },
    async (req) => {
      const { workspaceId } = apiKeyOf(req);
      const id = req.params.preferenceCenterExternalID;
      return {
        ...(await updatePreferenceCenter(app.ctx.pool, workspaceId, id, req.body)),
        message: 'success' as const,
      };
    },
  );
}

/** GET /preference_center/v1/{id}/url/{userID}: a signed link to the user's page (src/routes/preference-center-pages.ts). */
function urlRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/preference_center/v1/:preferenceCenterExternalID/url/:userID',
    {
      config: { permission: 'preference_center.user.get', rateLimit: RATE_LIMITS.preferenceCenterUrl },
      schema: {
        summary: "A user's preference center URL",
        description:
          'userID is the external_id. The URL is signed (PREFERENCE_CENTER_URL_SECRET) and works for ' +
          'PREFERENCE_CENTER_URL_TTL_SECONDS; an unknown center or user is a 404.',
        tags: ['preference centers'],
        params: PreferenceCenterUrlParams,
        response: { 200: PreferenceCenterUrlResponse },
      },
    },
    async (req) => {
      const { config, pool } = app.ctx;
      const { preferenceCenterExternalID: id, userID } = req.params;
      const url = await preferenceCenterUrl(pool, config, publicBaseUrl(config), apiKeyOf(req).workspaceId, id, userID);
      return { preference_center_url: url };
    },
  );
}

export default preferenceCenterRoutes;
