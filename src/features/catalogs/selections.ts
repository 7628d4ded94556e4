import { z } from 'zod';
import type { Pool, PoolClient } from '../../platform/db/pool.js';
import type { CatalogBatchPayload, SelectionDefinition } from '../../platform/queues/catalog-batch.js';
import { acceptChange, type AcceptBatchDeps, type OnBatchRecorded } from './batches.js';
import { coerceValue } from './coerce.js';
import { catalogNotFound, CatalogErrors, guarded, pathNotFound } from './errors.js';
import { MAX_DESCRIPTION_LENGTH, MAX_NAME_LENGTH, NAME_PATTERN } from './field-rules.js';
import type { CatalogDefinition, CatalogFieldType } from './fields.js';
import { findCatalog, nextVersion } from './store.js';

/**
 * Selections: a named filter, sort and limit over a catalog's items (the public API's selection object). Created and
 * deleted asynchronously (202), as the public API does it; stored in catalog_selections by the catalog-batch job.
 */

export const MAX_SELECTION_FILTERS = 4;
export const MAX_RESULTS_LIMIT = 50;

/** The operators each field type takes (the public API's table); `id` is a string field. */
const OPERATORS: Partial<Record<CatalogFieldType, readonly string[]>> = {
  string: ['equals', 'does not equal'],
  number: ['equals', 'does not equal', 'greater than', 'less than'],
  boolean: ['is'],
  time: ['before', 'after'],
  array: ['includes value', 'does not include value'],
};

const Filter = z.object({ field: z.string(), operator: z.string(), value: z.unknown() });
export const CreateSelectionBody = z.object({
  selection: z.object({
    name: z.string().max(MAX_NAME_LENGTH).regex(NAME_PATTERN),
    description: z.string().max(MAX_DESCRIPTION_LENGTH).optional(),
    external_id: z.string().optional(),
    source: z.string().optional(),
    filters: z.array(Filter).max(MAX_SELECTION_FILTERS).optional(),
    results_limit: z.number().int().min(1).max(MAX_RESULTS_LIMIT).optional(),
    sort_field: z.string().optional(),
    sort_order: z.enum(['asc', 'desc']).optional(),
  }),
});

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);
const optionalText = (v: unknown) => v === undefined || typeof v === 'string';

const typeOf = (catalog: CatalogDefinition, field: string): CatalogFieldType | undefined =>
  field === 'id' ? 'string' : catalog.fields.get(field);

/** One filter's problem, or '' when it is valid for the catalog. */
function filterProblem(filter: unknown, catalog: CatalogDefinition): string {
  if (!isObject(filter) || typeof filter.field !== 'string' || typeof filter.operator !== 'string')
    return 'a filter is an object with field, operator and value';
  const type = typeOf(catalog, filter.field);
  if (!type) return `the catalog has no field ${filter.field}`;
  const operators = OPERATORS[type];
  if (!operators?.includes(filter.operator))
    return `a ${type} field takes the operators ${operators ? operators.join(', ') : '(none)'}`;
  const valueType = type === 'array' ? 'string' : type;
  const value = coerceValue(valueType, filter.value);
  return value.ok && value.value !== null ? '' : `the value cannot be converted to ${valueType}`;
}

function checkFilters(filters: unknown, catalog: CatalogDefinition, errors: CatalogErrors): void {
  if (filters === undefined) return;
  if (!Array.isArray(filters)) {
    errors.add('selection-has-invalid-filter', 'filters must be an array of filter objects', ['filters'], []);
    return;
  }
  if (filters.length > MAX_SELECTION_FILTERS)
    errors.add(
      'too-many-filters',
      `The selection has ${filters.length} filters; at most ${MAX_SELECTION_FILTERS} are allowed`,
      ['filters'],
      [filters.length],
    );
  filters.forEach((f, index) => {
    const problem = filterProblem(f, catalog);
    if (problem) errors.add('selection-has-invalid-filter', `Filter ${index}: ${problem}`, ['index'], [index]);
  });
  const arrays = new Set(
    filters.filter((f) => isObject(f) && typeOf(catalog, f.field as string) === 'array').map((f) => f.field),
  );
  if (arrays.size > 1)
    errors.add(
      'selection-contains-too-many-arrays',
      'Filters may use one field of type array at most',
      ['fields'],
      [[...arrays]],
    );
}

function checkLimitAndSort(s: Record<string, unknown>, catalog: CatalogDefinition, errors: CatalogErrors): void {
  const limit = s.results_limit;
  if (limit !== undefined && !(Number.isInteger(limit) && (limit as number) >= 1 && (limit as number) <= 50))
    errors.add(
      'selection-invalid-results-limit',
      `results_limit must be a whole number from 1 to ${MAX_RESULTS_LIMIT}`,
    );
  const { sort_field: field, sort_order: order } = s;
  if ((field === undefined) !== (order === undefined))
    errors.add('invalid-sorting', 'sort_field and sort_order go together: give both or neither');
  if (field !== undefined && (typeof field !== 'string' || !typeOf(catalog, field)))
    errors.add('invalid-sort-field', 'sort_field must be a field of the catalog', ['sort_field'], [field]);
  if (order !== undefined && order !== 'asc' && order !== 'desc')
    errors.add('invalid-sort-order', 'sort_order must be "asc" or "desc"', ['sort_order'], [order]);
}

