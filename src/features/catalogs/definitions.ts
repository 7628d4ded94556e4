import { z } from 'zod';
import type { Pool } from '../../platform/db/pool.js';
import { AppError } from '../../platform/errors.js';
import { arbitraryError, catalogError, catalogNotFound, CatalogErrors } from './errors.js';
import {
  checkFieldList,
  FieldObject,
  MAX_CATALOG_FIELDS,
  MAX_DESCRIPTION_LENGTH,
  MAX_NAME_LENGTH,
  NAME_PATTERN,
  type ApiField,
} from './field-rules.js';
import { kindOf } from './item-bodies.js';

/**
 * Catalogs themselves: listed, created and deleted through the API (synchronous, as the public API does them). A
 * catalog made here is the same row the workspace file declares (docs/catalogs.md, "The workspace file and the API").
 */

/** The body of POST /catalogs, as zod describes it for the API reference; checked entry by entry below. */
export const CreateCatalogBody = z.object({
  catalogs: z
    .array(
      z.object({
        name: z.string().max(MAX_NAME_LENGTH).regex(NAME_PATTERN).describe('Letters, digits, - and _'),
        description: z.string().max(MAX_DESCRIPTION_LENGTH),
        fields: z
          .array(FieldObject)
          .min(1)
          .max(MAX_CATALOG_FIELDS)
          .describe('`{"name": "id", "type": "string"}` first, then the catalog\'s fields'),
      }),
    )
    .length(1)
    .describe('Exactly one catalog object'),
});

/** A catalog as GET /catalogs and POST /catalogs answer it. */
export const CatalogView = z.object({
  description: z.string().nullable(),
  fields: z.array(z.object({ name: z.string(), type: z.string() })),
  name: z.string(),
  num_items: z.number().int(),
  updated_at: z.string(),
});
export type CatalogView = z.infer<typeof CatalogView>;

