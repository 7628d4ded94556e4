import type { FastifyRequest } from 'fastify';
import type { ApiKeyPrincipal, ScimPrincipal } from '../auth/principals.js';
import { AppError } from '../errors.js';
import './route-config.js';

/** Who a request speaks for, as the auth hook (./auth-hook.ts) resolved it before any handler runs. */

/** The API key principal of an authenticated route (set by the auth hook before any handler runs). */
export function apiKeyOf(req: FastifyRequest): ApiKeyPrincipal {
  if (!req.apiKey) throw new AppError('internal', 'route reached without an API key principal');
  return req.apiKey;
}

export function scimTokenOf(req: FastifyRequest): ScimPrincipal {
  if (!req.scimToken) throw new AppError('internal', 'route reached without a SCIM principal');
  return req.scimToken;
}
