import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';

/** Routes served to anyone: probes, metrics, the API reference, signed download URLs (their own signature). */
const PUBLIC_PREFIXES = ['/healthz', '/readyz', '/metrics', '/docs', '/openapi.json', '/admin/queues', '/downloads/'];

function bearer(req: FastifyRequest): string | undefined {
  const header = req.headers.authorization;
  if (!header) return undefined;
  const match = /^Bearer\s+(\S+)\s*$/i.exec(header);
  return match?.[1];
}

/**
 * Authentication, permission and rate limit, in that order, before the body is even parsed: a request without a
 * valid key is refused whatever it carries, and a refused request changes nothing. A refusal repeats nothing of the
 * secret presented (not even a prefix): error bodies and logs end up in places secrets must not.
 */
export function registerAuth(app: FastifyInstance): void {
  app.addHook('onRoute', (route) => {
    const config = route.config ?? {};
    const isPublic = config.auth === 'none' || PUBLIC_PREFIXES.some((p) => route.url.startsWith(p));
    if (!isPublic && !config.permission && config.auth !== 'scim') {
      throw new Error(`route ${route.method} ${route.url} declares neither a permission nor auth: 'none'`);
    }
  });

  app.addHook('onRequest', async (req: FastifyRequest, reply: FastifyReply) => {
    const config = req.routeOptions.config;
    if (!config || config.auth === 'none' || (!config.permission && config.auth !== 'scim')) return;
    const { principals, rateLimiter } = app.ctx;
    const secret = bearer(req);

    let scopeId: string;
    if (config.auth === 'scim') {
      if (!secret) throw new AppError('unauthorized', 'Missing SCIM token: send Authorization: Bearer <SCIM_TOKEN>');
      const token = await principals.scimToken(secret);
      if (!token) {
        const asKey = await principals.apiKey(secret);
        throw new AppError(
          'unauthorized',
          asKey
            ? 'An API key cannot be used for SCIM: send a SCIM token'
            : 'Invalid SCIM token: it is unknown or has been revoked',
        );
      }
      const origin = req.headers['x-request-origin'];
      if (typeof origin !== 'string' || origin.trim() === '') {
        throw new AppError('unauthorized', 'Missing X-Request-Origin header');
      }
      req.scimToken = token;
      req.scimOrigin = origin;
      scopeId = token.companyId;
    } else {
      if (!secret) throw new AppError('unauthorized', 'Missing API key: send Authorization: Bearer <API_KEY>');
      const key = await principals.apiKey(secret);
      if (!key) throw new AppError('unauthorized', 'Invalid API key: it is unknown or has been revoked');
      if (config.permission && !key.permissions.has(config.permission)) {
        throw new AppError(
          'unauthorized',
          `This API key does not have the permission ${config.permission} required by this endpoint`,
        );
      }
      req.apiKey = key;
      scopeId = config.rateLimit?.scope === 'company' ? key.companyId : key.workspaceId;
    }

    if (config.rateLimit) {
      const result = await rateLimiter.hit(config.rateLimit, scopeId, `${req.method} ${req.routeOptions.url}`);
      reply.header('X-RateLimit-Limit', result.limit);
      reply.header('X-RateLimit-Remaining', result.remaining);
      reply.header('X-RateLimit-Reset', result.reset);
      if (!result.allowed) {
        throw new AppError(
          'rate_limited',
          `Rate limit of ${result.limit} requests per ${windowName(config.rateLimit.windowSeconds)} exceeded; retry after ${result.retryAfter} s`,
          {
            retryAfter: result.retryAfter,
          },
        );
      }
    }
  });
}

function windowName(seconds: number): string {
  if (seconds === 60) return 'minute';
  if (seconds === 3600) return 'hour';
  if (seconds === 86_400) return 'day';
  return `${seconds} seconds`;
}
