import { allEventExports, type EventExport } from '../pipelines/events/event-exports.js';
import { exportFailure } from '../pipelines/events/export-failures.js';
import { backfillEventExport } from '../pipelines/events/flush-export.js';
import { EVENT_TYPES } from '../profiles/event-log-types.js';
import type { Config } from '../platform/config.js';
import { createPool, type Pool } from '../platform/db/pool.js';
import { createCommandLogger } from '../platform/logger.js';
import { Metrics } from '../platform/metrics.js';
import { findWorkspace } from './workspace-lookup.js';

/** The options of `ces events backfill` (src/cli/events.ts declares them). */
export interface BackfillOptions {
  workspace: string;
  integration: string;
  from: Date;
  to: Date;
}

const HOUR = 3_600_000;

async function withPool(config: () => Config, what: string, fn: (pool: Pool, cfg: Config) => Promise<void>) {
  const cfg = config();
  const pool = createPool(cfg, 2);
  try {
    await fn(pool, cfg);
  } catch (err) {
    console.error(`events ${what} failed: ${(err as Error).message}`);
    process.exitCode = 1;
  } finally {
    await pool.end();
  }
}

async function exportsOf(pool: Pool, workspace?: string): Promise<EventExport[]> {
  const ws = workspace ? await findWorkspace(pool, workspace) : undefined;
  return (await allEventExports(pool)).filter((e) => !ws || e.workspaceId === ws.id);
}

/** `ces events backfill`. */
export async function backfillCommand(config: () => Config, opts: BackfillOptions): Promise<void> {
  await withPool(config, 'backfill', async (pool, cfg) => {
    const exp = (await exportsOf(pool, opts.workspace)).find(
      (e) => e.id === opts.integration.toLowerCase() || e.name === opts.integration,
    );
    if (!exp) throw new Error(`no event export "${opts.integration}" in workspace "${opts.workspace}"`);
    const from = Math.floor(opts.from.getTime() / HOUR) * HOUR;
    const to = Math.ceil(opts.to.getTime() / HOUR) * HOUR;
    if (to <= from) throw new Error('--to must come after --from');
    const logStart = await firstLoggedDay(pool);
    const hours = [];
    for (let h = Math.max(from, logStart?.getTime() ?? from); h < to; h += HOUR)
      for (const eventType of EVENT_TYPES) hours.push({ eventType, hour: new Date(h) });
    if (logStart && from < logStart.getTime())
      console.log(`hours before ${logStart.toISOString()} are no longer in the event log: not re-delivered`);
    const log = createCommandLogger(cfg.LOG_LEVEL);
    const done = await backfillEventExport({ config: cfg, pool, metrics: new Metrics(false), log }, exp.id, hours);
    console.log(
      `${exp.name}: ${done.hours} hour(s) of a type re-planned; ${done.files} file(s) written holding ${done.events} ` +
        `event(s); ${done.staleKeys} file(s) no longer written deleted; ${done.hoursClosed} hour(s) closed (_SUCCESS)`,
    );
  });
}

/** The first day the log holds, or null when it holds none. */
async function firstLoggedDay(pool: Pool): Promise<Date | null> {
  const { rows } = await pool.query<{ day: Date | null }>(`SELECT event_log_start() AS day`);
  return rows[0]?.day ?? null;
}

/** `ces events status`. */
export async function statusCommand(config: () => Config, opts: { workspace?: string }): Promise<void> {
  await withPool(config, 'status', async (pool) => {
    const exports = await exportsOf(pool, opts.workspace);
    if (exports.length === 0) console.log('no event exports (declare them under event_exports in the workspace file)');
    for (const e of exports) {
      const { rows } = await pool.query<{
        closed: Date | null;
        written: Date | null;
        unwritten: number;
        redeliveries: number;
        oldest: Date | null;
      }>(
        `SELECT (SELECT max(hour) FROM event_export_hours WHERE export_id = $1) AS closed,
                (SELECT max(written_at) FROM event_export_files WHERE export_id = $1) AS written,
                (SELECT count(*)::int FROM event_export_files WHERE export_id = $1 AND written_at IS NULL) AS unwritten,
                (SELECT count(*)::int FROM event_redeliveries WHERE export_id = $1) AS redeliveries,
                (SELECT min(accepted_at) FROM (SELECT accepted_at FROM event_log
                  WHERE workspace_id = $2 AND type = ANY($3::text[]) AND xid >= $4 ORDER BY xid LIMIT 100) o) AS oldest`,
        [e.id, e.workspaceId, e.eventTypes, e.plannedXid.toString()],
      );
      const r = rows[0]!;
      const lag = r.oldest ? `${Math.round((Date.now() - r.oldest.getTime()) / 1000)} s` : '0 s';
      const failure = await exportFailure(pool, e.id);
      console.log(
        `${e.id}  ${e.name}  ${e.format}  last closed hour: ${r.closed?.toISOString() ?? 'none'}  last file: ` +
          `${r.written?.toISOString() ?? 'none'}  lag: ${lag}  files waiting: ${r.unwritten}  hours to re-deliver: ${r.redeliveries}` +
          `  destination: ${failure ? 'FAILING' : 'ok'}`,
      );
      if (failure)
        console.log(
          `  failing since ${failure.firstFailedAt.toISOString()}: ${failure.failures} refused pass(es), the last at ` +
            `${failure.lastFailedAt.toISOString()}; next attempt at ${failure.nextAttemptAt.toISOString()}; ` +
            `last error ${failure.code}: ${failure.error}`,
        );
    }
  });
}

/** `ces events erasure-report`. */
export async function erasureReportCommand(config: () => Config, opts: { workspace?: string }): Promise<void> {
  await withPool(config, 'erasure-report', async (pool) => {
    const ws = opts.workspace ? await findWorkspace(pool, opts.workspace) : undefined;
    const { rows } = await pool.query<{
      user_id: string;
      external_user_id: string | null;
      since: Date;
      until: Date;
      erased_at: Date;
      keys: string[];
    }>(
      `SELECT x.user_id, x.external_user_id, x.since, x.until, x.erased_at,
              coalesce((SELECT array_agg(f.key ORDER BY f.key) FROM event_export_files f JOIN event_exports e ON e.id = f.export_id
                         WHERE e.workspace_id = x.workspace_id AND f.hour >= date_trunc('hour', x.since) AND f.hour < x.until), '{}') AS keys
         FROM event_erasures x WHERE $1::uuid IS NULL OR x.workspace_id = $1
        ORDER BY x.erased_at`,
      [ws?.id ?? null],
    );
    if (rows.length === 0) console.log('no erasure left delivered files that the event log could not rewrite');
    for (const r of rows) {
      console.log(
        `erased ${r.erased_at.toISOString()}: user_id ${r.user_id}, external_user_id ${r.external_user_id ?? '(none)'}; ` +
          `their events from ${r.since.toISOString()} to ${r.until.toISOString()} are older than the log. Files to rewrite:`,
      );
      for (const k of r.keys) console.log(`  ${k}`);
    }
  });
}
