import type { Pool, PoolClient } from '../../platform/db/pool.js';
import { badRequest, notFound } from '../../platform/errors.js';
import type { SyncSchedule } from '../../platform/queues/cdi-sync.js';

/**
 * Cloud Data Ingestion integrations: declared in the workspace file (`cdi_integrations`), stored in cdi_integrations,
 * listed and synced through the API (GET /cdi/integrations, POST .../sync, GET .../job_sync_status) and `ces cdi`.
 */

/**
 * Where an integration reads (the workspace file's `source`, whose zod schema in src/features/workspace/schema.ts is
 * held to this type: the file is a feature above this pipeline, so the pipeline states what it takes).
 */
export type CdiSource =
  | { type: 'postgres'; url_env: string; table: string }
  | { type: 'bucket'; prefix: string; format: 'parquet' | 'ndjson' | 'csv' };
/** When an integration runs by itself (the file's `schedule`, held to this type as `source` is): its scheduler's. */
export type CdiSchedule = SyncSchedule;

export interface CdiIntegration {
  id: string;
  workspaceId: string;
  name: string;
  source: CdiSource;
  schedule: CdiSchedule | null;
  watermark: Date | null;
  updatedAt: Date;
}

type Db = Pick<Pool | PoolClient, 'query'>;

interface IntegrationRow {
  id: string;
  workspace_id: string;
  name: string;
  source: CdiSource;
  schedule: CdiSchedule | null;
  watermark: Date | null;
  updated_at: Date;
}

const fromRow = (r: IntegrationRow): CdiIntegration => ({
  id: r.id,
  workspaceId: r.workspace_id,
  name: r.name,
  source: r.source,
  schedule: r.schedule,
  watermark: r.watermark,
  updatedAt: r.updated_at,
});

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/** The public API's own refusals for an integration id. */
export function checkIntegrationId(id: string): string {
  if (!UUID.test(id)) throw badRequest('Invalid integration ID');
  return id.toLowerCase();
}

/** One integration of the workspace, or 404 "Integration not found" (another workspace's too). */
export async function getIntegration(db: Db, workspaceId: string, id: string): Promise<CdiIntegration> {
  const { rows } = await db.query<IntegrationRow>(
    `SELECT * FROM cdi_integrations WHERE workspace_id = $1 AND id = $2`,
    [workspaceId, checkIntegrationId(id)],
  );
  if (!rows[0]) throw notFound('Integration not found');
  return fromRow(rows[0]);
}

/** Every integration of the workspace, by name then id; or every one of the install (`ces cdi list` without a workspace). */
export async function allIntegrations(db: Db, workspaceId?: string): Promise<CdiIntegration[]> {
  const { rows } = await db.query<IntegrationRow>(
    `SELECT * FROM cdi_integrations ${workspaceId ? 'WHERE workspace_id = $1' : ''} ORDER BY name, id`,
    workspaceId ? [workspaceId] : [],
  );
  return rows.map(fromRow);
}

/** An integration by its id or its name in a workspace (for `ces cdi sync <integration>`). */
export async function findIntegration(db: Db, ref: string, workspaceId?: string): Promise<CdiIntegration | undefined> {
  const byId = UUID.test(ref);
  const { rows } = await db.query<IntegrationRow>(
    `SELECT * FROM cdi_integrations WHERE ${byId ? 'id = $1' : 'name = $1'} ${workspaceId ? 'AND workspace_id = $2' : ''} ORDER BY id LIMIT 2`,
    workspaceId ? [byId ? ref.toLowerCase() : ref, workspaceId] : [byId ? ref.toLowerCase() : ref],
  );
  if (rows.length > 1)
    throw badRequest(
      `more than one integration is named ${JSON.stringify(ref)}: name it by its id, or give --workspace`,
    );
  return rows[0] ? fromRow(rows[0]) : undefined;
}

/** The public API's pages: 10 items, a cursor that names an offset. */
export const PAGE_SIZE = 10;

export function decodeCursor(cursor: string | undefined): number {
  if (cursor === undefined || cursor === '') return 0;
  const text = Buffer.from(cursor, 'base64url').toString('utf8');
  const m = /^skip:(\d{1,9})$/.exec(text);
  if (!m) throw badRequest('Invalid cursor');
  return Number(m[1]);
}

export const encodeCursor = (offset: number) => Buffer.from(`skip:${offset}`, 'utf8').toString('base64url');

/** The Link header of a page (relative links, as the public API writes them), or undefined when it needs none. */
export function pageLinks(path: string, offset: number, hasNext: boolean): string | undefined {
  const links: string[] = [];
  if (offset > 0) links.push(`<${path}?cursor=${encodeCursor(Math.max(0, offset - PAGE_SIZE))}>; rel="prev"`);
  if (hasNext) links.push(`<${path}?cursor=${encodeCursor(offset + PAGE_SIZE)}>; rel="next"`);
  return links.length > 0 ? links.join(',') : undefined;
}

export interface IntegrationSummary {
  integration_id: string;
  app_group_id: string;
  integration_name: string;
  integration_type: 'user_attributes';
  integration_status: 'active';
  contact_emails: string;
  last_updated_at: string | null;
  warehouse_type: string;
  last_job_start_time: string | null;
  last_job_status: string | null;
  next_scheduled_run: string | null;
}

/**
 * A page of GET /cdi/integrations, in the public API's shape. `nextRun` says when an integration's schedule fires
 * next (the scheduler knows; null when it has none, or Redis cannot say).
 */
export async function listIntegrationPage(
  pool: Pool,
  workspaceId: string,
  offset: number,
  nextRun: (integration: CdiIntegration) => Promise<Date | null>,
): Promise<{ results: IntegrationSummary[]; hasNext: boolean }> {
  const { rows } = await pool.query<IntegrationRow & { job_started: Date | null; job_status: string | null }>(
    `SELECT i.*, j.started_at AS job_started, j.status AS job_status
       FROM cdi_integrations i
       LEFT JOIN LATERAL (SELECT started_at, status FROM cdi_sync_jobs j WHERE j.integration_id = i.id ORDER BY started_at DESC, id DESC LIMIT 1) j ON true
      WHERE i.workspace_id = $1
      ORDER BY i.name, i.id LIMIT $2 OFFSET $3`,
    [workspaceId, PAGE_SIZE + 1, offset],
  );
  const page = rows.slice(0, PAGE_SIZE);
  const results = await Promise.all(
    page.map(async (r): Promise<IntegrationSummary> => {
      const integration = fromRow(r);
      const next = integration.schedule ? await nextRun(integration).catch(() => null) : null;
      return {
        integration_id: r.id,
        app_group_id: r.workspace_id,
        integration_name: r.name,
        integration_type: 'user_attributes',
        integration_status: 'active',
        contact_emails: '',
        last_updated_at: r.watermark?.toISOString() ?? null,
        warehouse_type: r.source.type === 'postgres' ? 'postgres' : 'file_storage',
        last_job_start_time: r.job_started?.toISOString() ?? null,
        last_job_status: r.job_status,
        next_scheduled_run: next?.toISOString() ?? null,
      };
    }),
  );
  return { results, hasNext: rows.length > PAGE_SIZE };
}
