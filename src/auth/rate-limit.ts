import type { Config } from '../config.js';
import type { Redis } from '../redis.js';

/**
 * A rate-limit bucket from the spec's Limits table. Routes that name the same bucket share one counter;
 * `perRoute` buckets count each route separately (the spec's "default rate limit" is per endpoint).
 */
export interface RateLimitRule {
  bucket: string;
  scope: 'workspace' | 'company';
  windowSeconds: number;
  limit: (config: Config) => number;
  perRoute?: boolean;
}

export const RATE_LIMITS = {
  default: {
    bucket: 'default',
    scope: 'workspace',
    windowSeconds: 3600,
    limit: (c) => c.RATE_LIMIT_DEFAULT_PER_HOUR,
    perRoute: true,
  },
  scim: { bucket: 'scim', scope: 'company', windowSeconds: 86_400, limit: (c) => c.RATE_LIMIT_SCIM_PER_DAY },
  alias: { bucket: 'alias', scope: 'workspace', windowSeconds: 60, limit: (c) => c.RATE_LIMIT_ALIAS_PER_MINUTE },
  track: { bucket: 'track', scope: 'workspace', windowSeconds: 60, limit: (c) => c.RATE_LIMIT_TRACK_PER_MINUTE },
  catalogAsync: { bucket: 'catalog-async', scope: 'workspace', windowSeconds: 60, limit: (c) => c.RATE_LIMIT_CATALOG_ASYNC_PER_MINUTE },
  catalogSync: { bucket: 'catalog-sync', scope: 'workspace', windowSeconds: 60, limit: (c) => c.RATE_LIMIT_CATALOG_SYNC_PER_MINUTE },
  preferenceCenter: {
    bucket: 'preference-center',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_PREFERENCE_CENTER_PER_MINUTE,
  },
} satisfies Record<string, RateLimitRule>;

export interface RateLimitResult {
  limit: number;
  remaining: number;
  /** UTC epoch seconds at which the window ends. */
  reset: number;
  allowed: boolean;
  retryAfter: number;
}

// INCR and set the expiry on first use, atomically, so that a crash between the two never leaves an eternal key.
const INCR_SCRIPT = `
local c = redis.call('INCR', KEYS[1])
if c == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[1]) end
return c`;

/** Fixed-window counters in Redis, shared by every API process. */
export class RateLimiter {
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly config: Config,
  ) {}

  async hit(rule: RateLimitRule, scopeId: string, route: string, nowMs = Date.now()): Promise<RateLimitResult> {
    const limit = rule.limit(this.config);
    const windowMs = rule.windowSeconds * 1000;
    const window = Math.floor(nowMs / windowMs);
    const reset = ((window + 1) * windowMs) / 1000;
    const bucket = rule.perRoute ? `${rule.bucket}:${route}` : rule.bucket;
    const key = `${this.prefix}:rl:${bucket}:${scopeId}:${window}`;
    const count = Number(await this.redis.eval(INCR_SCRIPT, 1, key, String(windowMs + 1000)));
    const allowed = count <= limit;
    return {
      limit,
      remaining: Math.max(0, limit - count),
      reset,
      allowed,
      retryAfter: Math.max(1, Math.ceil(reset - nowMs / 1000)),
    };
  }
}
