import { AppError, badRequest } from '../../platform/errors.js';
import { SCIM_GROUP_EXTENSION_SCHEMA, SCIM_GROUP_SCHEMA, ScimGroupBody, type ScimGroup } from './group-schemas.js';
import { asList, isObject, type Doc } from './multi-valued.js';
import type { ScimPatchOperation } from './schemas.js';
import { applyPermissions } from './user-patch.js';

/**
 * RFC 7644 3.5.2 PATCH of a group, as identity providers send it: Okta renames with
 * `{"op": "replace", "value": {"id": ..., "displayName": ...}}` and removes a member with
 * `members[value eq "<id>"]`; Entra ID sends `"Add"` / `"Remove"` with `path: "members"` and a list of `{value}`.
 * As for users, the operations edit the group as a PUT body, and the result is validated as one: all or nothing.
 */

type Op = ScimPatchOperation['op'];

/** The group as a PUT body: what the operations edit. */
export function editableGroup(group: ScimGroup): Doc {
  return {
    schemas: [SCIM_GROUP_SCHEMA],
    displayName: group.displayName,
    externalId: group.externalId ?? null,
    members: (group.members ?? []).map((m) => ({ value: m.value, display: m.display })),
    permissions: group[SCIM_GROUP_EXTENSION_SCHEMA]?.permissions
      ? structuredClone(group[SCIM_GROUP_EXTENSION_SCHEMA].permissions)
      : null,
  };
}

type Target =
  | { kind: 'displayName' | 'externalId' | 'members' | 'id' | 'extension' }
  | { kind: 'member'; value: string }
  | { kind: 'permissions'; sub?: string };

const invalidPath = (path: string, why: string) =>
  badRequest(`path "${path.slice(0, 200)}": ${why}`, { scimType: 'invalidPath' });
const CORE = `${SCIM_GROUP_SCHEMA.toLowerCase()}:`;
const EXTENSION = SCIM_GROUP_EXTENSION_SCHEMA.toLowerCase();
const MEMBER_FILTER = /^members\[\s*value\s+eq\s+("(?:[^"\\]|\\.)*")\s*\]$/i;

function parseGroupPath(path: string): Target {
  let rest = path.trim();
  const lower = rest.toLowerCase();
  if (lower === EXTENSION) return { kind: 'extension' };
  if (lower.startsWith(`${EXTENSION}:`)) {
    const inner = rest.slice(EXTENSION.length + 1);
    const match = /^permissions(?:\.(companyPermissions|appGroup))?$/i.exec(inner);
    if (!match)
      throw invalidPath(path, `the path must name an attribute of ${SCIM_GROUP_EXTENSION_SCHEMA}: permissions`);
    return {
      kind: 'permissions',
      sub: match[1] && (match[1].toLowerCase() === 'appgroup' ? 'appGroup' : 'companyPermissions'),
    };
  }
  if (lower.startsWith(CORE)) rest = rest.slice(CORE.length);
  else if (/^urn:/i.test(rest))
    throw invalidPath(
      path,
      `names no schema of the Group resource; its schemas are ${SCIM_GROUP_SCHEMA}, ${SCIM_GROUP_EXTENSION_SCHEMA}`,
    );
  const member = MEMBER_FILTER.exec(rest);
  if (member) {
    try {
      return { kind: 'member', value: String(JSON.parse(member[1]!)) };
    } catch {
      throw invalidPath(path, 'the filter value is not a valid JSON string');
    }
  }
  switch (rest.toLowerCase()) {
    case 'displayname':
      return { kind: 'displayName' };
    case 'externalid':
      return { kind: 'externalId' };
    case 'members':
      return { kind: 'members' };
    case 'id':
      return { kind: 'id' };
    case 'permissions':
      return { kind: 'permissions' };
    case 'meta':
    case 'schemas':
      throw badRequest(`${rest} is read-only`, { scimType: 'mutability' });
    default:
      throw invalidPath(
        path,
        'not an attribute of a Group: displayName, externalId, members, members[value eq "<id>"] or our extension\'s permissions',
      );
  }
}

const memberValue = (m: unknown) => (isObject(m) && typeof m.value === 'string' ? m.value.toLowerCase() : undefined);

