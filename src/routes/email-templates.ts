import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { documentedBody, queryInteger, queryIsoTime } from '../platform/http/schemas.js';
import { badRequest } from '../platform/errors.js';
import { apiKeyOf } from '../platform/http/principals.js';
import {
  createEmailTemplate,
  EmailTemplateCreateBody,
  EmailTemplateUpdateBody,
  getEmailTemplate,
  listEmailTemplates,
  updateEmailTemplate,
} from '../features/templates/email-templates.js';

/**
 * The body is validated by the domain, not here, so that the spec's messages ("Template name is required", ...)
 * answer every malformed body; the route only documents the shape (the OpenAPI schema of the real one).
 */

export const EmailTemplateSaved = z.object({ message: z.literal('success'), email_template_id: z.string() });

export const EmailTemplateInfoQuery = z.object({
  email_template_id: z
    .string({ error: 'email_template_id is required' })
    .min(1, 'email_template_id is required')
    .max(255),
});
export const EmailTemplateInfoResponse = z.object({
  email_template_id: z.string(),
  template_name: z.string(),
  subject: z.string(),
  preheader: z.string().nullable(),
  body: z.string(),
  plaintext_body: z.string().nullable(),
  should_inline_css: z.boolean(),
  tags: z.array(z.string()),
  created_at: z.string(),
  updated_at: z.string(),
  message: z.literal('success'),
});

export const EmailTemplateListQuery = z.object({
  modified_after: queryIsoTime('modified_after')
    .transform((t) => t.date)
    .optional(),
  modified_before: queryIsoTime('modified_before')
    .transform((t) => t.date)
    .optional(),
  limit: queryInteger('limit', 1, 1000).default(100),
  offset: queryInteger('offset', 0, 100_000_000).default(0),
});
export const EmailTemplateListResponse = z.object({
  count: z.number().int(),
  templates: z.array(
    z.object({
      email_template_id: z.string(),
      template_name: z.string(),
      created_at: z.string(),
      updated_at: z.string(),
      tags: z.array(z.string()),
    }),
  ),
  message: z.literal('success'),
});

const emailTemplatesRoutes: FastifyPluginAsync = async (base) => {
  createRoute(base);
  updateRoute(base);
  infoRoute(base);
  listRoute(base);
};

/** POST /templates/email/create */
function createRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/templates/email/create',
    {
      config: { permission: 'templates.email.create', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Create an email template',
        description:
          'Tags must already exist in the workspace; `{{content_blocks.${name}}}` must name existing content blocks.',
        tags: ['templates'],
        body: documentedBody(EmailTemplateCreateBody),
        response: { 201: EmailTemplateSaved },
      },
    },
    async (req, reply) => {
      const saved = await createEmailTemplate(app.ctx.pool, apiKeyOf(req).workspaceId, req.body);
      return reply.code(201).send({ message: 'success' as const, ...saved });
    },
  );
}

/** POST /templates/email/update */
function updateRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/templates/email/update',
    {
      config: { permission: 'templates.email.update', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Update an email template',
        description: 'Fields not sent keep their value; at least one besides email_template_id is required.',
        tags: ['templates'],
        body: documentedBody(EmailTemplateUpdateBody),
        response: { 200: EmailTemplateSaved },
      },
    },
    async (req) => {
      const saved = await updateEmailTemplate(app.ctx.pool, apiKeyOf(req).workspaceId, req.body);
      return { message: 'success' as const, ...saved };
    },
  );
}

/** GET /templates/email/info */
function infoRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/templates/email/info',
    {
      config: { permission: 'templates.email.info', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Read an email template',
        tags: ['templates'],
        querystring: EmailTemplateInfoQuery,
        response: { 200: EmailTemplateInfoResponse },
      },
    },
    async (req) => {
      const template = await getEmailTemplate(app.ctx.pool, apiKeyOf(req).workspaceId, req.query.email_template_id);
      return { ...template, message: 'success' as const };
    },
  );
}

/** GET /templates/email/list */
function listRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/templates/email/list',
    {
      config: { permission: 'templates.email.list', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'List email templates',
        description:
          'By last modification, oldest first; `limit` (1-1000, default 100) and `offset` page through them.',
        tags: ['templates'],
        querystring: EmailTemplateListQuery,
        response: { 200: EmailTemplateListResponse },
      },
    },
    async (req) => {
      const { modified_after, modified_before, limit, offset } = req.query;
      if (modified_after && modified_before && modified_after >= modified_before)
        throw badRequest('modified_after must be before modified_before');
      const templates = await listEmailTemplates(app.ctx.pool, apiKeyOf(req).workspaceId, {
        modifiedAfter: modified_after,
        modifiedBefore: modified_before,
        limit,
        offset,
      });
      return { count: templates.length, templates, message: 'success' as const };
    },
  );
}

export default emailTemplatesRoutes;
