import { AppError, badRequest } from '../../platform/errors.js';
import { addEmails, addWorkspaces, asList, isObject, keepOnePrimary, sameWorkspace, type Doc } from './multi-valued.js';
import {
  SCIM_ENTERPRISE_SCHEMA,
  SCIM_EXTENSION_SCHEMA,
  SCIM_USER_SCHEMA,
  ScimUserReplace,
  type ScimPatchOperation,
  type ScimUser,
} from './schemas.js';

/**
 * RFC 7644 3.5.2 PATCH, over the user as a document in request form: the operations edit a copy of what PUT would
 * accept, and the result is validated exactly as a PUT body. So a PATCH can express nothing a PUT could not, every
 * rule of the body holds, and one invalid operation refuses the whole request before anything is written.
 */

type Op = ScimPatchOperation['op'];

/** The stored user as a PUT body: what the operations edit. Workspaces and teams keep their ids and names. */
export function editableDocument(user: ScimUser): Doc {
  return {
    schemas: [SCIM_USER_SCHEMA],
    userName: user.userName,
    displayName: user.displayName ?? null,
    name: { ...user.name },
    department: user.department ?? null,
    permissions: user.permissions ? structuredClone(user.permissions) : null,
    active: user.active,
    externalId: user.externalId ?? null,
    emails: structuredClone(user.emails ?? []),
  };
}

/** Core and enterprise attributes this service does not store: accepted and ignored, as POST and PUT do. */
const IGNORED = new Set(
  'nickname profileurl title usertype preferredlanguage locale timezone password phonenumbers ims photos addresses entitlements roles x509certificates'.split(
    ' ',
  ),
);
const IGNORED_NAME_PARTS = new Set(['formatted', 'middlename', 'honorificprefix', 'honorificsuffix']);
const READ_ONLY = new Set(['id', 'meta', 'groups', 'lastsigninat', 'schemas']);
/** The attributes /Schemas marks required: a remove is refused (`active` is kept so that access is never implied). */
const REQUIRED = new Set(['userName', 'name', 'active']);
const CANONICAL: Record<string, string> = {
  username: 'userName',
  displayname: 'displayName',
  name: 'name',
  active: 'active',
  externalid: 'externalId',
  emails: 'emails',
  department: 'department',
  permissions: 'permissions',
};
const SUB_ATTRIBUTES: Record<string, Record<string, string>> = {
  name: { givenname: 'givenName', familyname: 'familyName' },
  emails: { value: 'value', type: 'type', primary: 'primary' },
  permissions: { companypermissions: 'companyPermissions', appgroup: 'appGroup' },
};

interface EmailFilter {
  attribute: 'value' | 'type' | 'primary';
  value: string | boolean;
}

type Target =
  | { kind: 'ignored' }
  | { kind: 'extension'; urn: typeof SCIM_EXTENSION_SCHEMA | typeof SCIM_ENTERPRISE_SCHEMA }
  | { kind: 'attribute'; attribute: string; sub?: string; filter?: EmailFilter };

/** The schemas whose attributes a User PATCH path may name. */
const USER_URNS = [SCIM_USER_SCHEMA, SCIM_EXTENSION_SCHEMA, SCIM_ENTERPRISE_SCHEMA];

const invalidPath = (path: string, why: string) =>
  badRequest(`path "${path.slice(0, 200)}": ${why}`, { scimType: 'invalidPath' });

