import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.js';
import { describeUnstorable, findUnstorable, MAX_BODY_DEPTH, printable, textProblem } from '../lib/storable.js';

/**
 * Input PostgreSQL would refuse, refused at the edge with a 400 in the route's error format, before any handler runs: a
 * NUL or an unpaired surrogate in a path parameter, a query key or value, or a body string or key (a body nested deeper
 * than MAX_BODY_DEPTH is refused by the parser, src/platform/http/json-body.ts). Otherwise such input reached a query
 * and came back as a 500, or worse, was accepted and failed later.
 */

/**
 * Routes whose own validation refuses unstorable body text object by object, in the body the spec documents:
 * /users/track lists such an object in `errors` and takes the rest; catalog writes name the item and the field
 * (`unable-to-coerce-value`, `invalid-keys-in-value-object`). Their paths and queries are still checked here.
 */
const BODY_CHECKED_BY_ROUTE = new Set([
  '/users/track',
  '/catalogs/:catalog_name/items',
  '/catalogs/:catalog_name/items/:item_id',
]);

/** The first path parameter or query key or value that cannot be stored, as a refusal. */
function urlProblem(where: 'path' | 'query', values: unknown): AppError | null {
  if (values === null || typeof values !== 'object') return null;
  for (const [name, value] of Object.entries(values as Record<string, unknown>)) {
    const keyProblem = textProblem(name);
    if (keyProblem)
      return refusal(
        where,
        describeUnstorable(
          { kind: keyProblem.kind, unit: keyProblem.unit, path: printable(name), inKey: true },
          MAX_BODY_DEPTH,
        ),
      );
    // A repeated query key (`key[]=a&key[]=b`) comes as an array of strings.
    for (const v of Array.isArray(value) ? value : [value]) {
      const p = typeof v === 'string' ? textProblem(v) : null;
      if (p)
        return refusal(
          where,
          describeUnstorable({ kind: p.kind, unit: p.unit, path: printable(name), inKey: false }, MAX_BODY_DEPTH),
        );
    }
  }
  return null;
}

const refusal = (where: string, reason: string) =>
  new AppError('bad_request', `Invalid ${where}: ${reason}`, { scimType: 'invalidValue' });

/** Registers the checks; after the auth hook, so that a request without credentials is refused as such first. */
export function registerHostileInput(app: FastifyInstance): void {
  app.addHook('onRequest', async (req) => {
    const problem = urlProblem('path', req.params) ?? urlProblem('query', req.query);
    if (problem) throw problem;
  });

  app.addHook('preValidation', async (req) => {
    if (req.body === undefined || BODY_CHECKED_BY_ROUTE.has(req.routeOptions.url ?? '')) return;
    const found = findUnstorable(req.body, { maxDepth: MAX_BODY_DEPTH });
    if (found) throw refusal('body', describeUnstorable(found, MAX_BODY_DEPTH));
  });
}
