import type { Config } from '../../platform/config.js';
import { lockNames, lockSession, tryLockSession, unlockSession } from '../../platform/db/advisory-locks.js';
import type { Pool } from '../../platform/db/pool.js';
import type { Logger } from '../../platform/logger.js';
import type { Metrics } from '../../platform/metrics.js';
import { storeFor, workspaceStorage, type WorkspaceStore } from '../../platform/storage/stores.js';
import { eventExport, type EventExport } from './event-exports.js';
import { EventKeys } from './event-keys.js';
import { clearFailure, DestinationRefused, oldestUnwritten, recordFailure, refusalsNamed } from './export-failures.js';
import { SCHEMA_VERSIONS } from './formats/schemas.js';
import { planFiles } from './plan-files.js';
import { replanHours, takeRedeliveries, type ExportHour } from './replan-hours.js';
import { closeHours, deleteStale, writePlannedFiles, type WriteOutcome } from './write-files.js';

/**
 * One pass over an event export: the files a crashed pass planned and did not write, then what is due now (planned,
 * then written), then the hours that closed. Passes come from the event-export queue's sweep (every
 * EVENT_EXPORT_SWEEP_SECONDS); one runs at a time per export (a session advisory lock: another worker that gets the
 * same export meanwhile skips it). A pass its destination refuses is recorded (./export-failures.ts) rather than failed:
 * the sweep waits out its backoff, and one warning a minute is logged, not one per attempt.
 */

export interface EventExportDeps {
  config: Pick<Config, 'LOCAL_STORE_DIR' | 'EVENTS_INSTANCE' | 'EVENTS_ENVIRONMENT' | 'EVENT_EXPORT_RETRY_MAX_SECONDS'>;
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
  /** Set when the destination refused the pass: its error code. */
  refused?: string;
}

/**
 * The export's store: its own bucket, else the workspace's export destination, else its part of the local store. Its
 * calls fail with DestinationRefused, which names the bucket and never its credentials.
 */
async function openStore(deps: EventExportDeps, exp: EventExport): Promise<WorkspaceStore> {
  const { destination, namespace } = await workspaceStorage(deps.pool, exp.workspaceId);
  const ws = storeFor(deps.config, exp.destination ?? destination, namespace);
  return { ...ws, store: refusalsNamed(ws.store, exp.destination ?? destination) };
}

export async function flushEventExport(
  deps: EventExportDeps,
  exportId: string,
  now = new Date(),
): Promise<FlushOutcome> {
  const outcome = await withExportLock(deps.pool, exportId, false, async () => {
    try {
      const pass = await flushLocked(deps, exportId, now);
      await destinationAccepted(deps, exportId);
      return pass;
    } catch (err) {
      if (!(err instanceof DestinationRefused)) throw err;
      await destinationRefused(deps, exportId, err);
      return { ran: true, files: 0, events: 0, hoursClosed: 0, refused: err.code };
    }
  });
  return outcome ?? { ran: false, files: 0, events: 0, hoursClosed: 0 };
}

/** A refused pass: recorded with its backoff, counted, the lag kept current, and a warning at most once a minute. */
async function destinationRefused(deps: EventExportDeps, exportId: string, refusal: DestinationRefused): Promise<void> {
  const failure = await recordFailure(deps.pool, exportId, refusal, deps.config.EVENT_EXPORT_RETRY_MAX_SECONDS);
  const exp = await eventExport(deps.pool, exportId);
  if (!failure || !exp) return;
  deps.metrics.eventExportFailures.inc({ export: exportId });
  const oldest = await oldestUnwritten(deps.pool, exp);
  deps.metrics.eventExportLag.set(
    { export: exportId },
    oldest ? Math.max(0, (Date.now() - oldest.getTime()) / 1000) : 0,
  );
  if (!failure.warn) return;
  deps.log.warn(
    {
      workspaceId: exp.workspaceId,
      eventExportId: exp.id,
      provider: refusal.provider,
      bucket: refusal.bucket,
      errorCode: refusal.code,
      error: refusal.message,
      failures: failure.failures,
      failingSince: failure.firstFailedAt.toISOString(),
      nextAttemptAt: failure.nextAttemptAt.toISOString(),
    },
    'event export destination refuses writes; retrying with backoff (logged at most once a minute)',
  );
}

/** A pass that went through: a failure the export had is over. */
async function destinationAccepted(deps: EventExportDeps, exportId: string): Promise<void> {
  const ended = await clearFailure(deps.pool, exportId);
  if (ended)
    deps.log.info(
      { eventExportId: exportId, failures: ended.failures, failingSince: ended.firstFailedAt.toISOString() },
      'event export destination accepts writes again',
    );
}

export interface BackfillOutcome extends FlushOutcome {
  hours: number;
  staleKeys: number;
}

/**
 * `ces events backfill`: the export's hours in [from, to) planned again from the log (./replan-hours.ts) and written,
 * the keys they no longer write deleted, then a pass as usual. Waits for a pass running elsewhere to end.
 */
export async function backfillEventExport(
  deps: EventExportDeps,
  exportId: string,
  hours: ExportHour[],
): Promise<BackfillOutcome> {
  const outcome = await withExportLock(deps.pool, exportId, true, async () => {
    const exp = await eventExport(deps.pool, exportId);
    if (!exp) throw new Error(`no event export ${exportId}`);
    const ws = await openStore(deps, exp);
    const keys = new EventKeys(exp, ws.prefix, ws.store.kind, deps.config, (t) => SCHEMA_VERSIONS[t]);
    ws.close();
    const replanned = await replanHours(deps.pool, exportId, hours, {
      file: keys.file.bind(keys),
      success: keys.success.bind(keys),
    });
    const pass = await flushLocked(deps, exportId, new Date());
    await destinationAccepted(deps, exportId);
    return { ...pass, hours: replanned.hours, staleKeys: replanned.staleKeys };
  });
  return outcome!;
}

/** Runs `fn` holding the export's session lock; `wait: false` gives up (undefined) when another process holds it. */
async function withExportLock<T>(
  pool: Pool,
  exportId: string,
  wait: boolean,
  fn: () => Promise<T>,
): Promise<T | undefined> {
  const lockClient = await pool.connect();
  try {
    if (wait) await lockSession(lockClient, lockNames.eventExport(exportId));
    else if (!(await tryLockSession(lockClient, lockNames.eventExport(exportId)))) return undefined;
    try {
      return await fn();
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
    const keys = new EventKeys(exp, ws.prefix, ws.store.kind, deps.config, (t) => SCHEMA_VERSIONS[t]);
    const exportKeys = { file: keys.file.bind(keys), success: keys.success.bind(keys) };
    // Hours an erasure asked for, planned again first: their _SUCCESS goes before their files are rewritten.
    await takeRedeliveries(deps.pool, exp.id, exportKeys);
    await deleteStale(deps.pool, exp, ws.store, 'success');
    const written = await writePlannedFiles(deps.pool, exp, ws.store, keys);
    const plan = await planFiles(deps.pool, exp.id, exportKeys.file, now);
    if (plan.planned > 0) addTo(written, await writePlannedFiles(deps.pool, exp, ws.store, keys));
    await deleteStale(deps.pool, exp, ws.store, 'file');
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

function addTo(total: WriteOutcome, more: WriteOutcome): void {
  total.files += more.files;
  total.events += more.events;
  total.bytes += more.bytes;
}
