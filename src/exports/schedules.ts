import type { Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import { AppError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { Queues } from '../queues/index.js';
import type { Redis } from '../redis.js';
import { createExport } from './create.js';
import { removeExportSchedulesBut, upsertExportSchedule } from '../queues/scheduled-export.js';
import { ExportRequestSchema } from './request.js';

/**
 * Makes the BullMQ job schedulers match the enabled rows of scheduled_exports (declared in the workspace file):
 * one scheduler per row, keyed by its id, with its cron pattern and time zone; schedulers of removed or disabled
 * rows are dropped. Idempotent; every worker may run it.
 */
export async function syncExportSchedules(deps: { pool: Pool; queues: Queues; log: Logger }): Promise<{ active: number; removed: number }> {
  const { rows } = await deps.pool.query<{ id: string; cron: string; time_zone: string }>(
    `SELECT id, cron, time_zone FROM scheduled_exports WHERE enabled ORDER BY id`,
  );
  const wanted = new Set<string>();
  for (const r of rows) {
    wanted.add(r.id);
    try {
      await upsertExportSchedule(deps.queues, r.id, r.cron, r.time_zone);
    } catch (err) {
      deps.log.warn({ err, scheduledExportId: r.id }, 'scheduled export has an invalid cron pattern or time zone; skipped');
    }
  }
  const removed = await removeExportSchedulesBut(deps.queues, wanted);
  return { active: wanted.size, removed };
}

/** Starts one export for a scheduled run; a run that finds the segment still exporting (or the cap reached) is skipped. */
export async function runScheduledExport(
  deps: { config: Config; pool: Pool; redis: Redis; queues: Queues; log: Logger },
  scheduledExportId: string,
): Promise<{ objectPrefix?: string; skipped?: string }> {
  const { rows } = await deps.pool.query(
    `SELECT se.name, se.workspace_id, w.company_id, s.api_id AS segment_api_id, se.fields_to_export, se.custom_attributes_to_export,
            se.output_format, se.callback_endpoint
       FROM scheduled_exports se JOIN workspaces w ON w.id = se.workspace_id JOIN segments s ON s.id = se.segment_id
      WHERE se.id = $1 AND se.enabled`,
    [scheduledExportId],
  );
  const row = rows[0];
  if (!row) return { skipped: 'no such enabled scheduled export' };
  const body = ExportRequestSchema.safeParse({
    segment_id: row.segment_api_id,
    fields_to_export: row.fields_to_export,
    custom_attributes_to_export: row.custom_attributes_to_export,
    output_format: row.output_format,
    callback_endpoint: row.callback_endpoint,
  });
  if (!body.success) {
    deps.log.warn({ scheduledExportId, reason: body.error.issues[0]?.message }, 'scheduled export is invalid; run skipped');
    return { skipped: body.error.issues[0]?.message ?? 'invalid' };
  }
  try {
    const created = await createExport(deps, { workspaceId: row.workspace_id, companyId: row.company_id }, body.data, { scheduledBy: row.name });
    deps.log.info({ scheduledExportId, exportId: created.exportId }, 'scheduled export queued');
    return { objectPrefix: created.objectPrefix };
  } catch (err) {
    if (err instanceof AppError && (err.code === 'rate_limited' || err.code === 'bad_request')) {
      deps.log.warn({ scheduledExportId, reason: err.message }, 'scheduled export run skipped');
      return { skipped: err.message };
    }
    throw err;
  }
}
