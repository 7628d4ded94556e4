import type { Logger } from '../logger.js';

/**
 * Adds the job of work already recorded in PostgreSQL: the one way every producer hands work to a queue. The row is
 * the promise and the job only wakes a worker, so Redis refusing the add (it went away) is logged and leaves the
 * answer standing: the reconciler (src/runtime/reconcile/repairs.ts) queues the work from its row once Redis is back.
 * Resolves to whether the job was added.
 */
export async function queueRecorded(
  log: Pick<Logger, 'warn'>,
  what: string,
  fields: Record<string, unknown>,
  add: () => Promise<unknown>,
): Promise<boolean> {
  try {
    await add();
    return true;
  } catch (err) {
    log.warn(
      { ...fields, reason: (err as Error).message },
      `${what} recorded but not queued; the reconciler will queue it`,
    );
    return false;
  }
}