export interface NewCatalog {
  name: string;
  description: string;
  /** Without `id`: every catalog has it, first. */
  fields: ApiField[];
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The `catalogs` array's first object, or why there is none (catalog-array-invalid). */
function readCatalogObject(body: unknown, errors: CatalogErrors): Record<string, unknown> | undefined {
  const list = isObject(body) ? body.catalogs : undefined;
  if (!Array.isArray(list) || list.length === 0 || !list.every(isObject)) {
    const why = !isObject(body)
      ? 'The request body must be a JSON object with a catalogs array'
      : !Array.isArray(list)
        ? `catalogs must be an array of catalog objects, not ${list === undefined ? 'missing' : `a ${kindOf(list)}`}`
        : 'catalogs must hold one catalog object';
    errors.add('catalog-array-invalid', why);
    return undefined;
  }
  if (list.length > 1)
    errors.add(
      'too-many-catalog-atoms',
      `Only one catalog can be created per request; the request has ${list.length}`,
      ['catalogs'],
      [list.length],
    );
  return list[0] as Record<string, unknown>;
}

function checkName(name: unknown, errors: CatalogErrors): void {
  if (typeof name === 'string' && [...name].length > MAX_NAME_LENGTH)
    errors.add(
      'catalog-name-too-large',
      `The catalog name has ${[...name].length} characters; at most ${MAX_NAME_LENGTH} are allowed`,
      ['name'],
      [[...name].length],
    );
  else if (typeof name !== 'string' || !NAME_PATTERN.test(name))
    errors.add(
      'invalid-catalog-name',
      'Catalog names may contain only letters, digits, hyphens and underscores',
      ['name'],
      [typeof name === 'string' ? name : kindOf(name)],
    );
}

function checkDescription(description: unknown, errors: CatalogErrors): void {
  if (typeof description !== 'string')
    errors.add('invalid-request', 'description is required: a string of at most 250 characters', ['description'], []);
  else if ([...description].length > MAX_DESCRIPTION_LENGTH)
    errors.add(
      'description-too-long',
      `The description has ${[...description].length} characters; at most ${MAX_DESCRIPTION_LENGTH} are allowed`,
      ['description'],
      [[...description].length],
    );
}

/** `id` of type string first, then the catalog's own fields. Returns those (without `id`) when all are well formed. */
function checkCatalogFields(fields: unknown, errors: CatalogErrors): ApiField[] | undefined {
  if (!Array.isArray(fields)) {
    errors.add('invalid-fields', `fields must be an array of {name, type} objects, not ${kindOf(fields)}`);
    return undefined;
  }
  const first = fields[0] as Record<string, unknown> | undefined;
  const idFirst = isObject(first) && first.name === 'id' && first.type === 'string';
  const idLater = fields.slice(1).some((f) => isObject(f) && f.name === 'id');
  if (!idFirst || idLater)
    errors.add('id-not-first-column', 'The first field must be {"name": "id", "type": "string"}, and only the first');
  if (fields.length > MAX_CATALOG_FIELDS)
    errors.add(
      'too-many-fields',
      `The catalog has ${fields.length} fields; at most ${MAX_CATALOG_FIELDS} are allowed`,
      ['fields'],
      [fields.length],
    );
  const rest = idFirst ? fields.slice(1) : fields.filter((f) => !(isObject(f) && f.name === 'id'));
  return checkFieldList(rest, errors, idFirst ? 1 : 0);
}

/** Checks a POST /catalogs body: every problem found, with the public API's error ids, or the catalog to create. */
export function validateCreateCatalog(body: unknown): NewCatalog {
  const errors = new CatalogErrors();
  const catalog = readCatalogObject(body, errors);
  if (!catalog) throw errors.toAppError();
  checkName(catalog.name, errors);
  checkDescription(catalog.description, errors);
  const fields = checkCatalogFields(catalog.fields, errors);
  errors.throwIfAny();
  return { name: catalog.name as string, description: catalog.description as string, fields: fields! };
}

const VIEW_SQL = `
  SELECT c.name, c.description, c.fields,
         to_char(c.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"+00:00"') AS updated_at,
         (SELECT count(*)::int FROM catalog_items i WHERE i.catalog_id = c.id AND NOT i.deleted) AS num_items
    FROM catalogs c`;

interface ViewRow {
  name: string;
  description: string | null;
  fields: ApiField[];
  updated_at: string;
  num_items: number;
}

const toView = (r: ViewRow): CatalogView => ({
  description: r.description,
  fields: [{ name: 'id', type: 'string' }, ...r.fields.filter((f) => f.name !== 'id')],
  name: r.name,
  num_items: r.num_items,
  updated_at: r.updated_at,
});

/** Every catalog of a workspace, oldest first, with its item count. */
export async function listCatalogs(pool: Pool, workspaceId: string): Promise<CatalogView[]> {
  const { rows } = await pool
    .query<ViewRow>(`${VIEW_SQL} WHERE c.workspace_id = $1 ORDER BY c.created_at, c.name`, [workspaceId])
    .catch((err: unknown) => Promise.reject(arbitraryError(err)));
  return rows.map(toView);
}

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === '23505';

/** Creates a catalog (refused with catalog-name-already-exists when the workspace has one of that name). */
export async function createCatalog(pool: Pool, workspaceId: string, body: unknown): Promise<CatalogView> {
  const catalog = validateCreateCatalog(body);
  const exists = () =>
    catalogError('catalog-name-already-exists', 'A catalog with that name already exists', ['name'], [catalog.name]);
  try {
    const { rows } = await pool.query<ViewRow>(
      `WITH c AS (
         INSERT INTO catalogs (workspace_id, name, description, fields) VALUES ($1, $2, $3, $4::jsonb)
         ON CONFLICT (workspace_id, name) DO NOTHING
         RETURNING *)
       ${VIEW_SQL.replace('FROM catalogs c', 'FROM c')}`,
      [workspaceId, catalog.name, catalog.description, JSON.stringify(catalog.fields)],
    );
    if (!rows[0]) throw exists();
    return toView(rows[0]);
  } catch (err) {
    if (err instanceof AppError) throw err;
    if (isUniqueViolation(err)) throw exists();
    throw arbitraryError(err);
  }
}

/**
 * Deletes a catalog with its items and selections, at once. Changes of it still queued find it gone and are dropped
 * (src/features/catalogs/apply-batch.ts).
 */
export async function deleteCatalog(pool: Pool, workspaceId: string, name: string): Promise<void> {
  const { rowCount } = await pool
    .query(`DELETE FROM catalogs WHERE workspace_id = $1 AND name = $2`, [workspaceId, name])
    .catch((err: unknown) => Promise.reject(arbitraryError(err)));
  if (!rowCount) throw catalogNotFound(name);
}
