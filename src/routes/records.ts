import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { MAX_RECORDS_PER_REQUEST } from '../platform/lib/records-body.js';
import { HardBounceRecords, recordHardBounces } from '../features/subscriptions/hard-bounces.js';
import {
  InvalidPhoneNumberRecords,
  recordInvalidPhoneNumbers,
} from '../features/subscriptions/invalid-phone-numbers.js';
import { SpamRecords, recordSpam } from '../features/subscriptions/spam.js';
import { UninstallRecords, recordUninstalls } from '../features/uninstalls/uninstalls.js';

export const RecordsResponse = z.object({
  recorded: z.number().int(),
  duplicates: z.number().int(),
  message: z.string(),
});

const internal = {
  config: { permission: 'internal.records.write' as const, rateLimit: RATE_LIMITS.default },
  tags: ['internal'],
};
const batch = `A batch of at most ${MAX_RECORDS_PER_REQUEST} records, written together or not at all. Beyond the spec: for tests, demos and feeds from a sending provider.`;

/** The internal write path behind the uninstall KPI and the deliverability lists (the spam list included). */
const recordsRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/internal/records/uninstalls',
    {
      config: internal.config,
      schema: {
        summary: 'Record app uninstalls',
        description: `${batch} Each record: app_id (the app's API id), optional external_id, optional time (default now).`,
        tags: internal.tags,
        body: UninstallRecords,
        response: { 201: RecordsResponse },
      },
    },
    async (req, reply) => {
      const result = await recordUninstalls(app.ctx.pool, apiKeyOf(req).workspaceId, req.body.records);
      return reply.code(201).send({ ...result, message: 'success' });
    },
  );
  app.post(
    '/internal/records/hard_bounces',
    {
      config: internal.config,
      schema: {
        summary: 'Record hard bounces',
        description: `${batch} Each record: email, optional time (default now). The address becomes unsubscribed.`,
        tags: internal.tags,
        body: HardBounceRecords,
        response: { 201: RecordsResponse },
      },
    },
    async (req, reply) => {
      const result = await recordHardBounces(app.ctx.pool, apiKeyOf(req).workspaceId, req.body.records);
      return reply.code(201).send({ ...result, message: 'success' });
    },
  );
  app.post(
    '/internal/records/invalid_phone_numbers',
    {
      config: internal.config,
      schema: {
        summary: 'Record invalid phone numbers',
        description: `${batch} Each record: phone (E.164), reason (provider_error or deactivated), optional time (default now).`,
        tags: internal.tags,
        body: InvalidPhoneNumberRecords,
        response: { 201: RecordsResponse },
      },
    },
    async (req, reply) => {
      const result = await recordInvalidPhoneNumbers(app.ctx.pool, apiKeyOf(req).workspaceId, req.body.records);
      return reply.code(201).send({ ...result, message: 'success' });
    },
  );
  app.post(
    '/internal/records/spam',
    {
      config: internal.config,
      schema: {
        summary: 'Record spam reports',
        description: `${batch} Each record: email, optional time (default now). The address joins the spam list (GET /email/spam); its subscription state is not changed.`,
        tags: internal.tags,
        body: SpamRecords,
        response: { 201: RecordsResponse },
      },
    },
    async (req, reply) => {
      const result = await recordSpam(app.ctx.pool, apiKeyOf(req).workspaceId, req.body.records);
      return reply.code(201).send({ ...result, message: 'success' });
    },
  );
};

export default recordsRoutes;
