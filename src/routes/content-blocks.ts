import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { documentedBody } from '../platform/http/schemas.js';
import { apiKeyOf } from '../platform/http/principals.js';
import {
  ContentBlockCreateBody,
  ContentBlockUpdateBody,
  createContentBlock,
  updateContentBlock,
} from '../features/templates/content-blocks.js';
import { getContentBlock, listContentBlocks } from '../features/templates/content-block-reads.js';

/**
 * Content blocks. Bodies and queries are validated by the domain, so that Braze's messages ("Content Block with this
 * name already exists", "Content Block number limit is invalid"...) answer every malformed request; the route only
 * documents the shape.
 */

export const ContentBlockSaved = z.object({
  content_block_id: z.string(),
  liquid_tag: z.string(),
  created_at: z.string(),
  message: z.literal('success'),
});

const optionalText = z.string().optional();
export const ContentBlockInfoQuery = z.object({ content_block_id: optionalText, include_inclusion_data: optionalText });
export const ContentBlockInfoResponse = z.object({
  content_block_id: z.string(),
  name: z.string(),
  content: z.string(),
  description: z.string(),
  content_type: z.enum(['html', 'text']),
  tags: z.array(z.string()),
  created_at: z.string(),
  last_edited: z.string(),
  inclusion_count: z.number().int(),
  inclusion_data: z.array(z.object({ email_template_id: z.string() })).optional(),
  message: z.literal('success'),
});

export const ContentBlockListQuery = z.object({
  modified_after: optionalText,
  modified_before: optionalText,
  limit: optionalText,
  offset: optionalText,
});
export const ContentBlockListResponse = z.object({
  count: z.number().int(),
  content_blocks: z.array(
    z.object({
      content_block_id: z.string(),
      name: z.string(),
      content_type: z.enum(['html', 'text']),
      liquid_tag: z.string(),
      inclusion_count: z.number().int(),
      created_at: z.string(),
      last_edited: z.string(),
      tags: z.array(z.string()),
    }),
  ),
  message: z.literal('success'),
});

const contentBlockRoutes: FastifyPluginAsync = async (base) => {
  writeRoutes(base);
  readRoutes(base);
};

/** POST /content_blocks/create and /update */
function writeRoutes(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/content_blocks/create',
    {
      config: { permission: 'content_blocks.create', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Create a content block',
        description:
          'name: letters, digits, - and _, under 100 characters, unique in the workspace; content under 50 KB of ' +
          'well-formed Liquid; state active (default) or draft; tags must already exist.',
        tags: ['templates'],
        body: documentedBody(ContentBlockCreateBody),
        response: { 201: ContentBlockSaved },
      },
    },
    async (req, reply) => {
      const saved = await createContentBlock(app.ctx.pool, apiKeyOf(req).workspaceId, req.body);
      return reply.code(201).send({ ...saved, message: 'success' as const });
    },
  );
  app.post(
    '/content_blocks/update',
    {
      config: { permission: 'content_blocks.update', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Update a content block',
        description:
          'Fields not sent keep their value. A draft may be renamed and made active; an active block keeps its name ' +
          'and cannot go back to draft.',
        tags: ['templates'],
        body: documentedBody(ContentBlockUpdateBody),
        response: { 200: ContentBlockSaved },
      },
    },
    async (req) => {
      const saved = await updateContentBlock(app.ctx.pool, apiKeyOf(req).workspaceId, req.body);
      return { ...saved, message: 'success' as const };
    },
  );
}

/** GET /content_blocks/info and /list */
function readRoutes(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/content_blocks/info',
    {
      config: { permission: 'content_blocks.info', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Read a content block',
        description:
          'include_inclusion_data=true adds the email templates that include the block (inclusion_count counts them).',
        tags: ['templates'],
        querystring: ContentBlockInfoQuery,
        response: { 200: ContentBlockInfoResponse },
      },
    },
    async (req) => {
      const block = await getContentBlock(app.ctx.pool, apiKeyOf(req).workspaceId, req.query);
      return { ...block, message: 'success' as const };
    },
  );
  app.get(
    '/content_blocks/list',
    {
      config: { permission: 'content_blocks.list', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'List content blocks',
        description:
          'By last edit, oldest first; modified_after and modified_before (ISO 8601) are inclusive; limit 1-1000 ' +
          '(default 100) and offset page through them.',
        tags: ['templates'],
        querystring: ContentBlockListQuery,
        response: { 200: ContentBlockListResponse },
      },
    },
    async (req) => {
      const blocks = await listContentBlocks(app.ctx.pool, apiKeyOf(req).workspaceId, req.query);
      return { count: blocks.length, content_blocks: blocks, message: 'success' as const };
    },
  );
}

export default contentBlockRoutes;
