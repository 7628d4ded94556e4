import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import {
  LiveActivityRegisterBody,
  LiveActivityUpdateBody,
  registerLiveActivity,
  updateLiveActivity,
} from '../features/live-activities/live-activities.js';

const Success = z.object({ message: z.literal('success') });
const ErrorBody = z.object({ error: z.string() }).describe('Client error (spec: `{error: string}`)');

const liveActivitiesRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();

  app.post(
    '/messages/live_activity/update',
    {
      config: { permission: 'messages.live_activity.update', rateLimit: RATE_LIMITS.default, errorFormat: 'error' },
      schema: {
        summary: 'Update or end a live activity',
        description:
          'content_state must have exactly the declared shape. end_activity true ends the activity; it leaves the UI at dismissal_date ' +
          '(at once when that is past; four hours after ending when absent). Each accepted update queues one ActivityKit push.',
        tags: ['live activities'],
        body: LiveActivityUpdateBody,
        response: { 201: Success, 400: ErrorBody, 404: ErrorBody, 409: ErrorBody },
      },
    },
    async (req, reply) => {
      await updateLiveActivity(app.ctx.pool, app.ctx.queues, apiKeyOf(req).workspaceId, req.body);
      return reply.code(201).send({ message: 'success' as const });
    },
  );

  app.post(
    '/messages/live_activity/register',
    {
      config: { permission: 'messages.live_activity.register', rateLimit: RATE_LIMITS.default, errorFormat: 'error' },
      schema: {
        summary: 'Register a device push token for a live activity (beyond the spec)',
        description:
          'What the mobile SDK does when an activity starts: names the push token with activity_id. A new activity_id needs ' +
          'content_state_shape ({attribute: string|number|boolean|object|array}); several devices may follow one activity.',
        tags: ['live activities'],
        body: LiveActivityRegisterBody,
        response: { 201: Success, 400: ErrorBody, 404: ErrorBody, 409: ErrorBody },
      },
    },
    async (req, reply) => {
      await registerLiveActivity(app.ctx.pool, apiKeyOf(req).workspaceId, req.body);
      return reply.code(201).send({ message: 'success' as const });
    },
  );
};

export default liveActivitiesRoutes;
