import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AppError } from '../errors.js';
import { documentedSchemaOf } from './schemas.js';

/**
 * A misspelt top-level key of a JSON body is refused, in one place for every route: `"purchase": [...]` on
 * /users/track, or `"output_fromat"` on an export, was dropped in silence (201, the purchases lost; the export run as
 * zip), whereas a misspelt key inside an object was already refused. The keys a route takes are read from the body
 * schema it declares (or, for a body its domain validates, the schema its reference documents), so they cannot drift.
 *
 * Left alone: SCIM routes (RFC 7644 lets a service provider ignore attributes it does not store, and identity
 * providers send their whole attribute mapping: docs/scim.md), a body schema open to any key, and routes that take no
 * body. `api_key`, the public API's legacy body credential, is taken out of every body and ignored: clients written
 * for the old API still send it, and the Authorization header is what authenticates.
 */

/** The legacy body credential of the public API: never refused, never read. */
export const LEGACY_BODY_KEY = 'api_key';

/**
 * The top-level keys a body schema takes, or null when it takes any key (a record, a loose object, a schema whose
 * shape cannot be read): such a body is left to its schema.
 */
export function topLevelKeys(schema: z.ZodType): ReadonlySet<string> | null {
  const documented = documentedSchemaOf(schema);
  if (documented) return topLevelKeys(documented);
  if (schema instanceof z.ZodObject) {
    const catchall = schema._zod.def.catchall;
    if (catchall && !(catchall instanceof z.ZodNever)) return null;
    return new Set(Object.keys(schema.shape));
  }
  if (schema instanceof z.ZodPipe) return topLevelKeys(schema._zod.def.in as z.ZodType);
  if (schema instanceof z.ZodOptional || schema instanceof z.ZodNullable || schema instanceof z.ZodDefault)
    return topLevelKeys(schema._zod.def.innerType as z.ZodType);
  if (schema instanceof z.ZodUnion) return unionOf((schema._zod.def.options as z.ZodType[]).map(topLevelKeys));
  if (schema instanceof z.ZodIntersection) {
    const { left, right } = schema._zod.def;
    return unionOf([topLevelKeys(left as z.ZodType), topLevelKeys(right as z.ZodType)]);
  }
  return null;
}

function unionOf(sets: (ReadonlySet<string> | null)[]): ReadonlySet<string> | null {
  if (sets.some((s) => s === null)) return null;
  return new Set(sets.flatMap((s) => [...s!]));
}

const isPlainObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** The refusal of a body's unknown top-level keys, naming them and what the endpoint takes. */
export function unknownKeysRefusal(unknown: string[], allowed: ReadonlySet<string>): AppError {
  const named = unknown
    .slice(0, 10)
    .map((k) => JSON.stringify(k))
    .join(', ');
  const plural = unknown.length > 1;
  return new AppError(
    'bad_request',
    `Invalid body: unknown key${plural ? 's' : ''} ${named}${unknown.length > 10 ? ` and ${unknown.length - 10} more` : ''} ` +
      `(this endpoint takes ${[...allowed].sort().join(', ')})`,
    { scimType: 'invalidSyntax' },
  );
}

/**
 * Registers the check: each route's keys are computed once, when it is registered; each request's body is checked
 * before the route's own validation, so a refused request reaches no handler and changes nothing.
 */
export function registerBodyKeys(app: FastifyInstance): void {
  const allowedByRoute = new Map<string, ReadonlySet<string>>();
  const routeKey = (method: string, url: string) => `${method} ${url}`;
  app.addHook('onRoute', (route) => {
    const body = (route.schema as { body?: unknown } | undefined)?.body;
    if (!(body instanceof z.ZodType) || route.config?.errorFormat === 'scim') return;
    const keys = topLevelKeys(body);
    if (!keys) return;
    for (const method of Array.isArray(route.method) ? route.method : [route.method])
      allowedByRoute.set(routeKey(method, route.url), keys);
  });
  app.addHook('preValidation', async (req) => {
    if (!isPlainObject(req.body)) return;
    if (req.routeOptions.config?.errorFormat === 'scim') return;
    delete req.body[LEGACY_BODY_KEY];
    const allowed = allowedByRoute.get(routeKey(req.method, req.routeOptions.url ?? ''));
    if (!allowed) return;
    const unknown = Object.keys(req.body).filter((k) => !allowed.has(k));
    if (unknown.length > 0) throw unknownKeysRefusal(unknown, allowed);
  });
}
