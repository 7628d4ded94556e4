import type { Redis } from '../../platform/redis.js';

/**
 * The two limits on running exports, held in Redis so that every API and worker process sees them:
 * one export per segment (a key holding the export id, with a lease) and at most N per company (a sorted set of
 * export ids scored by lease expiry). Leases, not plain keys: a crashed worker stops renewing and its hold lapses.
 */
export interface ExportLockKeys {
  segment: string;
  company: string;
}

export const exportLockKeys = (redisPrefix: string, segmentId: string, companyId: string): ExportLockKeys => ({
  segment: `${redisPrefix}:export:segment:${segmentId}`,
  company: `${redisPrefix}:export:company:${companyId}`,
});

// Redis' own clock, so that processes on machines with skewed clocks agree on lease expiry.
const NOW = `local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)`;

// Keep the company set's own expiry at least one lease ahead, so an abandoned set disappears by itself.
const TOUCH_COMPANY = `local ttl = redis.call('PTTL', KEYS[2])
if ttl < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end`;

/** Returns {0} taken, {1, holder} segment busy, {2, running} company at its cap. */
const ACQUIRE = `${NOW}
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return {1, holder} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local running = redis.call('ZCARD', KEYS[2])
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) and running >= tonumber(ARGV[3]) then return {2, tostring(running)} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
${TOUCH_COMPANY}
return {0, ''}`;

/** Extends both holds; re-takes a lapsed segment lock nobody else took. Returns 1, or 0 when another export holds it. */
const RENEW = `${NOW}
local holder = redis.call('GET', KEYS[1])
local ok = 1
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  ok = 0
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
${TOUCH_COMPANY}
return ok`;

const RELEASE = `if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`;

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
  const [code, detail] = (await redis.eval(
    ACQUIRE,
    2,
    keys.segment,
    keys.company,
    exportId,
    String(leaseMs),
    String(maxPerCompany),
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
  return Number(await redis.eval(RENEW, 2, keys.segment, keys.company, exportId, String(leaseMs))) === 1;
}

export async function releaseExportLock(redis: Redis, keys: ExportLockKeys, exportId: string): Promise<void> {
  await redis.eval(RELEASE, 2, keys.segment, keys.company, exportId);
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
