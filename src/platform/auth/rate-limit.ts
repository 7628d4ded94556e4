import type { Config } from '../config.js';
import type { DependencyHealth } from '../lib/dependency-health.js';
import type { Redis } from '../redis.js';
import { runScript } from '../redis-scripts/scripts.js';

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
  exportIds: {
    bucket: 'export-ids',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_EXPORT_IDS_PER_MINUTE,
  },
  cdiList: {
    bucket: 'cdi-list',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_CDI_LIST_PER_MINUTE,
  },
  cdiSync: {
    bucket: 'cdi-sync',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_CDI_SYNC_PER_MINUTE,
  },
  cdiStatus: {
    bucket: 'cdi-status',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_CDI_STATUS_PER_MINUTE,
  },
  externalIds: {
    bucket: 'external-ids',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_EXTERNAL_IDS_PER_MINUTE,
    perRoute: true,
  },
  track: { bucket: 'track', scope: 'workspace', windowSeconds: 60, limit: (c) => c.RATE_LIMIT_TRACK_PER_MINUTE },
  trackSync: {
    bucket: 'track-sync',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_TRACK_SYNC_PER_MINUTE,
  },
  catalogAsync: {
    bucket: 'catalog-async',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_CATALOG_ASYNC_PER_MINUTE,
  },
  catalogSync: {
    bucket: 'catalog-sync',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_CATALOG_SYNC_PER_MINUTE,
  },
  catalogFieldsSelections: {
    bucket: 'catalog-fields-selections',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_CATALOG_FIELDS_SELECTIONS_PER_MINUTE,
  },
  preferenceCenter: {
    bucket: 'preference-center',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_PREFERENCE_CENTER_PER_MINUTE,
  },
  /** Creates and updates: each endpoint its own 10 a minute, as the public API documents them. */
  preferenceCenterWrite: {
    bucket: 'preference-center-write',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_PREFERENCE_CENTER_WRITE_PER_MINUTE,
    perRoute: true,
  },
  preferenceCenterUrl: {
    bucket: 'preference-center-url',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_PREFERENCE_CENTER_URL_PER_MINUTE,
  },
  /** One budget for the lists of custom data, as the public API shares it: /custom_attributes, /events, /events/list, /purchases/product_list. */
  customDataLists: {
    bucket: 'custom-data-lists',
    scope: 'workspace',
    windowSeconds: 3600,
    limit: (c) => c.RATE_LIMIT_CUSTOM_DATA_LISTS_PER_HOUR,
  },
  subscriptionSet: {
    bucket: 'subscription-set',
    scope: 'workspace',
    windowSeconds: 60,
    limit: (c) => c.RATE_LIMIT_SUBSCRIPTION_SET_PER_MINUTE,
  },
} satisfies Record<string, RateLimitRule>;

export interface RateLimitResult {
  /** The rule's limit (X-RateLimit-Limit). */
  limit: number;
  /** The limit less the requests counted in the window, this one included when allowed; never negative. */
  remaining: number;
  /** UTC epoch seconds, rounded up, at which `remaining` next grows (X-RateLimit-Reset). */
  reset: number;
  allowed: boolean;
  /** Whole seconds, at least 1, until `reset`: on refusal, when one request fits again (Retry-After). */
  retryAfter: number;
}

/** Sub-windows per window: the window may reach back at most one sub-window (1/60) further than it says. */
const SUB_WINDOWS = 60;

/** What one step of the window returns: allowed (1/0), counted after this request, now ms, ms of the next change. */
type WindowStep = [number, number, number, number];

/** Windows kept in memory at most; beyond that they are all forgotten (an outage is short, the map stays small). */
const LOCAL_MAX_WINDOWS = 10_000;

/** src/platform/redis-scripts/sliding-window.lua, step for step, over hashes kept in this process's memory: the limiter while Redis is away. */
class LocalWindows {
  private readonly windows = new Map<string, Map<number, number>>();

  hit(key: string, limit: number, window: number, g: number, now: number): WindowStep {
    let fields = this.windows.get(key);
    if (!fields) {
      if (this.windows.size >= LOCAL_MAX_WINDOWS) this.windows.clear();
      fields = new Map();
      this.windows.set(key, fields);
    }
    const current = Math.floor(now / g);
    const first = Math.floor((now - window) / g);
    let count = 0;
    let oldest: number | undefined;
    for (const [sub, n] of fields) {
      if (sub < first) {
        fields.delete(sub);
        continue;
      }
      count += n;
      if (oldest === undefined || sub < oldest) oldest = sub;
    }
    let allowed = 0;
    if (count < limit) {
      allowed = 1;
      count += 1;
      fields.set(current, (fields.get(current) ?? 0) + 1);
      if (oldest === undefined || current < oldest) oldest = current;
    }
    if (fields.size === 0) this.windows.delete(key);
    let at = now + g;
    const need = count - Math.min(count, limit) + 1;
    if (need === 1 && oldest !== undefined) {
      at = (oldest + 1) * g + window;
    } else if (count >= need) {
      let gone = 0;
      for (const sub of [...fields.keys()].sort((a, b) => a - b)) {
        gone += fields.get(sub)!;
        if (gone >= need) {
          at = (sub + 1) * g + window;
          break;
        }
      }
    }
    return [allowed, count, now, at];
  }
}

