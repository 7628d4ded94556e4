import type { Redis } from '../../platform/redis.js';
import { runScript } from '../../platform/redis-scripts/scripts.js';

/**
 * The two limits on running exports, held in Redis so that every API and worker process sees them:
 * one export per segment (a key holding the export id, with a lease) and at most N per company (a sorted set of
 * export ids scored by lease expiry). Leases, not plain keys: a crashed worker stops renewing and its hold lapses.
 * The scripts that take, renew and release them are src/platform/redis-scripts/export-hold-*.lua.
 */
export interface ExportLockKeys {
  segment: string;
  company: string;
}

export const exportLockKeys = (redisPrefix: string, segmentId: string, companyId: string): ExportLockKeys => ({
  segment: `${redisPrefix}:export:segment:${segmentId}`,
  company: `${redisPrefix}:export:company:${companyId}`,
});

export type AcquireResult =
  { ok: true } | { ok: false; limit: 'segment'; holder: string } | { ok: false; limit: 'company'; running: number };

/** Takes the segment lock and a company slot for exportId, atomically, or says which limit refused. */
export async function acquireExportLock(
  redis: Redis,
  keys: ExportLockKeys,
  exportId: string,
  leaseMs: number,
  maxPerCompany: number,
): Promise<AcquireResult> {
  const [code, detail] = (await runScript(
    redis,
    'export-hold-acquire',
    [keys.segment, keys.company],
    [exportId, String(leaseMs), String(maxPerCompany)],
  )) as [number, string];
  if (code === 0) return { ok: true };
  if (code === 1) return { ok: false, limit: 'segment', holder: detail };
  return { ok: false, limit: 'company', running: Number(detail) };
}

/** Extends the holds of a live export; false when another export has taken the segment meanwhile. */
export async function renewExportLock(
  redis: Redis,
  keys: ExportLockKeys,
  exportId: string,
  leaseMs: number,
): Promise<boolean> {
  const held = await runScript(redis, 'export-hold-renew', [keys.segment, keys.company], [exportId, String(leaseMs)]);
  return Number(held) === 1;
}

export async function releaseExportLock(redis: Redis, keys: ExportLockKeys, exportId: string): Promise<void> {
  await runScript(redis, 'export-hold-release', [keys.segment, keys.company], [exportId]);
}

/**
 * Renews the holds every third of the lease while `fn` runs; a renewal failure is logged by `onError` and retried at
 * the next tick (the job itself is not stopped: its output stays exact, only the concurrency guard is weakened).
 */
export async function withLeaseRenewal<T>(
  redis: Redis,
  keys: ExportLockKeys,
  exportId: string,
  leaseMs: number,
  onError: (err: unknown) => void,
  fn: () => Promise<T>,
): Promise<T> {
  await renewExportLock(redis, keys, exportId, leaseMs);
  const timer = setInterval(
    () => {
      renewExportLock(redis, keys, exportId, leaseMs).then((held) => {
        if (!held) onError(new Error('segment lock is held by another export'));
      }, onError);
    },
    Math.max(1000, Math.floor(leaseMs / 3)),
  );
  timer.unref();
  try {
    return await fn();
  } finally {
    clearInterval(timer);
  }
}
