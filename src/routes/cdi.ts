import type { FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import {
  checkIntegrationId,
  decodeCursor,
  getIntegration,
  listIntegrationPage,
  pageLinks,
} from '../pipelines/cdi/integrations.js';
import { jobStatusPage } from '../pipelines/cdi/sync-runs.js';
import { startSync } from '../pipelines/cdi/schedules.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { nextScheduledRun } from '../platform/queues/cdi-sync.js';

/**
 * Cloud Data Ingestion (docs/cdi.md), as the public API shapes it: list integrations, trigger a sync, list a sync's
 * runs. Pages of 10, linked by a relative `Link` header whose cursors are opaque.
 */

const CursorQuery = z.object({ cursor: z.string().max(200, 'cursor is at most 200 characters').optional() });
const IntegrationParams = z.object({ integration_id: z.string().max(100, 'Invalid integration ID') });

const nullableTime = z.string().nullable();
export const IntegrationsResponse = z.object({
  results: z.array(
    z.object({
      integration_id: z.string(),
      app_group_id: z.string(),
      integration_name: z.string(),
      integration_type: z.string(),
      integration_status: z.string(),
      contact_emails: z.string(),
      last_updated_at: nullableTime,
      warehouse_type: z.string(),
      last_job_start_time: nullableTime,
      last_job_status: z.string().nullable(),
      next_scheduled_run: nullableTime,
    }),
  ),
  message: z.string(),
});
export const JobSyncStatusResponse = z.object({
  results: z.array(
    z.object({
      job_status: z.enum(['running', 'success', 'partial', 'error', 'config_error']),
      sync_start_time: z.string(),
      sync_finish_time: nullableTime,
      last_timestamp_synced: nullableTime,
      rows_synced: z.number().int(),
      rows_failed_with_errors: z.number().int(),
    }),
  ),
  message: z.string(),
});

const cdiRoutes: FastifyPluginAsync = async (base) => {
  const app = base.withTypeProvider<ZodTypeProvider>();

  app.get(
    '/cdi/integrations',
    {
      config: { permission: 'cdi.integration_list', rateLimit: RATE_LIMITS.cdiList },
      schema: {
        summary: 'List Cloud Data Ingestion integrations',
        description:
          "The workspace's integrations (declared in the workspace file), 10 a page, by name; a `Link` header names the next and previous pages.",
        tags: ['cdi'],
        querystring: CursorQuery,
        response: { 200: IntegrationsResponse },
      },
    },
    async (req, reply) => {
      const offset = decodeCursor(req.query.cursor);
      const page = await listIntegrationPage(app.ctx.pool, apiKeyOf(req).workspaceId, offset, (i) =>
        nextScheduledRun(app.ctx.queues, i.id),
      );
      const link = pageLinks('/cdi/integrations', offset, page.hasNext);
      if (link) reply.header('Link', link);
      return { results: page.results, message: 'success' };
    },
  );

  app.post(
    '/cdi/integrations/:integration_id/sync',
    {
      config: { permission: 'cdi.integration_sync', rateLimit: RATE_LIMITS.cdiSync, errors: [404, 415] },
      schema: {
        summary: 'Trigger a sync',
        description:
          'Starts a run of the integration now (202); 429 "Another job is in progress" while one runs; 404 "Integration not found".',
        tags: ['cdi'],
        params: IntegrationParams,
        response: { 202: z.object({ message: z.string() }) },
      },
    },
    async (req, reply) => {
      const workspaceId = apiKeyOf(req).workspaceId;
      const integration = await getIntegration(app.ctx.pool, workspaceId, req.params.integration_id);
      await startSync(app.ctx, workspaceId, integration.id, 'api');
      return reply.code(202).send({ message: 'success' });
    },
  );

  app.get(
    '/cdi/integrations/:integration_id/job_sync_status',
    {
      config: { permission: 'cdi.integration_job_status', rateLimit: RATE_LIMITS.cdiStatus, errors: [404] },
      schema: {
        summary: 'List the sync runs of an integration',
        description:
          'Newest first, 10 a page; `Link` names the next and previous pages. job_status: running, success, partial (some rows failed), error (none synced), config_error.',
        tags: ['cdi'],
        params: IntegrationParams,
        querystring: CursorQuery,
        response: { 200: JobSyncStatusResponse },
      },
    },
    async (req, reply) => {
      const offset = decodeCursor(req.query.cursor);
      const integration = await getIntegration(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.integration_id);
      const page = await jobStatusPage(app.ctx.pool, integration.id, offset);
      const link = pageLinks(
        `/cdi/integrations/${checkIntegrationId(integration.id)}/job_sync_status`,
        offset,
        page.hasNext,
      );
      if (link) reply.header('Link', link);
      return { results: page.results, message: 'success' };
    },
  );
};

export default cdiRoutes;