/**
 * A sliding-window limit in Redis, shared by every API process: at most `limit` allowed requests in any rolling
 * `windowSeconds`, whatever the window boundaries.
 *
 * Each rule, scope (and route, for `perRoute` rules) has one hash of 60 sub-window counters of g = window / 60.
 * A request at t counts the allowed requests of the sub-windows starting at or after floor((t - W) / g) * g, which
 * covers the last W and at most g more; older fields are deleted. It is allowed iff that count is below the limit, and
 * only then counted, so refused requests cost nothing and a client that keeps retrying gets through once old
 * requests leave. The key expires when its newest field stops counting (W + g after a write), so idle keys vanish
 * and a key holds at most 61 fields while the clock
 * does not step back. The clock is Redis' own (`TIME`), so processes with skewed clocks agree.
 *
 * The headers it feeds: Limit is the limit; Remaining is the limit less the count after this request (never
 * negative); Reset is the epoch second (rounded up) at which Remaining next grows, that is when the oldest counted
 * sub-window leaves the window (its start + g + W), or now + g when nothing is counted; Retry-After, on refusal, is
 * the whole seconds (at least 1) until enough sub-windows have left that one request fits, which is Reset unless
 * the limit was lowered below what is already counted. A limit of 0 refuses everything.
 */
export class RateLimiter {
  private readonly local = new LocalWindows();

  /** With `health`, a Redis that is away is reported there and the limit is kept in this process meanwhile. */
  constructor(
    private readonly redis: Redis,
    private readonly prefix: string,
    private readonly config: Config,
    private readonly health?: DependencyHealth,
  ) {}

  /**
   * Counts one request if it fits. `nowMs` replaces Redis' clock (tests); production callers leave it out.
   *
   * While Redis is away (not connected, or a call fails for want of a connection), the same sliding window runs
   * in this process's memory instead, so requests that need only PostgreSQL (/users/track) go on being served and
   * limited: each API process then allows up to the limit on its own, and its counts are not carried back to Redis.
   * The outage is reported to `health`, which logs it once, not per request.
   */
  async hit(rule: RateLimitRule, scopeId: string, route: string, nowMs?: number): Promise<RateLimitResult> {
    if (this.health && this.redis.status !== 'ready') return this.hitLocally(rule, scopeId, route, nowMs);
    try {
      return await this.hitInRedis(rule, scopeId, route, nowMs);
    } catch (err) {
      if (!this.health?.report(err)) throw err;
      return this.hitLocally(rule, scopeId, route, nowMs);
    }
  }

  /** The window of `hit`, in this process's memory. */
  private hitLocally(rule: RateLimitRule, scopeId: string, route: string, nowMs?: number): RateLimitResult {
    const limit = rule.limit(this.config);
    const windowMs = rule.windowSeconds * 1000;
    const subMs = Math.max(1, Math.ceil(windowMs / SUB_WINDOWS));
    const key = `${rule.perRoute ? `${rule.bucket}:${route}` : rule.bucket}:${scopeId}`;
    return windowResult(limit, this.local.hit(key, limit, windowMs, subMs, Math.floor(nowMs ?? Date.now())));
  }

  private async hitInRedis(
    rule: RateLimitRule,
    scopeId: string,
    route: string,
    nowMs?: number,
  ): Promise<RateLimitResult> {
    const limit = rule.limit(this.config);
    const windowMs = rule.windowSeconds * 1000;
    const subMs = Math.max(1, Math.ceil(windowMs / SUB_WINDOWS));
    const bucket = rule.perRoute ? `${rule.bucket}:${route}` : rule.bucket;
    // A key family of its own (the old fixed-window counters were `rl`), ending with the sub-window length, so that
    // a changed window or granularity starts a new hash rather than misreading the fields of the old one.
    const key = `${this.prefix}:rls:${bucket}:${scopeId}:${subMs}`;
    const args = [String(limit), String(windowMs), String(subMs), nowMs === undefined ? '' : String(Math.floor(nowMs))];
    return windowResult(
      limit,
      ((await runScript(this.redis, 'sliding-window', [key], args)) as unknown[]).map(Number) as WindowStep,
    );
  }
}

/** The headers' figures from a window step (see RateLimiter). */
function windowResult(limit: number, [allowed, count, now, at]: WindowStep): RateLimitResult {
  return {
    limit,
    remaining: Math.max(0, limit - count),
    reset: Math.ceil(at / 1000),
    allowed: allowed === 1,
    retryAfter: Math.max(1, Math.ceil((at - now) / 1000)),
  };
}
