import { badRequest } from '../../platform/errors.js';
import { SCIM_EXTENSION_SCHEMA, SCIM_LIMITS, SCIM_USER_SCHEMA } from './schemas.js';
import { UUID } from './user-rows.js';

/**
 * The filters identity providers send to find a user (RFC 7644 3.4.2.2): `eq` on userName, externalId, id, active
 * or an email value (optionally of one type), joined by `and`. Anything else is refused with invalidFilter rather
 * than answered wrongly.
 */
export type UserCondition =
  | { attribute: 'userName' | 'externalId' | 'id'; value: string }
  | { attribute: 'active'; value: boolean }
  | { attribute: 'email'; value: string; type?: string };

const SUPPORTED =
  'supported: userName, externalId, id, active, emails.value and emails[type eq "<type>"].value, each with eq, joined by and';

const escape = (s: string) => s.replace(/[.:]/g, (c) => `\\${c}`);
const URN = `(?:(?:${escape(SCIM_USER_SCHEMA)}|${escape(SCIM_EXTENSION_SCHEMA)}):)?`;
const STRING = '"(?:[^"\\\\]|\\\\.)*"';
// One condition, anchored where the previous one ended (sticky). Attribute names and operators are case-insensitive.
const CONDITION = new RegExp(
  `\\s*${URN}(userName|externalId|id|active|emails(?:\\[\\s*type\\s+eq\\s+(${STRING})\\s*\\])?\\.value)\\s+eq\\s+(${STRING}|true|false)\\s*`,
  'iy',
);
const AND = /and\s/iy;

function jsonString(text: string, what: string): string {
  try {
    return String(JSON.parse(text));
  } catch {
    // The value is not echoed: it is usually an email address, and refusals are logged.
    throw badRequest(`Invalid filter: the ${what} value is not a valid JSON string`, { scimType: 'invalidFilter' });
  }
}

function condition(attribute: string, typeText: string | undefined, valueText: string): UserCondition {
  const name = attribute.toLowerCase();
  const isBoolean = /^(true|false)$/i.test(valueText);
  if (name === 'active') {
    if (!isBoolean)
      throw badRequest('Invalid filter: active is compared with true or false', { scimType: 'invalidFilter' });
    return { attribute: 'active', value: valueText.toLowerCase() === 'true' };
  }
  if (isBoolean)
    throw badRequest(`Invalid filter: ${attribute} is compared with a string`, { scimType: 'invalidFilter' });
  if (name.startsWith('emails')) {
    const value = jsonString(valueText, 'email');
    return typeText === undefined
      ? { attribute: 'email', value }
      : { attribute: 'email', value, type: jsonString(typeText, 'email type') };
  }
  const canonical = name === 'username' ? 'userName' : name === 'externalid' ? 'externalId' : 'id';
  const value = jsonString(valueText, canonical);
  return { attribute: canonical, value: canonical === 'userName' ? value.trim() : value };
}

/** Parses a filter into the conditions that must all hold. */
export function parseUserFilter(filter: string): UserCondition[] {
  if (filter.length > SCIM_LIMITS.filter) {
    throw badRequest(`filter must be at most ${SCIM_LIMITS.filter} characters`, { scimType: 'invalidFilter' });
  }
  const conditions: UserCondition[] = [];
  let at = 0;
  for (;;) {
    CONDITION.lastIndex = at;
    const match = CONDITION.exec(filter);
    if (!match) throw badRequest(`Unsupported filter: ${SUPPORTED}`, { scimType: 'invalidFilter' });
    conditions.push(condition(match[1]!, match[2], match[3]!));
    at = CONDITION.lastIndex;
    if (at === filter.length) return conditions;
    AND.lastIndex = at;
    if (!AND.test(filter)) throw badRequest(`Unsupported filter: ${SUPPORTED}`, { scimType: 'invalidFilter' });
    at = AND.lastIndex;
  }
}

/**
 * The conditions as SQL over `dashboard_users`, parameters numbered from `firstParam`. An id that is not a uuid
 * names no user: the condition is false rather than a cast error.
 */
export function filterSql(conditions: UserCondition[], firstParam: number): { where: string; params: unknown[] } {
  const params: unknown[] = [];
  const param = (value: unknown) => {
    params.push(value);
    return `$${firstParam + params.length - 1}`;
  };
  const parts = conditions.map((c) => {
    switch (c.attribute) {
      case 'userName':
        return `lower(user_name) = lower(${param(c.value)})`;
      case 'externalId':
        return `external_id = ${param(c.value)}`;
      case 'id':
        return UUID.test(c.value) ? `id = ${param(c.value.toLowerCase())}::uuid` : 'false';
      case 'active':
        return `active = ${param(c.value)}`;
      case 'email': {
        const type = c.type === undefined ? '' : ` AND lower(e->>'type') = lower(${param(c.type)})`;
        return `EXISTS (SELECT 1 FROM jsonb_array_elements(emails) e WHERE lower(e->>'value') = lower(${param(c.value)})${type})`;
      }
    }
  });
  return { where: parts.join(' AND '), params };
}
