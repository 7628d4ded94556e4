import type { FastifyContextConfig } from 'fastify';
import type { ErrorFormat } from '../errors.js';

/**
 * The error answers of each operation in the OpenAPI document, from the one error model: which statuses a route can
 * answer (from what it takes and how it is configured) and the body each route family writes (errors.ts renderError).
 * test/global-setup.ts compares them with the statuses the whole suite observed, route by route.
 */

export interface RouteShape {
  method: string;
  config: FastifyContextConfig;
  /** The route validates a body, a query or path parameters. */
  hasBody: boolean;
  hasInput: boolean;
  hasParams: boolean;
}

declare module 'fastify' {
  interface FastifyContextConfig {
    /** Error statuses the route answers beyond those its shape implies (404 of a lookup by query, SCIM's 409...). */
    errors?: number[];
  }
}

/** Why each status is answered, as the document says it. */
const REASONS: Record<number, string> = {
  400: 'Malformed JSON, a wrong type, a missing or over-limit field: the body names what is wrong; nothing is changed',
  401: 'Missing, unknown or revoked credentials, or a key without the permission',
  403: 'A signed link that was altered or has expired',
  404: "Unknown id, name or object (another tenant's included)",
  409: 'A conflict: the same Idempotency-Key is still being handled, or the resource exists',
  410: 'Gone: the download link expired',
  413: 'Body larger than BODY_LIMIT_BYTES',
  415: 'Content type other than JSON, or a charset other than UTF-8',
  422: 'The Idempotency-Key was used with another request',
  429: 'Rate limit spent (Retry-After), or an export limit reached',
  500: 'An unexpected failure; the body says nothing of its cause (logged with the request id)',
  503: 'PostgreSQL or Redis is unavailable (Retry-After)',
};

const MESSAGE = { type: 'object', required: ['message'], properties: { message: { type: 'string' } } };
const BODIES: Record<ErrorFormat, unknown> = {
  message: MESSAGE,
  scim: {
    type: 'object',
    required: ['schemas', 'detail', 'status'],
    properties: {
      schemas: { type: 'array', items: { type: 'string', const: 'urn:ietf:params:scim:api:messages:2.0:Error' } },
      detail: { type: 'string' },
      status: { type: 'integer' },
      scimType: {
        type: 'string',
        description:
          'RFC 7644: invalidValue, invalidSyntax, invalidFilter, invalidPath, noTarget, mutability, uniqueness',
      },
    },
  },
  catalog: {
    oneOf: [
      {
        type: 'object',
        required: ['errors', 'message'],
        properties: {
          message: { type: 'string', const: 'Invalid Request' },
          errors: {
            type: 'array',
            items: {
              type: 'object',
              required: ['id', 'message', 'parameters', 'parameter_values'],
              properties: {
                id: { type: 'string' },
                message: { type: 'string' },
                parameters: { type: 'array', items: { type: 'string' } },
                parameter_values: { type: 'array' },
              },
            },
          },
        },
      },
      MESSAGE,
    ],
  },
  error: { oneOf: [{ type: 'object', required: ['error'], properties: { error: { type: 'string' } } }, MESSAGE] },
};

/** The error statuses a route can answer. */
export function declaredErrorStatuses(route: RouteShape): number[] {
  const statuses = new Set<number>(route.config.errors ?? []);
  const authenticated = route.config.auth !== 'none';
  // Any authenticated route refuses a malformed body (even on a GET), and may fail unexpectedly (500, nothing of the
  // cause in the body; the catalog family's arbitrary-error) or find a dependency away (503).
  if (route.hasInput || authenticated) statuses.add(400);
  if (authenticated) {
    statuses.add(401);
    statuses.add(500);
    statuses.add(503);
  }
  if (route.hasParams) statuses.add(404);
  if (route.hasBody) {
    statuses.add(413);
    statuses.add(415);
  }
  if (route.config.rateLimit) statuses.add(429);
  if (route.config.idempotent) {
    statuses.add(409);
    statuses.add(422);
  }
  return [...statuses].sort((a, b) => a - b);
}

/** The OpenAPI responses object for those statuses, with the family's body. */
export function errorResponses(route: RouteShape): Record<string, unknown> {
  const format = route.config.errorFormat ?? 'message';
  const contentType = format === 'scim' ? 'application/scim+json' : 'application/json';
  return Object.fromEntries(
    declaredErrorStatuses(route).map((status) => [
      String(status),
      { description: REASONS[status] ?? 'Error', content: { [contentType]: { schema: BODIES[format] } } },
    ]),
  );
}

/** `/catalogs/:catalog_name/items` as OpenAPI writes paths: `/catalogs/{catalog_name}/items`. */
export const openApiPath = (url: string) => url.replace(/:([A-Za-z0-9_]+)/g, '{$1}');
