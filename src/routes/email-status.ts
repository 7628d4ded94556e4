import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { MessageResponse } from '../platform/http/schemas.js';
import { EmailStatusBody, MAX_EMAILS_PER_REQUEST, setEmailStatus } from '../features/subscriptions/email-status.js';

const emailStatusRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/email/status',
    {
      config: { permission: 'email.status', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Set the email subscription state of addresses',
        description:
          `email: one address or up to ${MAX_EMAILS_PER_REQUEST}. Every user with the address gets the state; an address no user has yet ` +
          'keeps it, and it is applied when ingestion ties the address to a user.',
        tags: ['email'],
        body: EmailStatusBody,
        response: { 201: MessageResponse },
      },
    },
    async (req, reply) => {
      const { email, subscription_state } = req.body;
      await setEmailStatus(
        app.ctx.pool,
        apiKeyOf(req).workspaceId,
        Array.isArray(email) ? email : [email],
        subscription_state,
      );
      return reply.code(201).send({ message: 'success' });
    },
  );
};

export default emailStatusRoutes;
