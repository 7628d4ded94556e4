import { z } from 'zod';
import type { CatalogErrors } from './errors.js';
import { CATALOG_FIELD_TYPES, type CatalogFieldType } from './fields.js';
import { kindOf } from './item-bodies.js';

/**
 * The rules of field lists sent through the API (POST /catalogs and POST /catalogs/{name}/fields), with the public
 * API's error ids. A catalog name follows the same character rule as a field name.
 */

/** Limits of the public API's catalog pages. */
export const MAX_CATALOG_FIELDS = 500;
export const MAX_FIELDS_PER_REQUEST = 50;
export const MAX_NAME_LENGTH = 250;
export const MAX_DESCRIPTION_LENGTH = 250;

export const NAME_PATTERN = /^[A-Za-z0-9_-]+$/;

/** One field as the API speaks of it: `{name, type}`. */
export interface ApiField {
  name: string;
  type: CatalogFieldType;
}

export const FieldObject = z.object({
  name: z
    .string()
    .max(MAX_NAME_LENGTH)
    .regex(NAME_PATTERN)
    .describe(`Letters, digits, - and _, at most ${MAX_NAME_LENGTH} characters`),
  type: z.enum(CATALOG_FIELD_TYPES),
});

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const isFieldType = (v: unknown): v is CatalogFieldType =>
  typeof v === 'string' && (CATALOG_FIELD_TYPES as readonly string[]).includes(v);

/**
 * Checks a list of field objects; each problem adds its entry (names by position when not usable). Returns the
 * fields when every one is well formed. `offset` is the position of the first in the request's array.
 */
export function checkFieldList(list: unknown[], errors: CatalogErrors, offset = 0): ApiField[] | undefined {
  const fields: ApiField[] = [];
  const seen = new Map<string, number>();
  let clean = true;
  list.forEach((f, i) => {
    const index = i + offset;
    if (!isObject(f) || typeof f.name !== 'string' || !('type' in f)) {
      errors.add(
        'invalid-fields',
        `fields must be objects with a name and a type; the element at index ${index} is ${isObject(f) ? 'an object without them' : `a ${kindOf(f)}`}`,
        ['index'],
        [index],
      );
      clean = false;
      return;
    }
    const ok = checkFieldName(f.name, index, errors) && checkFieldType(f.name, f.type, errors);
    if (!ok) clean = false;
    else fields.push({ name: f.name, type: f.type as CatalogFieldType });
    seen.set(f.name, (seen.get(f.name) ?? 0) + 1);
  });
  for (const [name, n] of seen) {
    if (n > 1) {
      errors.add(
        'field-names-not-unique',
        `Field ${name} appears ${n} times; field names must be unique`,
        ['name'],
        [name],
      );
      clean = false;
    }
  }
  return clean ? fields : undefined;
}

function checkFieldName(name: string, index: number, errors: CatalogErrors): boolean {
  if ([...name].length > MAX_NAME_LENGTH) {
    errors.add(
      'field-names-too-large',
      `The field name at index ${index} has ${[...name].length} characters; at most ${MAX_NAME_LENGTH} are allowed`,
      ['index'],
      [index],
    );
    return false;
  }
  if (!NAME_PATTERN.test(name)) {
    errors.add(
      'invalid-field-names',
      'Field names may contain only letters, digits, hyphens and underscores',
      ['name'],
      [name],
    );
    return false;
  }
  return true;
}

function checkFieldType(name: string, type: unknown, errors: CatalogErrors): boolean {
  if (isFieldType(type)) return true;
  errors.add(
    'invalid-field-types',
    `The type of field ${name} must be one of ${CATALOG_FIELD_TYPES.join(', ')}`,
    ['name', 'type'],
    [name, type],
  );
  return false;
}
