import type { ApiKeyPrincipal, ScimPrincipal } from '../auth/principals.js';
import type { Permission } from '../auth/permissions.js';
import type { RateLimitRule } from '../auth/rate-limit.js';
import type { AppContext } from '../context.js';
import type { ErrorFormat } from '../errors.js';
import type { FastifyContextConfig } from 'fastify';

export interface RouteEntry {
  method: string;
  url: string;
  config: FastifyContextConfig;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** `api_key` (the default when `permission` is set), `scim`, or `none` for public routes. */
    auth?: 'api_key' | 'scim' | 'none';
    /** The permission an API key must carry. */
    permission?: Permission;
    /** The Limits-table bucket this route counts against (`RATE_LIMITS.*`). */
    rateLimit?: RateLimitRule;
    /** How errors of this route are written; `message` unless the spec documents another body. */
    errorFormat?: ErrorFormat;
  }
  interface FastifyRequest {
    apiKey?: ApiKeyPrincipal;
    scimToken?: ScimPrincipal;
    /** The X-Request-Origin of a SCIM request. */
    scimOrigin?: string;
  }
  interface FastifyInstance {
    ctx: AppContext;
    /** Every route registered, with its auth configuration (for tests and docs). */
    routeCatalog: RouteEntry[];
  }
}
