import { badRequest } from '../../platform/errors.js';
import { SCIM_GROUP_EXTENSION_SCHEMA, SCIM_GROUP_SCHEMA } from './group-schemas.js';
import { SCIM_LIMITS } from './schemas.js';
import { UUID } from './user-rows.js';

/**
 * The filters identity providers send to find a group (RFC 7644 3.4.2.2): `eq` on displayName (Okta and Entra ID
 * match pushed groups by it), externalId or id, and a member test, `members[value eq "<user id>"]` or
 * `members.value eq "<user id>"`; joined by `and`. Anything else is refused with invalidFilter.
 */
export type GroupCondition = { attribute: 'displayName' | 'externalId' | 'id' | 'member'; value: string };

const SUPPORTED =
  'supported: displayName, externalId, id and members.value with eq, members[value eq "<id>"], joined by and';

const escape = (s: string) => s.replace(/[.:]/g, (c) => `\\${c}`);
const URN = `(?:(?:${escape(SCIM_GROUP_SCHEMA)}|${escape(SCIM_GROUP_EXTENSION_SCHEMA)}):)?`;
const STRING = '"(?:[^"\\\\]|\\\\.)*"';
// One condition, anchored where the previous one ended (sticky); names and operators in any letter case.
const CONDITION = new RegExp(
  `\\s*${URN}(?:(displayName|externalId|id|members\\.value)\\s+eq\\s+(${STRING})|members\\[\\s*value\\s+eq\\s+(${STRING})\\s*\\])\\s*`,
  'iy',
);
const AND = /and\s/iy;

function jsonString(text: string): string {
  try {
    return String(JSON.parse(text));
  } catch {
    throw badRequest('Invalid filter: a value is not a valid JSON string', { scimType: 'invalidFilter' });
  }
}

export function parseGroupFilter(filter: string): GroupCondition[] {
  if (filter.length > SCIM_LIMITS.filter)
    throw badRequest(`filter must be at most ${SCIM_LIMITS.filter} characters`, { scimType: 'invalidFilter' });
  const conditions: GroupCondition[] = [];
  let at = 0;
  for (;;) {
    CONDITION.lastIndex = at;
    const match = CONDITION.exec(filter);
    if (!match) throw badRequest(`Unsupported filter: ${SUPPORTED}`, { scimType: 'invalidFilter' });
    const [, name, valueText, memberText] = match;
    if (memberText !== undefined) conditions.push({ attribute: 'member', value: jsonString(memberText) });
    else {
      const lower = name!.toLowerCase();
      const attribute =
        lower === 'displayname'
          ? 'displayName'
          : lower === 'externalid'
            ? 'externalId'
            : lower === 'id'
              ? 'id'
              : 'member';
      conditions.push({ attribute, value: jsonString(valueText!) });
    }
    at = CONDITION.lastIndex;
    if (at === filter.length) return conditions;
    AND.lastIndex = at;
    if (!AND.test(filter)) throw badRequest(`Unsupported filter: ${SUPPORTED}`, { scimType: 'invalidFilter' });
    at = AND.lastIndex;
  }
}

/** The conditions as SQL over `scim_groups` (alias-free), parameters numbered from `firstParam`. */
export function groupFilterSql(conditions: GroupCondition[], firstParam: number): { where: string; params: unknown[] } {
  const params: unknown[] = [];
  const param = (value: unknown) => {
    params.push(value);
    return `$${firstParam + params.length - 1}`;
  };
  const parts = conditions.map((c) => {
    switch (c.attribute) {
      case 'displayName':
        return `lower(display_name) = lower(${param(c.value)})`;
      case 'externalId':
        return `external_id = ${param(c.value)}`;
      case 'id':
        return UUID.test(c.value) ? `id = ${param(c.value.toLowerCase())}::uuid` : 'false';
      case 'member':
        return UUID.test(c.value)
          ? `EXISTS (SELECT 1 FROM scim_group_members m WHERE m.group_id = scim_groups.id AND m.user_id = ${param(c.value.toLowerCase())}::uuid)`
          : 'false';
    }
  });
  return { where: parts.join(' AND '), params };
}
