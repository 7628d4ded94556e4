/**
 * Checks a SCIM resource against schema resources as /Schemas serves them (RFC 7643 7): every attribute defined by a
 * schema the resource lists, of the declared type and plurality, required ones present. Mutability and `returned` are
 * not checked, except that `from: 'client'` does not ask for readOnly attributes, which a client never sends.
 */

export interface SchemaAttribute {
  name: string;
  type: string;
  description?: string;
  multiValued?: boolean;
  required?: boolean;
  mutability?: string;
  subAttributes?: SchemaAttribute[];
}

export interface SchemaResource {
  id: string;
  name?: string;
  attributes: SchemaAttribute[];
}

export interface CheckOptions {
  /** `server` (the default): a response, where every required attribute is present. `client`: a request body. */
  from?: 'server' | 'client';
}

type Json = Record<string, unknown>;

/** RFC 7643 3.1: attributes of every resource, whatever its schemas. */
const COMMON = new Set(['schemas', 'id', 'meta', 'externalid']);

/** xsd:dateTime, as RFC 7643 2.3.5 asks: a date, a time, and a zone. */
const DATE_TIME = /^-?\d{4,}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$/;

const isObject = (v: unknown): v is Json => typeof v === 'object' && v !== null && !Array.isArray(v);
// RFC 7643 2.1: attribute names and schema URIs are case-insensitive.
const named = (defs: SchemaAttribute[], key: string) => defs.find((d) => d.name.toLowerCase() === key.toLowerCase());
const valueOf = (object: Json, name: string) =>
  object[Object.keys(object).find((k) => k.toLowerCase() === name.toLowerCase()) ?? ''];

/** The problems found, one sentence each naming the attribute path; none when the resource conforms. */
export function checkAgainstSchemas(
  resource: unknown,
  schemaResources: SchemaResource[],
  options: CheckOptions = {},
): string[] {
  if (!isObject(resource)) return ['the resource is not a JSON object'];
  const listed = resource.schemas;
  if (!Array.isArray(listed) || listed.length === 0 || !listed.every((s) => typeof s === 'string'))
    return ['schemas must be a non-empty array of schema URIs'];
  const problems: string[] = [];
  const byId = new Map(schemaResources.map((s) => [s.id.toLowerCase(), s]));
  const schemas: SchemaResource[] = [];
  for (const urn of listed as string[]) {
    const schema = byId.get(urn.toLowerCase());
    if (schema) schemas.push(schema);
    else problems.push(`schemas lists ${urn}, which no served schema defines`);
  }
  const rootDefs = schemas.flatMap((s) => s.attributes);
  const containers = new Map<SchemaResource, Json>();

  for (const [key, value] of Object.entries(resource)) {
    if (/^urn:/i.test(key)) {
      const schema = byId.get(key.toLowerCase());
      if (!listed.some((u) => u.toLowerCase() === key.toLowerCase()))
        problems.push(`${key}: a schema container, but schemas does not list ${key}`);
      else if (!schema)
        continue; // reported above
      else if (!isObject(value)) problems.push(`${key}: must be an object holding the attributes of that schema`);
      else {
        containers.set(schema, value);
        checkObject(value, schema.attributes, key, problems, options);
      }
      continue;
    }
    const def = named(rootDefs, key);
    if (def) checkValue(value, def, key, problems, options);
    else if (!COMMON.has(key.toLowerCase())) problems.push(`${key}: defined by none of ${listed.join(', ')}`);
  }

  // An extension's required attributes are looked for in its container when there is one, else at the root.
  for (const schema of schemas) {
    const container = containers.get(schema);
    requirePresent(container ?? resource, schema.attributes, container ? schema.id : '', problems, options);
  }
  return problems;
}

function checkObject(
  object: Json,
  defs: SchemaAttribute[],
  path: string,
  problems: string[],
  options: CheckOptions,
): void {
  for (const [key, value] of Object.entries(object)) {
    const def = named(defs, key);
    if (!def) problems.push(`${path}.${key}: not a sub-attribute the schema defines`);
    else checkValue(value, def, `${path}.${key}`, problems, options);
  }
  requirePresent(object, defs, path, problems, options);
}

/** RFC 7643 2.5: null (and an empty array) means unassigned, which any attribute may be unless it is required. */
function checkValue(
  value: unknown,
  def: SchemaAttribute,
  path: string,
  problems: string[],
  options: CheckOptions,
): void {
  if (value === null) return;
  if (def.multiValued) {
    if (!Array.isArray(value)) {
      problems.push(`${path}: multi-valued, must be an array`);
      return;
    }
    value.forEach((element, i) => {
      if (element === null || Array.isArray(element))
        problems.push(`${path}[${i}]: must be a single ${def.type} value`);
      else checkSingle(element, def, `${path}[${i}]`, problems, options);
    });
    return;
  }
  if (Array.isArray(value)) {
    problems.push(`${path}: single-valued, must not be an array`);
    return;
  }
  checkSingle(value, def, path, problems, options);
}

function checkSingle(
  value: unknown,
  def: SchemaAttribute,
  path: string,
  problems: string[],
  options: CheckOptions,
): void {
  const wrong = (what: string) =>
    problems.push(`${path}: type ${def.type}, must be ${what} (got ${JSON.stringify(value)?.slice(0, 80)})`);
  switch (def.type) {
    case 'string':
    case 'reference':
    case 'binary':
      if (typeof value !== 'string') wrong('a string');
      return;
    case 'boolean':
      if (typeof value !== 'boolean') wrong('true or false');
      return;
    case 'integer':
      if (typeof value !== 'number' || !Number.isInteger(value)) wrong('an integer');
      return;
    case 'decimal':
      if (typeof value !== 'number' || !Number.isFinite(value)) wrong('a number');
      return;
    case 'dateTime':
      if (typeof value !== 'string' || !DATE_TIME.test(value) || Number.isNaN(Date.parse(value)))
        wrong('an xsd:dateTime string');
      return;
    case 'complex':
      if (!isObject(value)) wrong('an object');
      else checkObject(value, def.subAttributes ?? [], path, problems, options);
      return;
    default:
      problems.push(`${path}: the schema declares an unknown type ${def.type}`);
  }
}

function requirePresent(
  object: Json,
  defs: SchemaAttribute[],
  path: string,
  problems: string[],
  options: CheckOptions,
): void {
  for (const def of defs) {
    if (!def.required) continue;
    if (options.from === 'client' && def.mutability === 'readOnly') continue;
    const value = valueOf(object, def.name);
    if (value === undefined || value === null || (def.multiValued && Array.isArray(value) && value.length === 0)) {
      problems.push(`${path ? `${path}.` : ''}${def.name}: required, missing`);
    }
  }
}