function applyMembers(doc: Doc, op: Op, value: unknown): void {
  const members = asList(doc.members);
  if (op === 'replace') {
    doc.members = asList(value);
    return;
  }
  if (op === 'add') {
    if (value === undefined) throw badRequest('add needs a value', { scimType: 'invalidValue' });
    const held = new Set(members.map(memberValue));
    const added = asList(value).filter((m) => {
      const v = memberValue(m);
      if (v !== undefined && held.has(v)) return false;
      held.add(v);
      return true;
    });
    doc.members = [...members, ...added];
    return;
  }
  // remove: without a value every member (RFC 7644 3.5.2.2), with one the members it lists (Entra ID's form).
  if (value === undefined || value === null) {
    doc.members = [];
    return;
  }
  const removed = new Set(asList(value).map((m) => (typeof m === 'string' ? m.toLowerCase() : memberValue(m))));
  doc.members = members.filter((m) => !removed.has(memberValue(m)));
}

function applyToGroup(doc: Doc, groupId: string, op: Op, target: Target, value: unknown): void {
  if (op !== 'remove' && value === undefined) throw badRequest(`${op} needs a value`, { scimType: 'invalidValue' });
  switch (target.kind) {
    case 'id':
      // Okta's rename carries the group's own id in the value: repeating it changes nothing.
      if (typeof value === 'string' && value.toLowerCase() === groupId) return;
      throw badRequest('id is read-only', { scimType: 'mutability' });
    case 'displayName':
      if (op === 'remove')
        throw badRequest('displayName is required and cannot be removed', { scimType: 'mutability' });
      doc.displayName = value;
      return;
    case 'externalId':
      doc.externalId = op === 'remove' ? null : value;
      return;
    case 'members':
      return applyMembers(doc, op, value);
    case 'member':
      if (op !== 'remove')
        throw invalidPath(
          `members[value eq "${target.value}"]`,
          'a member filter takes remove; add members with path "members"',
        );
      return applyMembers(doc, 'remove', [{ value: target.value }]);
    case 'extension':
      if (op === 'remove') {
        doc.permissions = null;
        return;
      }
      if (!isObject(value))
        throw badRequest(`the value of ${SCIM_GROUP_EXTENSION_SCHEMA} must be an object {permissions}`, {
          scimType: 'invalidValue',
        });
      // scim2-models sends the container with its own `schemas` inside: not an attribute, nothing to apply.
      for (const [key, v] of Object.entries(value)) {
        if (key.toLowerCase() !== 'schemas')
          applyToGroup(doc, groupId, op, parseGroupPath(`${SCIM_GROUP_EXTENSION_SCHEMA}:${key}`), v);
      }
      return;
    case 'permissions':
      return applyPermissions(doc, op, target.sub, value);
  }
}

function applyWithoutPath(doc: Doc, groupId: string, op: Op, value: unknown): void {
  if (op === 'remove') throw badRequest('remove needs a path', { scimType: 'noTarget' });
  if (!isObject(value))
    throw badRequest(`${op} without a path needs an object value holding the attributes to set`, {
      scimType: 'invalidValue',
    });
  for (const [key, v] of Object.entries(value)) applyToGroup(doc, groupId, op, parseGroupPath(key), v);
}

/** Applies the operations in order to a copy of `doc` and validates the result as a Group body. */
export function applyGroupPatch(doc: Doc, groupId: string, operations: ScimPatchOperation[]): ScimGroupBody {
  const edited = structuredClone(doc);
  operations.forEach((operation, i) => {
    try {
      if (operation.path === undefined) applyWithoutPath(edited, groupId, operation.op, operation.value);
      else applyToGroup(edited, groupId, operation.op, parseGroupPath(operation.path), operation.value);
    } catch (err) {
      if (err instanceof AppError) throw new AppError(err.code, `Operations[${i}]: ${err.message}`, err.options);
      throw err;
    }
  });
  const { permissions, ...rest } = edited;
  const parsed = ScimGroupBody.safeParse({
    ...rest,
    [SCIM_GROUP_EXTENSION_SCHEMA]: permissions === null ? null : { permissions },
  });
  if (!parsed.success) {
    const problems = parsed.error.issues
      .slice(0, 10)
      .map((i) => (i.path.length > 0 ? `${i.path.join('.')}: ${i.message}` : i.message));
    throw badRequest(`The patched group is not valid: ${problems.join('; ')}`, { scimType: 'invalidValue' });
  }
  return parsed.data;
}