const PATH =
  /^([A-Za-z][\w$-]*)(?:\[\s*([A-Za-z]+)\s+eq\s+("(?:[^"\\]|\\.)*"|true|false)\s*\])?(?:\.([A-Za-z][\w$-]*))?$/i;

/** Reads a path: an attribute, optionally URN-qualified, with an optional `[attr eq value]` filter and sub-attribute. */
function parsePath(path: string): Target {
  let rest = path.trim();
  const lower = rest.toLowerCase();
  // RFC 7644 3.5.2: a path may name an extension's container by its URN alone; the value holds its attributes.
  if (lower === SCIM_EXTENSION_SCHEMA.toLowerCase()) return { kind: 'extension', urn: SCIM_EXTENSION_SCHEMA };
  if (lower === SCIM_ENTERPRISE_SCHEMA.toLowerCase()) return { kind: 'extension', urn: SCIM_ENTERPRISE_SCHEMA };
  for (const urn of USER_URNS) {
    if (!lower.startsWith(`${urn.toLowerCase()}:`)) continue;
    rest = rest.slice(urn.length + 1);
    if (urn === SCIM_ENTERPRISE_SCHEMA)
      return rest.toLowerCase() === 'department' ? { kind: 'attribute', attribute: 'department' } : { kind: 'ignored' };
    if (urn === SCIM_EXTENSION_SCHEMA && !/^(department|permissions)(\.|$)/i.test(rest)) {
      if (/^(lastsigninat|effectivepermissions)$/i.test(rest))
        throw badRequest(`${rest} is read-only`, { scimType: 'mutability' });
      throw invalidPath(
        path,
        `the path must name an attribute of ${SCIM_EXTENSION_SCHEMA}: department or permissions (lastSignInAt is read-only)`,
      );
    }
    break;
  }
  if (/^urn:/i.test(rest)) {
    throw invalidPath(path, `names no schema of the User resource; its schemas are ${USER_URNS.join(', ')}`);
  }
  const match = PATH.exec(rest);
  if (!match) throw invalidPath(path, 'not an attribute path this service understands');
  const [, name, filterAttribute, filterValue, subName] = match;
  const key = name!.toLowerCase();
  if (IGNORED.has(key)) return { kind: 'ignored' };
  if (READ_ONLY.has(key)) throw badRequest(`${name} is read-only`, { scimType: 'mutability' });
  const attribute = CANONICAL[key];
  if (!attribute) throw invalidPath(path, `unknown attribute ${name}`);
  let sub: string | undefined;
  if (subName !== undefined) {
    if (attribute === 'name' && IGNORED_NAME_PARTS.has(subName.toLowerCase())) return { kind: 'ignored' };
    sub = SUB_ATTRIBUTES[attribute]?.[subName.toLowerCase()];
    if (!sub) throw invalidPath(path, `${attribute} has no sub-attribute ${subName}`);
  }
  if (filterAttribute === undefined) {
    if (attribute === 'emails' && sub !== undefined)
      throw invalidPath(path, 'name the email entry, as in emails[type eq "work"].value');
    return { kind: 'attribute', attribute, sub };
  }
  if (attribute !== 'emails') throw invalidPath(path, 'filters are supported on emails only');
  const filterKey = SUB_ATTRIBUTES.emails![filterAttribute.toLowerCase()] as EmailFilter['attribute'] | undefined;
  if (!filterKey) throw invalidPath(path, 'an emails filter compares value, type or primary');
  let value: string | boolean;
  try {
    value = JSON.parse(
      filterValue!.toLowerCase() === 'true' || filterValue!.toLowerCase() === 'false'
        ? filterValue!.toLowerCase()
        : filterValue!,
    ) as string | boolean;
  } catch {
    throw invalidPath(path, 'the filter value is not a valid JSON string');
  }
  return { kind: 'attribute', attribute, sub, filter: { attribute: filterKey, value } };
}

function sameValue(a: unknown, b: unknown): boolean {
  if (typeof a === 'string' && typeof b === 'string') return a.toLowerCase() === b.toLowerCase();
  if (typeof b === 'boolean') return a === b || (typeof a === 'string' && a.toLowerCase() === String(b));
  return a === b;
}

function needValue(op: Op, value: unknown): void {
  if (value === undefined) throw badRequest(`${op} needs a value`, { scimType: 'invalidValue' });
}

/** add appends to a list of strings (a value it holds is not added twice); replace sets it whole. */
function mergeList(op: Op, current: unknown, value: unknown): unknown[] {
  const existing = Array.isArray(current) ? current : [];
  if (op === 'replace') return asList(value);
  const added = asList(value).filter((v) => !existing.some((e) => JSON.stringify(e) === JSON.stringify(v)));
  return [...existing, ...added];
}

function removeValues(
  current: unknown,
  value: unknown,
  matches: (element: unknown, removed: unknown) => boolean,
): unknown[] {
  const existing = Array.isArray(current) ? current : [];
  if (value === undefined) return [];
  const removed = asList(value);
  return existing.filter((e) => !removed.some((r) => matches(e, r)));
}

export function applyPermissions(doc: Doc, op: Op, sub: string | undefined, value: unknown): void {
  if (sub === undefined && op === 'remove') {
    doc.permissions = null;
    return;
  }
  // A user without permissions of its own: a remove inside them changes nothing, an add or replace assigns them.
  if (!isObject(doc.permissions) && op === 'remove') return;
  const permissions = isObject(doc.permissions) ? doc.permissions : {};
  doc.permissions = permissions;
  if (sub === undefined) {
    if (!isObject(value))
      throw badRequest('permissions must be an object {companyPermissions, appGroup}', { scimType: 'invalidValue' });
    for (const [key, v] of Object.entries(value))
      applyPermissions(doc, op, SUB_ATTRIBUTES.permissions![key.toLowerCase()] ?? key, v);
    return;
  }
  if (op === 'remove') {
    permissions[sub] = removeValues(
      permissions[sub],
      value,
      sub === 'appGroup' ? sameWorkspace : (e, r) => e === r || (isObject(r) && e === r.value),
    );
    return;
  }
  permissions[sub] =
    sub === 'appGroup' && op === 'add'
      ? addWorkspaces(permissions[sub], value)
      : mergeList(op, permissions[sub], value);
}

function applyEmails(doc: Doc, op: Op, target: { sub?: string; filter?: EmailFilter }, value: unknown): void {
  const emails = (Array.isArray(doc.emails) ? doc.emails : []) as unknown[];
  doc.emails = emails;
  const { sub, filter } = target;
  if (!filter) {
    if (op === 'remove')
      doc.emails = removeValues(emails, value, (e, r) => isObject(e) && isObject(r) && sameValue(e.value, r.value));
    else if (op === 'replace') doc.emails = asList(value);
    else keepOnePrimary(emails, addEmails(emails, value));
    return;
  }
  const matches = (e: unknown) => isObject(e) && sameValue(e[filter.attribute], filter.value);
  if (op === 'remove') {
    // An entry without its value is no entry: removing the value removes the entry.
    if (sub === undefined || sub === 'value') doc.emails = emails.filter((e) => !matches(e));
    else for (const e of emails) if (matches(e)) delete (e as Doc)[sub];
    return;
  }
  const patch = sub === undefined ? value : { [sub]: value };
  if (!isObject(patch))
    throw badRequest('the value of an emails entry must be an object {value, type, primary}', {
      scimType: 'invalidValue',
    });
  const found = emails.filter(matches) as Doc[];
  // Entra ID sets emails[type eq "work"].value on users that have no work address yet: the entry is created.
  if (found.length === 0) found.push({ [filter.attribute]: filter.value });
  for (const e of found) Object.assign(e, patch);
  for (const e of found) if (!emails.includes(e)) emails.push(e);
  keepOnePrimary(emails, found);
}

/** A path naming an extension's container: its value holds attributes of that extension, each applied. */
function applyToExtension(doc: Doc, op: Op, urn: string, value: unknown): void {
  if (op === 'remove') {
    // Of the enterprise extension only department is stored; of ours, department and permissions (the rest is
    // read-only).
    doc.department = null;
    if (urn === SCIM_EXTENSION_SCHEMA) doc.permissions = null;
    return;
  }
  needValue(op, value);
  if (!isObject(value))
    throw badRequest(`the value of ${urn} must be an object of its attributes`, { scimType: 'invalidValue' });
  // scim2-models sends the container with its own `schemas` inside: not an attribute, nothing to apply.
  for (const [key, v] of Object.entries(value))
    if (key.toLowerCase() !== 'schemas') applyToTarget(doc, op, parsePath(`${urn}:${key}`), v);
}

function applyToTarget(doc: Doc, op: Op, target: Target, value: unknown): void {
  if (target.kind === 'ignored') return;
  if (target.kind === 'extension') return applyToExtension(doc, op, target.urn, value);
  const { attribute, sub } = target;
  if (op !== 'remove') needValue(op, value);
  if (attribute === 'emails') return applyEmails(doc, op, target, value);
  if (attribute === 'permissions') return applyPermissions(doc, op, sub, value);
  if (attribute === 'name') {
    const name = isObject(doc.name) ? doc.name : {};
    doc.name = name;
    if (op === 'remove')
      throw badRequest(`name${sub ? `.${sub}` : ''} is required and cannot be removed`, { scimType: 'mutability' });
    if (sub !== undefined) name[sub] = value;
    else if (isObject(value))
      for (const [k, v] of Object.entries(value)) name[SUB_ATTRIBUTES.name![k.toLowerCase()] ?? k] = v;
    else throw badRequest('name must be an object {givenName, familyName}', { scimType: 'invalidValue' });
    return;
  }
  if (op === 'remove') {
    if (REQUIRED.has(attribute))
      throw badRequest(`${attribute} is required and cannot be removed`, { scimType: 'mutability' });
    doc[attribute] = null;
    return;
  }
  doc[attribute] = value;
}

/** An operation without a path: its value is a partial resource whose attributes are each applied (Okta's form). */
function applyWithoutPath(doc: Doc, op: Op, value: unknown): void {
  if (op === 'remove') throw badRequest('remove needs a path', { scimType: 'noTarget' });
  if (!isObject(value))
    throw badRequest(`${op} without a path needs an object value holding the attributes to set`, {
      scimType: 'invalidValue',
    });
  for (const [key, v] of Object.entries(value)) applyToTarget(doc, op, parsePath(key), v);
}

/**
 * Applies the operations in order to a copy of `doc` and validates the result as a PUT body. Throws a 400 (with
 * RFC 7644's scimType) for the first operation that cannot apply or for every rule the result breaks.
 */
export function applyPatch(doc: Doc, operations: ScimPatchOperation[]): ScimUserReplace {
  const edited = structuredClone(doc);
  operations.forEach((operation, i) => {
    try {
      if (operation.path === undefined) applyWithoutPath(edited, operation.op, operation.value);
      else applyToTarget(edited, operation.op, parsePath(operation.path), operation.value);
    } catch (err) {
      // Which operation failed, so that a client fixes the right one.
      if (err instanceof AppError) throw new AppError(err.code, `Operations[${i}]: ${err.message}`, err.options);
      throw err;
    }
  });
  const parsed = ScimUserReplace.safeParse(edited);
  if (!parsed.success) {
    const problems = parsed.error.issues
      .slice(0, 10)
      .map((i) => (i.path.length > 0 ? `${i.path.join('.')}: ${i.message}` : i.message));
    throw badRequest(`The patched user is not valid: ${problems.join('; ')}`, { scimType: 'invalidValue' });
  }
  return parsed.data;
}
