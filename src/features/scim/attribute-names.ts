import { badRequest } from '../../platform/errors.js';
import { SCIM_ENTERPRISE_SCHEMA, SCIM_EXTENSION_SCHEMA } from './schemas.js';
import { SCIM_GROUP_EXTENSION_SCHEMA } from './group-schemas.js';
import {
  dashboardAttributes,
  groupAttributes,
  groupExtensionAttributes,
  userAttributes,
  type ScimAttribute,
} from './schema-attributes.js';

/**
 * RFC 7643 2.1: attribute names are case-insensitive. A body's names are rewritten to the spelling the schema uses
 * (`username` -> `userName`, `Name.GivenName` -> `name.givenName`) before it is validated, so that the one body
 * schema reads them. Names no schema defines are left as they are (they are ignored later, as RFC 7644 allows); one
 * attribute given twice in two spellings is refused, since either choice could be the wrong one.
 */

interface NameNode {
  name: string;
  children?: NameTree;
}
export type NameTree = ReadonlyMap<string, NameNode>;

/** The names of `attributes` (and of their sub-attributes), keyed by lower case; `extra` adds containers. */
export function nameTree(
  attributes: readonly ScimAttribute[],
  extra: Record<string, NameTree | undefined> = {},
): NameTree {
  const tree = new Map<string, NameNode>();
  for (const a of attributes)
    tree.set(a.name.toLowerCase(), {
      name: a.name,
      ...(a.subAttributes ? { children: nameTree(a.subAttributes) } : {}),
    });
  for (const [name, children] of Object.entries(extra))
    tree.set(name.toLowerCase(), { name, ...(children ? { children } : {}) });
  return tree;
}

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/** `value` with every name `tree` knows in its schema spelling, at every depth. Arrays are read element by element. */
export function canonicalNames(value: unknown, tree: NameTree, at = ''): unknown {
  if (Array.isArray(value)) return value.map((element, i) => canonicalNames(element, tree, `${at}[${i}]`));
  if (!isObject(value)) return value;
  const out: Record<string, unknown> = {};
  const spelledAs = new Map<string, string>();
  for (const [key, v] of Object.entries(value)) {
    const node = tree.get(key.toLowerCase());
    const name = node?.name ?? key;
    const earlier = spelledAs.get(name);
    if (earlier !== undefined) {
      throw badRequest(
        `${at ? `${at}.` : ''}${name} is given twice ("${earlier}" and "${key}"); attribute names ignore letter case`,
        { scimType: 'invalidSyntax' },
      );
    }
    spelledAs.set(name, key);
    out[name] = node?.children ? canonicalNames(v, node.children, `${at ? `${at}.` : ''}${name}`) : v;
  }
  return out;
}

const extensionNames = nameTree(dashboardAttributes(''));

/** The names of a User body: the core attributes, `schemas`, and the two extensions' containers. */
export const USER_NAMES = nameTree(userAttributes, {
  schemas: undefined,
  [SCIM_EXTENSION_SCHEMA]: extensionNames,
  [SCIM_ENTERPRISE_SCHEMA]: nameTree([], { department: undefined }),
});

/** The names of a Group body: the core attributes, `schemas`, and our Group extension's container. */
export const GROUP_NAMES = nameTree(groupAttributes, {
  schemas: undefined,
  [SCIM_GROUP_EXTENSION_SCHEMA]: nameTree(groupExtensionAttributes),
});

/** The names of a PatchOp message (the values inside operations are read by the PATCH code, in any letter case). */
export const PATCH_NAMES = nameTree([], {
  schemas: undefined,
  Operations: nameTree([], { op: undefined, path: undefined, value: undefined }),
});
