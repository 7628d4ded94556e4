import { badRequest } from '../errors.js';
import { SCIM_LIMITS, SCIM_USER_SCHEMA } from './schemas.js';

export interface UserNameFilter {
  userName: string;
}

const UNSUPPORTED = 'Unsupported filter: only userName eq "<EMAIL>" is supported';

// RFC 7644 3.4.2.2: attribute names and operators are case-insensitive, the attribute may carry its schema URN,
// and the value is a JSON string (escapes allowed).
const USER_NAME_EQ = new RegExp(`^\\s*(?:${SCIM_USER_SCHEMA.replace(/[.:]/g, (c) => `\\${c}`)}:)?userName\\s+eq\\s+("(?:[^"\\\\]|\\\\.)*")\\s*$`, 'i');

/** Parses the one filter identity providers use to find an account before creating it. */
export function parseUserFilter(filter: string): UserNameFilter {
  if (filter.length > SCIM_LIMITS.filter) {
    throw badRequest(`filter must be at most ${SCIM_LIMITS.filter} characters`, { scimType: 'invalidFilter' });
  }
  const match = USER_NAME_EQ.exec(filter);
  if (!match) throw badRequest(UNSUPPORTED, { scimType: 'invalidFilter' });
  let value: unknown;
  try {
    value = JSON.parse(match[1]!);
  } catch {
    // The value is not echoed: it is usually an email address, and refusals are logged.
    throw badRequest('Invalid filter: the userName value is not a valid JSON string', { scimType: 'invalidFilter' });
  }
  return { userName: String(value).trim() };
}