/** Checks a POST .../selections body against the catalog and the selections it has. */
function validateSelection(body: unknown, catalog: CatalogDefinition, taken: string[]): SelectionDefinition {
  const errors = new CatalogErrors();
  const s = isObject(body) ? body.selection : undefined;
  if (!isObject(s)) {
    errors.add('invalid-selection', 'The body must hold a selection object');
    throw errors.toAppError();
  }
  const nameOk = typeof s.name === 'string' && s.name.length <= MAX_NAME_LENGTH && NAME_PATTERN.test(s.name);
  const textOk = [s.description, s.external_id, s.source].every(optionalText);
  const descriptionOk = typeof s.description !== 'string' || [...s.description].length <= MAX_DESCRIPTION_LENGTH;
  if (!nameOk || !textOk || !descriptionOk)
    errors.add(
      'invalid-selection',
      `The selection needs a name of letters, digits, - and _ (at most ${MAX_NAME_LENGTH}); description (at most ${MAX_DESCRIPTION_LENGTH} characters), external_id and source are strings when given`,
    );
  else if (taken.includes(s.name as string))
    errors.add('selection-name-already-exists', 'The catalog already has a selection of that name', ['name'], [s.name]);
  checkFilters(s.filters, catalog, errors);
  checkLimitAndSort(s, catalog, errors);
  errors.throwIfAny();
  const text = (v: unknown) => (typeof v === 'string' ? v : null);
  return {
    name: s.name as string,
    description: text(s.description),
    external_id: text(s.external_id),
    source: text(s.source),
    filters: (s.filters as SelectionDefinition['filters'] | undefined) ?? [],
    results_limit: (s.results_limit as number | undefined) ?? null,
    sort_field: text(s.sort_field),
    sort_order: (s.sort_order as 'asc' | 'desc' | undefined) ?? null,
  };
}

async function selectionNames(pool: Pool, catalogId: string): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(`SELECT name FROM catalog_selections WHERE catalog_id = $1`, [
    catalogId,
  ]);
  return rows.map((r) => r.name);
}

/** POST /catalogs/{name}/selections: validated, recorded and queued. */
export async function acceptCreateSelection(
  deps: AcceptBatchDeps,
  workspaceId: string,
  catalogName: string,
  body: unknown,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  const catalog = await guarded(() => findCatalog(deps.pool, workspaceId, catalogName));
  if (!catalog) throw catalogNotFound(catalogName);
  const selection = validateSelection(body, catalog, await guarded(() => selectionNames(deps.pool, catalog.id)));
  const version = await guarded(() => nextVersion(deps.pool));
  const payload = { op: 'create_selection' as const, workspaceId, catalogId: catalog.id, version, selection };
  await acceptChange(deps, payload, onRecorded);
}

/** DELETE /catalogs/{name}/selections/{selection}: validated, recorded and queued. */
export async function acceptDeleteSelection(
  deps: AcceptBatchDeps,
  workspaceId: string,
  catalogName: string,
  name: string,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  const catalog = await guarded(() => findCatalog(deps.pool, workspaceId, catalogName));
  if (!catalog) throw catalogNotFound(catalogName);
  if (!(await guarded(() => selectionNames(deps.pool, catalog.id))).includes(name))
    throw pathNotFound('invalid-selection', 'The catalog has no selection of that name', 'selection_name', name);
  const version = await guarded(() => nextVersion(deps.pool));
  await acceptChange(deps, { op: 'delete_selection', workspaceId, catalogId: catalog.id, version, name }, onRecorded);
}

type SelectionChange = Extract<CatalogBatchPayload, { op: 'create_selection' | 'delete_selection' }>;

/**
 * Applies a selection change in the job's transaction. A create applied again (or racing another of the same name)
 * keeps the first; a selection whose fields were deleted in between is not created.
 */
export async function applySelectionChange(client: PoolClient, change: SelectionChange): Promise<number> {
  if (change.op === 'delete_selection') {
    const { rowCount } = await client.query(`DELETE FROM catalog_selections WHERE catalog_id = $1 AND name = $2`, [
      change.catalogId,
      change.name,
    ]);
    return rowCount ?? 0;
  }
  const { selection } = change;
  const used = [...selection.filters.map((f) => f.field), ...(selection.sort_field ? [selection.sort_field] : [])];
  const { rowCount } = await client.query(
    `INSERT INTO catalog_selections (catalog_id, name, definition)
     SELECT $1, $2, $3::jsonb FROM catalogs c
      WHERE c.id = $1
        AND (SELECT count(*) FROM unnest($4::text[]) AS u(f)
              WHERE u.f <> 'id' AND NOT c.fields @> jsonb_build_array(jsonb_build_object('name', u.f))) = 0
     ON CONFLICT (catalog_id, name) DO NOTHING`,
    [change.catalogId, selection.name, JSON.stringify(selection), used],
  );
  return rowCount ?? 0;
}
