import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import {
  createSchedule,
  deleteSchedule,
  ScheduleCreateBody,
  ScheduleDeleteBody,
  ScheduleUpdateBody,
  updateSchedule,
} from '../features/canvases/schedules.js';
import { apiKeyOf } from '../platform/http/principals.js';

export const ScheduleCreated = z.object({
  dispatch_id: z.string(),
  schedule_id: z.string(),
  message: z.literal('success'),
});
export const ScheduleUpdated = z.object({
  message: z.literal('success'),
  applied: z.boolean().describe('false when the schedule had already been sent: nothing changed'),
  detail: z.string().optional(),
});

const canvasSchedulesRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();

  app.post(
    '/canvas/trigger/schedule/create',
    {
      config: { permission: 'canvas.trigger.schedule.create', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Schedule an API-triggered canvas (beyond the spec)',
        description:
          'Targets `recipients` (at most 50, by external_user_id or user_alias; with `audience`, those of them in the segment), or with ' +
          "`broadcast: true` the segment `audience.segment_id`, or the whole workspace. `schedule.in_local_time` sends at each user's local time.",
        tags: ['canvases'],
        body: ScheduleCreateBody,
        response: { 201: ScheduleCreated },
      },
    },
    async (req, reply) => {
      const created = await createSchedule(app.ctx.pool, app.ctx.queues, apiKeyOf(req).workspaceId, req.body);
      return reply.code(201).send({ ...created, message: 'success' as const });
    },
  );

  app.post(
    '/canvas/trigger/schedule/update',
    {
      config: { permission: 'canvas.trigger.schedule.update', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Update a scheduled API-triggered canvas',
        description:
          'The new schedule fully replaces the old (without in_local_time it is UTC). Close to or after the send time it is best effort: ' +
          '`applied` is false when the schedule had already been sent, and `detail` says when part of the audience already had it.',
        tags: ['canvases'],
        body: ScheduleUpdateBody,
        response: { 200: ScheduleUpdated },
      },
    },
    async (req) => {
      const outcome = await updateSchedule(app.ctx.pool, app.ctx.queues, apiKeyOf(req).workspaceId, req.body);
      return { message: 'success' as const, ...outcome };
    },
  );

  app.post(
    '/canvas/trigger/schedule/delete',
    {
      config: { permission: 'canvas.trigger.schedule.delete', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Cancel a scheduled API-triggered canvas (beyond the spec)',
        tags: ['canvases'],
        body: ScheduleDeleteBody,
        response: { 200: z.object({ message: z.literal('success') }) },
      },
    },
    async (req) => {
      await deleteSchedule(app.ctx.pool, app.ctx.queues, apiKeyOf(req).workspaceId, req.body);
      return { message: 'success' as const };
    },
  );
};

export default canvasSchedulesRoutes;
