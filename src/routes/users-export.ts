import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { createExport, type CreatedExport } from '../pipelines/exports/request/create-export.js';
import { exportDownload, readyDownload, verifyDownloadSignature } from '../pipelines/exports/finish/download.js';
import { ExportRequestSchema } from '../pipelines/exports/request/request-body.js';
import { exportStatus } from '../pipelines/exports/request/status.js';
import { apiKeyOf } from '../platform/http/principals.js';

export const ExportResponse = z.object({ message: z.string(), object_prefix: z.string(), url: z.string().optional() });
export const ExportStatusQuery = z.object({
  object_prefix: z.string({ error: 'object_prefix is required' }).min(1, 'object_prefix is required').max(100),
});
export const ExportStatusResponse = z.object({
  message: z.string(),
  object_prefix: z.string(),
  segment_id: z.string(),
  status: z.enum(['queued', 'running', 'ready', 'failed']),
  destination: z.enum(['local', 's3', 'gcs']),
  users_done: z.number(),
  parts_done: z.number(),
  created_at: z.string(),
  started_at: z.string().optional(),
  finished_at: z.string().optional(),
  key_prefix: z.string().optional(),
  manifest_key: z.string().optional(),
  url: z.string().optional(),
  url_expires_at: z.string().optional(),
  error: z.string().optional(),
  scheduled_by: z.string().optional(),
  changes_since: z
    .string()
    .optional()
    .describe('For an incremental export: the object_prefix of the export it is relative to.'),
  removed_done: z.number().optional().describe('For a ready incremental export: the lines of its removed-* parts.'),
});
const DownloadParams = z.object({ file: z.string().max(120) });
const DownloadQuery = z.object({ signature: z.string().max(200).optional() });

const usersExportRoutes: FastifyPluginAsync = async (base) => {
  exportSegmentRoute(base);
  exportStatusRoute(base);
  downloadRoute(base);
};

/** POST /users/export/segment: records and queues an export, answering before any user is read. */
function exportSegmentRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/export/segment',
    {
      config: { permission: 'users.export.segment', rateLimit: RATE_LIMITS.default, idempotent: true },
      schema: {
        summary: 'Export the users of a segment',
        description:
          'Queues an export of every user of the segment as NDJSON parts of 5,000 users, to the workspace bucket or to a signed download URL. Answers before any user is read.',
        tags: ['users'],
        body: ExportRequestSchema,
        response: { 201: ExportResponse },
      },
    },
    async (req, reply) => {
      const key = apiKeyOf(req);
      const answer = (c: CreatedExport) => ({
        message: 'success',
        object_prefix: c.objectPrefix,
        ...(c.url ? { url: c.url } : {}),
      });
      const created = await createExport(app.ctx, key, req.body, {
        onRecorded: async (db, c) => req.idempotency?.answer(db, 201, answer(c)),
      });
      if (created.queued)
        req.log.info({ exportId: created.exportId, segmentId: req.body.segment_id }, 'segment export queued');
      reply.code(201);
      return answer(created);
    },
  );
}

/** GET /users/export/status */
function exportStatusRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/users/export/status',
    {
      config: { permission: 'users.export.status', rateLimit: RATE_LIMITS.default, errors: [404] },
      schema: {
        summary: 'Read the status of a segment export',
        description:
          'queued, running (with users and parts done so far), ready or failed, by the object_prefix the export request returned.',
        tags: ['users'],
        querystring: ExportStatusQuery,
        response: { 200: ExportStatusResponse },
      },
    },
    async (req) => {
      const key = apiKeyOf(req);
      const status = await exportStatus(app.ctx.pool, app.ctx.config, key.workspaceId, req.query.object_prefix);
      return { message: 'success', ...status };
    },
  );
}

/** GET /downloads/segment-export/:file: the signed ZIP of a ready export to the built-in store. */
function downloadRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/downloads/segment-export/:file',
    {
      // Public: the link carries its own signature.
      config: { auth: 'none', errors: [400, 404, 410] },
      schema: {
        summary: 'Download a ready export as one ZIP',
        description:
          'The signed address an export to the built-in store returns as `url`. 404 before the export is ready, 410 after the link expired.',
        tags: ['users'],
        params: DownloadParams,
        querystring: DownloadQuery,
        // No API key: /docs shows no padlock, and "Try it" sends none.
        security: [],
      },
    },
    async (req, reply) => {
      const objectPrefix = req.params.file.replace(/\.zip$/, '');
      verifyDownloadSignature(app.ctx.config, objectPrefix, req.query.signature);
      const ready = await readyDownload(app.ctx.pool, objectPrefix);
      reply.header('content-type', 'application/zip');
      reply.header('content-disposition', `attachment; filename="${objectPrefix}.zip"`);
      return reply.send(exportDownload(app.ctx.config, ready));
    },
  );
}

export default usersExportRoutes;
