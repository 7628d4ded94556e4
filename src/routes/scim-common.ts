import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { AppError } from '../platform/errors.js';
import { canonicalNames, type NameTree } from '../features/scim/attribute-names.js';
import type { ScimActor } from '../features/scim/audit.js';
import { SCIM_LIMITS } from '../features/scim/schemas.js';
import { describeValidation } from '../platform/http/error-handler.js';
import { scimTokenOf } from '../platform/http/principals.js';

/** What every SCIM route family (Users, Groups, search, discovery) shares: media type, config, queries, refusals. */

/** RFC 7644 3.1: SCIM messages are application/scim+json, which every identity provider accepts. */
export const SCIM_JSON = 'application/scim+json; charset=utf-8';

/** Authentication, daily budget and error bodies of every SCIM route. */
export const scimRouteConfig = { auth: 'scim', rateLimit: RATE_LIMITS.scim, errorFormat: 'scim' } as const;
export const scimSchemaCommon = { tags: ['scim'], security: [{ scimToken: [] }] };
export const scimHeadersNote =
  'Needs a SCIM token (`Authorization: Bearer`) and `X-Request-Origin`; counts against the daily SCIM limit of the company.';

export const IdParams = z.object({ id: z.string().describe('The id a create or a filtered GET returned') });

/** RFC 7644 3.4.2.5: attribute names, comma-separated; id and schemas are always returned. */
export const AttributeQuery = z.object({
  attributes: z
    .string({ error: 'attributes must be given once' })
    .optional()
    .describe('Return only these attributes (comma-separated; `name.givenName`, URN-qualified names allowed)'),
  excludedAttributes: z
    .string({ error: 'excludedAttributes must be given once' })
    .optional()
    .describe('Return all attributes but these'),
});

/** RFC 7644 3.4.2.4: a startIndex below 1 means 1, a negative count means 0; at most SCIM_LIMITS.maxCount are returned. */
export const startIndexOf = (v: number) => Math.max(1, v);
export const countOf = (v: number) => Math.min(SCIM_LIMITS.maxCount, Math.max(0, v));

export const listQuery = (filterNote: string) =>
  AttributeQuery.extend({
    filter: z.string({ error: 'filter must be given once' }).optional().describe(filterNote),
    startIndex: z.coerce
      .number({ error: 'startIndex must be an integer' })
      .int('startIndex must be an integer')
      .max(2 ** 31 - 1, 'startIndex is too large')
      .transform(startIndexOf)
      .default(1),
    count: z.coerce
      .number({ error: 'count must be an integer' })
      .int('count must be an integer')
      .transform(countOf)
      .default(SCIM_LIMITS.defaultCount),
  });

/**
 * Body and query refusals carry RFC 7644's scimType. Validation is attached rather than thrown by Fastify so that it
 * arrives here, where the SCIM family adds `invalidSyntax` (not a JSON object) or `invalidValue` (a field is wrong).
 */
export function refuseInvalid(req: FastifyRequest): void {
  const err = req.validationError as (FastifyError & { validationContext?: string }) | undefined;
  if (!err) return;
  const body = req.body;
  if (err.validationContext === 'body' && (typeof body !== 'object' || body === null || Array.isArray(body))) {
    throw new AppError('bad_request', 'The request body must be a JSON object (a SCIM resource or message)', {
      scimType: 'invalidSyntax',
    });
  }
  const issues = (err.validation ?? []) as { instancePath?: string; message?: string }[];
  throw new AppError('bad_request', describeValidation(err.validationContext, issues), { scimType: 'invalidValue' });
}

export function actorOf(req: FastifyRequest): ScimActor {
  const token = scimTokenOf(req);
  return { tokenId: token.tokenId, tokenName: token.tokenName, origin: req.scimOrigin ?? '' };
}

export const scimReply = (reply: FastifyReply) => reply.type(SCIM_JSON);

/** RFC 7643 2.1: a body's attribute names in any letter case, read in the schema's spelling (src/features/scim/attribute-names.ts). */
export const canonicalBody = (names: NameTree) => async (req: FastifyRequest) => {
  req.body = canonicalNames(req.body, names);
};

/**
 * The answer to a PATCH: the resource, or 204 and no body when the request said `Prefer: return=minimal` (RFC 7240),
 * which some identity providers send to skip the resource.
 */
export function sendPatched(req: FastifyRequest, reply: FastifyReply, resource: unknown) {
  if (/\breturn=minimal\b/i.test(String(req.headers.prefer ?? ''))) {
    return reply.code(204).header('Preference-Applied', 'return=minimal').send(null);
  }
  return scimReply(reply).send(resource);
}
