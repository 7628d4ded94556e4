import type { Config } from '../../../platform/config.js';
import type { Pool } from '../../../platform/db/pool.js';
import { AppError } from '../../../platform/errors.js';
import type { Logger } from '../../../platform/logger.js';
import type { Queues } from '../../../platform/queues/index.js';
import type { Redis } from '../../../platform/redis.js';
import { createExport } from './create-export.js';
import { latestBaseCandidate } from '../incremental.js';
import { removeExportSchedulesBut, upsertExportSchedule } from '../../../platform/queues/scheduled-export.js';
import { ExportRequestSchema, normaliseRequest, type ExportSpec } from './request-body.js';

/**
 * Makes the BullMQ job schedulers match the enabled rows of scheduled_exports (declared in the workspace file):
 * one scheduler per row, keyed by its id, with its cron pattern and time zone; schedulers of removed or disabled
 * rows are dropped. Idempotent; every worker may run it.
 */
export async function syncExportSchedules(deps: {
  pool: Pool;
  queues: Queues;
  log: Logger;
}): Promise<{ active: number; removed: number }> {
  const { rows } = await deps.pool.query<{ id: string; cron: string; time_zone: string }>(
    `SELECT id, cron, time_zone FROM scheduled_exports WHERE enabled ORDER BY id`,
  );
  const wanted = new Set<string>();
  for (const r of rows) {
    wanted.add(r.id);
    try {
      await upsertExportSchedule(deps.queues, r.id, r.cron, r.time_zone);
    } catch (err) {
      deps.log.warn(
        { err, scheduledExportId: r.id },
        'scheduled export has an invalid cron pattern or time zone; skipped',
      );
    }
  }
  const removed = await removeExportSchedulesBut(deps.queues, wanted);
  return { active: wanted.size, removed };
}

interface ScheduleRow {
  name: string;
  workspace_id: string;
  company_id: string;
  segment_api_id: string;
  fields_to_export: string[];
  custom_attributes_to_export: string[] | null;
  output_format: string;
  rows_per_part: number | null;
  part_target_mb: number | null;
  layout: 'spec' | 'hive';
  mode: 'full' | 'incremental';
  callback_endpoint: string | null;
}

const sameSet = (a: readonly string[] | null, b: readonly string[] | null) => {
  const x = [...new Set(a ?? [])].sort();
  const y = [...new Set(b ?? [])].sort();
  return x.length === y.length && x.every((v, i) => v === y[i]);
};

/**
 * The base of an incremental run: the schedule's latest ready export of its segment whose member list is kept. None
 * (the first run, or every earlier run pruned), or one that exported other fields or custom attributes (the loaded
 * rows lack the new columns, so only a full run brings them all), makes the run full; `reason` says why.
 */
async function incrementalBase(
  { pool, config }: { pool: Pool; config: Config },
  row: ScheduleRow,
  spec: ExportSpec,
): Promise<{ objectPrefix?: string; reason: string }> {
  const days = config.TOMBSTONE_RETENTION_DAYS;
  const last = await latestBaseCandidate(pool, row.workspace_id, row.segment_api_id, days, row.name);
  if (!last)
    return {
      reason:
        'no earlier ready run of this schedule keeps its member list and is younger than TOMBSTONE_RETENTION_DAYS less a day',
    };
  if (
    !sameSet(last.request.fields ?? [], spec.fields) ||
    !sameSet(last.request.customAttributes ?? null, spec.customAttributes)
  ) {
    return { reason: `the last ready run (${last.objectPrefix}) exported other fields or custom attributes` };
  }
  return { objectPrefix: last.objectPrefix, reason: 'relative to the last ready run' };
}

/**
 * Starts one export for a scheduled run; a run that finds the segment still exporting (or the cap reached) is skipped.
 * An incremental schedule's run is relative to its last ready run (changes_since), or full when there is none; a base
 * refused at creation (pruned meanwhile) makes it full too rather than skipped.
 */
export async function runScheduledExport(
  deps: { config: Config; pool: Pool; redis: Redis; queues: Queues; log: Logger },
  scheduledExportId: string,
): Promise<{ objectPrefix?: string; changesSince?: string; skipped?: string }> {
  const { rows } = await deps.pool.query<ScheduleRow>(
    `SELECT se.name, se.workspace_id, w.company_id, s.api_id AS segment_api_id, se.fields_to_export,
            se.custom_attributes_to_export, se.output_format, se.rows_per_part, se.part_target_mb, se.layout, se.mode, se.callback_endpoint
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
    rows_per_part: row.rows_per_part,
    part_target_mb: row.part_target_mb,
    layout: row.layout,
    callback_endpoint: row.callback_endpoint,
  });
  if (!body.success) {
    deps.log.warn(
      { scheduledExportId, reason: body.error.issues[0]?.message },
      'scheduled export is invalid; run skipped',
    );
    return { skipped: body.error.issues[0]?.message ?? 'invalid' };
  }
  const who = { workspaceId: row.workspace_id, companyId: row.company_id };
  const log = deps.log.child({ scheduledExportId, scheduledExport: row.name, mode: row.mode });
  const start = async (changesSince: string | undefined) => {
    const created = await createExport(
      deps,
      who,
      { ...body.data, changes_since: changesSince ?? null },
      { scheduledBy: row.name },
    );
    log.info(
      { exportId: created.exportId, objectPrefix: created.objectPrefix, changesSince: changesSince ?? null },
      'scheduled export queued',
    );
    return { objectPrefix: created.objectPrefix, ...(changesSince ? { changesSince } : {}) };
  };
  const skip = (err: unknown) => {
    if (err instanceof AppError && (err.code === 'rate_limited' || err.code === 'bad_request')) {
      log.warn({ reason: err.message }, 'scheduled export run skipped');
      return { skipped: err.message };
    }
    throw err;
  };

  let changesSince: string | undefined;
  if (row.mode === 'incremental') {
    const base = await incrementalBase(deps, row, normaliseRequest(body.data));
    changesSince = base.objectPrefix;
    log.info(
      { run: changesSince ? 'incremental' : 'full', changesSince: changesSince ?? null, reason: base.reason },
      'scheduled export run mode chosen',
    );
  }
  try {
    return await start(changesSince);
  } catch (err) {
    if (!(changesSince && err instanceof AppError && err.code === 'bad_request')) return skip(err);
    // The base was refused after all: pruned (EXPORT_INCREMENTAL_RETENTION_DAYS) since it was chosen, or recorded
    // before incremental exports were. A full run brings the destination up to date; the next run is relative to it.
    log.warn({ changesSince, reason: err.message }, 'scheduled export base refused; running a full export instead');
  }
  try {
    return await start(undefined);
  } catch (err) {
    return skip(err);
  }
}
