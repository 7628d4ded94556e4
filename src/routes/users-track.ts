import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { documentedBody } from '../platform/http/schemas.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { acceptTrack } from '../pipelines/ingest/accept/track.js';
import { trackSync } from '../pipelines/ingest/accept/track-sync.js';
import {
  MAX_NESTED_PROPERTIES_BYTES,
  MAX_OBJECTS_PER_ARRAY,
  MAX_STRING_CHARS,
  TrackBodyShape,
} from '../profiles/validation/validate.js';

export const TrackResponse = z.object({
  message: z.string(),
  attributes_processed: z.number().int().optional(),
  events_processed: z.number().int().optional(),
  purchases_processed: z.number().int().optional(),
  errors: z
    .array(
      z.object({
        type: z.string(),
        input_array: z.enum(['attributes', 'events', 'purchases']),
        index: z.number().int(),
      }),
    )
    .optional(),
});

const Aggregate = { first: z.string(), last: z.string(), count: z.number().int() };
export const TrackSyncResponse = z.object({
  users: z.array(
    z.object({
      // The object's identifier, as it was sent.
      external_id: z.unknown().optional(),
      service_id: z.unknown().optional(),
      email: z.unknown().optional(),
      user_alias: z.unknown().optional(),
      custom_attributes: z.record(z.string(), z.unknown()).optional(),
      custom_events: z.array(z.object({ name: z.string(), ...Aggregate })).optional(),
      purchase_events: z.array(z.object({ product_id: z.string(), ...Aggregate })).optional(),
    }),
  ),
  message: z.literal('success'),
});

const usersTrackRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/track',
    {
      config: { permission: 'users.track', rateLimit: RATE_LIMITS.track, idempotent: true },
      schema: {
        summary: 'Record custom events, purchases and profile attributes',
        description:
          `Up to ${MAX_OBJECTS_PER_ARRAY} objects in each of attributes, events and purchases. Each object names its user by exactly one of ` +
          `external_id, user_alias, service_id or email. Every object is validated on its own: the valid ones are committed to the ingestion ` +
          `log before the answer (201) and applied to profiles by the ingestion workers within moments; refused ones are listed in errors. ` +
          `400 when no object is valid. Property names: 1-${MAX_STRING_CHARS} characters, no leading $; string values at most ` +
          `${MAX_STRING_CHARS} characters; properties with arrays or objects at most ${MAX_NESTED_PROPERTIES_BYTES} bytes.`,
        tags: ['users'],
        body: documentedBody(TrackBodyShape, 'attributes, events and purchases arrays'),
        response: { 201: TrackResponse },
      },
    },
    async (req, reply) => {
      const answer = await acceptTrack(app.ctx, apiKeyOf(req).workspaceId, req.body, req.idempotency);
      return reply.code(201).send(answer);
    },
  );
  app.post(
    '/users/track/sync',
    {
      config: { permission: 'users.track.sync', rateLimit: RATE_LIMITS.trackSync, idempotent: true },
      schema: {
        summary: 'Record one attributes, event or purchase object and apply it before answering',
        description:
          'One object in all (a one-element attributes, events or purchases array), validated as /users/track validates it, ' +
          'applied to the profile before the answer, after every object accepted before it. The answer names the user as the ' +
          'object did and what it now holds of what the request named: custom_attributes, custom_events or purchase_events. ' +
          '`users` is empty when no profile matched (`_update_existing_only`, an unknown alias or address).',
        tags: ['users'],
        body: documentedBody(TrackBodyShape, 'one attributes, events or purchases object, in its array'),
        response: { 201: TrackSyncResponse },
      },
    },
    async (req, reply) => {
      const answer = await trackSync(app.ctx, apiKeyOf(req).workspaceId, req.body, req.idempotency);
      return reply.code(201).send(answer);
    },
  );
};

export default usersTrackRoutes;
