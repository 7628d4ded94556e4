import { z } from 'zod';
import type { Pool } from '../../platform/db/pool.js';
import { AppError } from '../../platform/errors.js';
import type { AttributeSelection } from './attributes.js';
import { findGroups } from './groups.js';
import { renderGroupsProjected } from './group-render.js';
import { SCIM_LIMITS, SCIM_LIST_SCHEMA } from './schemas.js';
import { findUsers, renderUsersProjected } from './users.js';

/**
 * RFC 7644 3.4.3: a query by POST (`/.search`), with the same filters, attribute selection, paging and errors as a
 * GET. At the root it searches Users, then Groups, as one list.
 */

export const SCIM_SEARCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:SearchRequest';

/** RFC 7644 3.4.3 gives attribute lists as arrays; a comma-separated string (the GET form) is taken too. */
const AttributeList = (field: string) =>
  z
    .union(
      [
        z
          .array(z.string().max(SCIM_LIMITS.text), { error: `${field} must be an array of attribute names` })
          .max(50, `${field} may name at most 50 attributes`),
        z.string().max(SCIM_LIMITS.filter),
      ],
      {
        error: `${field} must be an array of attribute names`,
      },
    )
    .transform((v) => (Array.isArray(v) ? v.join(',') : v))
    .optional();

const page = (field: string) =>
  z
    .number({ error: `${field} must be an integer` })
    .int(`${field} must be an integer`)
    .max(2 ** 31 - 1, `${field} is too large`);

export const ScimSearchRequest = z.object({
  schemas: z
    .array(z.string().max(SCIM_LIMITS.text), { error: 'schemas must be an array of strings' })
    .max(10, 'schemas may list at most 10 URNs')
    .refine((s) => s.includes(SCIM_SEARCH_SCHEMA), `schemas must contain ${SCIM_SEARCH_SCHEMA}`),
  attributes: AttributeList('attributes'),
  excludedAttributes: AttributeList('excludedAttributes'),
  filter: z
    .string({ error: 'filter must be a string' })
    .max(SCIM_LIMITS.filter, `filter must be at most ${SCIM_LIMITS.filter} characters`)
    .optional(),
  sortBy: z
    .string({ error: 'sortBy must be a string' })
    .max(SCIM_LIMITS.text)
    .optional()
    .describe('Ignored: sorting is not supported (ServiceProviderConfig)'),
  sortOrder: z
    .enum(['ascending', 'descending'], { error: 'sortOrder must be ascending or descending' })
    .optional()
    .describe('Ignored, as sortBy'),
  startIndex: page('startIndex').optional().describe('1-based; below 1 means 1'),
  count: page('count')
    .optional()
    .describe(`Default ${SCIM_LIMITS.defaultCount}, at most ${SCIM_LIMITS.maxCount}; negative means 0`),
});
export type ScimSearchRequest = z.output<typeof ScimSearchRequest>;

/** The paging and selection of a search request, as the GET list functions take them. */
export function listQueryOf(
  request: ScimSearchRequest,
): AttributeSelection & { filter?: string; startIndex: number; count: number } {
  return {
    attributes: request.attributes,
    excludedAttributes: request.excludedAttributes,
    filter: request.filter,
    startIndex: Math.max(1, request.startIndex ?? 1),
    count: Math.min(SCIM_LIMITS.maxCount, Math.max(0, request.count ?? SCIM_LIMITS.defaultCount)),
  };
}

/**
 * A filter names attributes of one resource type; at the root, a type whose attributes the filter does not name
 * matches nothing (RFC 7644 3.4.2.2). Only when no type can read the filter is it refused.
 */
async function settle<T>(search: () => Promise<T>): Promise<T | AppError> {
  try {
    return await search();
  } catch (err) {
    if (err instanceof AppError && err.options?.scimType === 'invalidFilter') return err;
    throw err;
  }
}

/** POST /.search: Users then Groups, paged as one list. */
export async function searchAll(pool: Pool, companyId: string, request: ScimSearchRequest, baseUrl: string) {
  const query = listQueryOf(request);
  const offset = query.startIndex - 1;
  // Counted first, so that each type's page is cut from the combined list: users fill it before groups do.
  const users = await settle(() => findUsers(pool, companyId, query.filter, 0, 0));
  const groups = await settle(() => findGroups(pool, companyId, query.filter, 0, 0));
  if (users instanceof AppError && groups instanceof AppError) throw users;
  const userTotal = users instanceof AppError ? 0 : users.total;
  const groupTotal = groups instanceof AppError ? 0 : groups.total;
  const userCount = Math.max(0, Math.min(query.count, userTotal - offset));
  const groupOffset = Math.max(0, offset - userTotal);
  const groupCount = Math.max(0, Math.min(query.count - userCount, groupTotal - groupOffset));
  const userRows = userCount > 0 ? (await findUsers(pool, companyId, query.filter, offset, userCount)).rows : [];
  const groupRows =
    groupCount > 0 ? (await findGroups(pool, companyId, query.filter, groupOffset, groupCount)).rows : [];
  const Resources = [
    ...(await renderUsersProjected(pool, companyId, userRows, baseUrl, query)),
    ...(await renderGroupsProjected(pool, companyId, groupRows, baseUrl, query)),
  ];
  return {
    schemas: [SCIM_LIST_SCHEMA],
    totalResults: userTotal + groupTotal,
    startIndex: query.startIndex,
    itemsPerPage: Resources.length,
    Resources,
  };
}
