import type { Config } from '../../platform/config.js';
import { lockNames, tryLockSession, unlockSession } from '../../platform/db/advisory-locks.js';
import type { Pool } from '../../platform/db/pool.js';
import type { Logger } from '../../platform/logger.js';
import type { Metrics } from '../../platform/metrics.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../../platform/storage/stores.js';
import { eventExport, type EventExport } from './event-exports.js';
import { EventKeys } from './event-keys.js';
import { SCHEMA_VERSIONS } from './formats/schemas.js';
import { planFiles } from './plan-files.js';
import { closeHours, writePlannedFiles } from './write-files.js';

/**
 * One pass over an event export: the files a crashed pass planned and did not write, then what is due now (planned,
 * then written), then the hours that closed. Passes come from the event-export queue's sweep (every
 * EVENT_EXPORT_SWEEP_SECONDS); one runs at a time per export (a session advisory lock: another worker that gets the
 * same export meanwhile skips it).
 */

export interface EventExportDeps {
  config: Pick<Config, 'LOCAL_STORE_DIR' | 'EVENTS_INSTANCE' | 'EVENTS_ENVIRONMENT'>;
  pool: Pool;
  metrics: Metrics;
  log: Logger;
}

export interface FlushOutcome {
  /** False when another process was flushing the export. */
  ran: boolean;
  files: number;
  events: number;
  hoursClosed: number;
}

/** The export's store: its own bucket, else the workspace's export destination, else its part of the local store. */
async function openStore(deps: EventExportDeps, exp: EventExport): Promise<WorkspaceStore> {
  const { destination, namespace } = await workspaceStorage(deps.pool, exp.workspaceId);
  return storeFor(deps.config, exp.destination ?? destination, namespace);
}

export async function flushEventExport(
  deps: EventExportDeps,
  exportId: string,
  now = new Date(),
): Promise<FlushOutcome> {
  const lockClient = await deps.pool.connect();
  try {
    if (!(await tryLockSession(lockClient, lockNames.eventExport(exportId))))
      return { ran: false, files: 0, events: 0, hoursClosed: 0 };
    try {
      return await flushLocked(deps, exportId, now);
    } finally {
      await unlockSession(lockClient, lockNames.eventExport(exportId)).catch(() => {});
    }
  } finally {
    lockClient.release();
  }
}

async function flushLocked(deps: EventExportDeps, exportId: string, now: Date): Promise<FlushOutcome> {
  const exp = await eventExport(deps.pool, exportId);
  if (!exp) return { ran: true, files: 0, events: 0, hoursClosed: 0 };
  const ws = await openStore(deps, exp);
  try {
    const kind = ws.store.kind;
    const keys = new EventKeys(exp, ws.prefix, kind, deps.config, (t) => SCHEMA_VERSIONS[t]);
    const before = await writePlannedFiles(deps.pool, exp, ws.store, keys);
    const plan = await planFiles(deps.pool, exp.id, (t, h, s) => keys.file(t, h, s), now);
    const after = plan.planned > 0 ? await writePlannedFiles(deps.pool, exp, ws.store, keys) : before;
    const written =
      plan.planned > 0 ? { files: before.files + after.files, events: before.events + after.events } : before;
    const hoursClosed = await closeHours(deps.pool, (await eventExport(deps.pool, exp.id)) ?? exp, ws.store, keys);
    deps.metrics.eventExportEvents.inc({ export: exp.id }, written.events);
    const lag = plan.backlog.oldest ? Math.max(0, (now.getTime() - plan.backlog.oldest.getTime()) / 1000) : 0;
    deps.metrics.eventExportLag.set({ export: exp.id }, lag);
    if (written.files > 0)
      deps.log.info(
        { eventExportId: exp.id, files: written.files, events: written.events, hoursClosed },
        'event export files written',
      );
    return { ran: true, files: written.files, events: written.events, hoursClosed };
  } finally {
    ws.close();
  }
}
