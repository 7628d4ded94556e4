import { badRequest } from '../../platform/errors.js';
import { SCIM_EXTENSION_SCHEMA, SCIM_LIMITS, SCIM_USER_SCHEMA } from './schemas.js';

/**
 * RFC 7644 3.4.2.5 / 3.9: `attributes` returns only the named attributes, `excludedAttributes` all but them. `id`
 * and `schemas` are always returned. Names are case-insensitive, may carry the core or extension schema URN, and
 * may name a sub-attribute (`name.givenName`); `urn:...:ces:2.0:User:department` names the attribute inside our
 * extension's container.
 */

type Resource = Record<string, unknown>;
type Path = string[];

/** Returned whatever the selection (RFC 7643 `returned: always`). */
const ALWAYS = new Set(['id', 'schemas']);
const MAX_NAMES = 50;

/** The schemas of a resource type: names may carry the core URN (dropped) or the extension's (kept as the container). */
export interface ResourceUrns {
  core: string;
  extension: string;
}
const USER_URNS: ResourceUrns = { core: SCIM_USER_SCHEMA, extension: SCIM_EXTENSION_SCHEMA };

function parseNames(list: string, param: string, urns: ResourceUrns): Path[] {
  if (list.length > SCIM_LIMITS.filter)
    throw badRequest(`${param} must be at most ${SCIM_LIMITS.filter} characters`, { scimType: 'invalidValue' });
  const names = list
    .split(',')
    .map((n) => n.trim())
    .filter((n) => n !== '');
  if (names.length > MAX_NAMES)
    throw badRequest(`${param} may name at most ${MAX_NAMES} attributes`, { scimType: 'invalidValue' });
  return names.map((name) => {
    const lower = name.toLowerCase();
    for (const urn of [urns.core, urns.extension]) {
      const prefix = `${urn.toLowerCase()}:`;
      if (lower.startsWith(prefix)) {
        const rest = name.slice(prefix.length).split('.');
        return urn === urns.core ? rest : [urns.extension, ...rest];
      }
    }
    // The whole extension, named by its URN alone.
    if (lower === urns.extension.toLowerCase()) return [urns.extension];
    return name.split('.');
  });
}

/** The key of `object` that `name` names, in any letter case. */
const keyOf = (object: Resource, name: string) =>
  Object.keys(object).find((k) => k.toLowerCase() === name.toLowerCase());

const isObject = (v: unknown): v is Resource => typeof v === 'object' && v !== null && !Array.isArray(v);

/** Copies the value at `path` (a sub-attribute of each element when the parent is multi-valued) into `target`. */
function copyPath(source: Resource, target: Resource, path: Path): void {
  const key = keyOf(source, path[0]!);
  if (key === undefined) return;
  const value = source[key];
  if (path.length === 1) {
    target[key] = value;
    return;
  }
  if (isObject(value)) {
    const into = isObject(target[key]) ? (target[key] as Resource) : {};
    copyPath(value, into, path.slice(1));
    if (Object.keys(into).length > 0) target[key] = into;
  } else if (Array.isArray(value)) {
    const existing = Array.isArray(target[key]) ? (target[key] as Resource[]) : value.map(() => ({}));
    value.forEach((element, i) => {
      if (isObject(element)) copyPath(element, existing[i]!, path.slice(1));
    });
    target[key] = existing;
  }
}

function dropPath(resource: Resource, path: Path): void {
  const key = keyOf(resource, path[0]!);
  if (key === undefined) return;
  if (path.length === 1) {
    delete resource[key];
    return;
  }
  const value = resource[key];
  if (isObject(value)) dropPath(value, path.slice(1));
  else if (Array.isArray(value)) for (const element of value) if (isObject(element)) dropPath(element, path.slice(1));
}

export interface AttributeSelection {
  attributes?: string;
  excludedAttributes?: string;
}

interface Identified {
  id: string;
  schemas: string[];
}
/** A resource narrowed by a selection: whatever else it lost, it keeps id and schemas. */
export type Projected<T extends Identified> = Partial<T> & Identified & Record<string, unknown>;

/** A function that narrows each resource to the selection; the identity when nothing is selected. */
export function attributeProjection(
  selection: AttributeSelection,
  urns: ResourceUrns = USER_URNS,
): <T extends Identified>(resource: T) => Projected<T> {
  if (selection.attributes !== undefined && selection.attributes.trim() !== '') {
    const paths = parseNames(selection.attributes, 'attributes', urns);
    return (resource) => {
      const out: Resource = { schemas: resource.schemas, id: resource.id };
      for (const path of paths) copyPath(resource as unknown as Resource, out, path);
      return out as Projected<typeof resource>;
    };
  }
  if (selection.excludedAttributes !== undefined && selection.excludedAttributes.trim() !== '') {
    const paths = parseNames(selection.excludedAttributes, 'excludedAttributes', urns).filter(
      (p) => !(p.length === 1 && ALWAYS.has(p[0]!.toLowerCase())),
    );
    return (resource) => {
      const out = structuredClone(resource) as unknown as Resource;
      for (const path of paths) dropPath(out, path);
      return out as Projected<typeof resource>;
    };
  }
  return (resource) => resource as Projected<typeof resource>;
}
