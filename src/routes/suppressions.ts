import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import type { Permission } from '../platform/auth/permissions.js';
import type { Pool } from '../platform/db/pool.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { MessageResponse } from '../platform/http/schemas.js';
import { addressesOf, MAX_EMAILS_PER_REQUEST } from '../features/subscriptions/email-status.js';
import { removeSpam } from '../features/subscriptions/spam.js';
import {
  blocklistEmails,
  EmailAddressesBody,
  PhoneNumbersBody,
  removeHardBounces,
  removeInvalidPhoneNumbers,
} from '../features/subscriptions/suppressions.js';

type EmailListCall = (pool: Pool, workspaceId: string, emails: string[]) => Promise<unknown>;

const emailCalls: { url: string; permission: Permission; summary: string; description: string; run: EmailListCall }[] =
  [
    {
      url: '/email/blocklist',
      permission: 'email.blacklist',
      summary: 'Blocklist email addresses',
      description:
        'Unsubscribes the addresses (their stored state and every user with them) and records them hard bounced now: ' +
        'GET /email/hard_bounces and GET /email/unsubscribes list them.',
      run: blocklistEmails,
    },
    {
      url: '/email/blacklist',
      permission: 'email.blacklist',
      summary: 'Blocklist email addresses (legacy name)',
      description: 'The former name of POST /email/blocklist, which it is in every respect.',
      run: blocklistEmails,
    },
    {
      url: '/email/bounce/remove',
      permission: 'email.bounce.remove',
      summary: 'Remove addresses from the hard-bounce list',
      description:
        'Every bounce recorded for the addresses goes from GET /email/hard_bounces; their subscription state is left as it is.',
      run: removeHardBounces,
    },
    {
      url: '/email/spam/remove',
      permission: 'email.spam.remove',
      summary: 'Remove addresses from the spam list',
      description: 'The addresses go from GET /email/spam; their subscription state is left as it is.',
      run: removeSpam,
    },
  ];

/** The calls that edit the suppression lists; GET /email/spam and the other lists are in deliverability.ts. */
const suppressionRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  for (const call of emailCalls) {
    app.post(
      call.url,
      {
        config: { permission: call.permission, rateLimit: RATE_LIMITS.default },
        schema: {
          summary: call.summary,
          description: `${call.description} email: one address or up to ${MAX_EMAILS_PER_REQUEST}, case-insensitive.`,
          tags: ['email'],
          body: EmailAddressesBody,
          response: { 201: MessageResponse },
        },
      },
      async (req, reply) => {
        await call.run(app.ctx.pool, apiKeyOf(req).workspaceId, addressesOf(req.body.email));
        return reply.code(201).send({ message: 'success' });
      },
    );
  }
  app.post(
    '/sms/invalid_phone_numbers/remove',
    {
      config: { permission: 'sms.invalid_phone_numbers.remove', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Remove numbers from the invalid phone number list',
        description:
          `phone_numbers: 1 to ${MAX_EMAILS_PER_REQUEST} E.164 numbers (digits without the + are read as E.164). ` +
          'The numbers go from GET /sms/invalid_phone_numbers, whatever their reason.',
        tags: ['sms'],
        body: PhoneNumbersBody,
        response: { 201: MessageResponse },
      },
    },
    async (req, reply) => {
      await removeInvalidPhoneNumbers(app.ctx.pool, apiKeyOf(req).workspaceId, req.body.phone_numbers);
      return reply.code(201).send({ message: 'success' });
    },
  );
};

export default suppressionRoutes;
