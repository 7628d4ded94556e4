import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { ImportRequest, readImport, startImport } from '../pipelines/ingest/import/imports.js';

export const ImportStatusResponse = z.object({
  message: z.string(),
  import_id: z.string(),
  status: z.enum(['queued', 'running', 'completed', 'failed']),
  store: z.enum(['local', 's3', 'gcs']),
  key: z.string(),
  format: z.enum(['ndjson', 'json']),
  records_handled: z.number().int(),
  events_applied: z.number().int(),
  events_unmatched: z.number().int(),
  rejected: z.number().int(),
  rejects_key: z.string(),
  bytes_total: z.number().int().nullable(),
  error: z.string().nullable(),
  created_at: z.string(),
  started_at: z.string().nullable(),
  finished_at: z.string().nullable(),
});

const importsRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/import',
    {
      config: { permission: 'users.import', rateLimit: RATE_LIMITS.default, idempotent: true, errors: [404] },
      schema: {
        summary: 'Start a bulk import of event objects from a file',
        description:
          'Imports a file of event objects (NDJSON, or one JSON array; `.gz` is decompressed) from the built-in local store or the ' +
          "workspace's bucket. Each object is validated as /users/track validates events; refused ones are written to " +
          '`<key>.rejects.ndjson` beside the file as {line, reason, object}. Answers 201 once the import is queued; read its progress at ' +
          'GET /users/import/{import_id}.',
        tags: ['users'],
        body: ImportRequest,
        response: { 201: ImportStatusResponse },
      },
    },
    async (req, reply) => {
      const key = apiKeyOf(req);
      const { queued: _queued, ...status } = await startImport(
        { pool: app.ctx.pool, config: app.ctx.config, queues: app.ctx.queues, log: req.log },
        key.workspaceId,
        req.body,
        `api-key:${key.keyName}`,
        (db, s) =>
          req.idempotency ? req.idempotency.answer(db, 201, { message: 'success', ...s }) : Promise.resolve(),
      );
      return reply.code(201).send({ message: 'success', ...status });
    },
  );

  app.get(
    '/users/import/:import_id',
    {
      config: { permission: 'users.import', rateLimit: RATE_LIMITS.default },
      schema: {
        summary: 'Progress of a bulk import',
        tags: ['users'],
        params: z.object({ import_id: z.uuid({ error: 'import_id must be a UUID' }) }),
        response: { 200: ImportStatusResponse },
      },
    },
    async (req) => ({
      message: 'success',
      ...(await readImport(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.import_id)),
    }),
  );
};

export default importsRoutes;
