import { z } from 'zod';
import type { PoolClient } from '../../platform/db/pool.js';
import type { CatalogBatchPayload } from '../../platform/queues/catalog-batch.js';
import { acceptChange, type AcceptBatchDeps, type OnBatchRecorded } from './batches.js';
import { catalogNotFound, CatalogErrors, guarded, pathNotFound } from './errors.js';
import {
  checkFieldList,
  FieldObject,
  MAX_CATALOG_FIELDS,
  MAX_FIELDS_PER_REQUEST,
  type ApiField,
} from './field-rules.js';
import { kindOf } from './item-bodies.js';
import { findCatalog, nextVersion } from './store.js';

/**
 * Fields added to and deleted from a catalog through the API, asynchronously as the public API does it: validated,
 * recorded and queued (202); the catalog-batch job applies them (apply-batch.ts). Until then items cannot use an added
 * field, and a deleted field is still one.
 */

export const AddFieldsBody = z.object({
  fields: z.array(FieldObject).min(1).max(MAX_FIELDS_PER_REQUEST).describe(`1 to ${MAX_FIELDS_PER_REQUEST} new fields`),
});

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** The fields to add, or every reason not to. `existing` holds the catalog's field names (without `id`). */
function validateAddFields(body: unknown, existing: string[] | undefined, catalogName: string): ApiField[] {
  const errors = new CatalogErrors();
  if (!existing) errors.add('catalog-not-found', 'Could not find catalog', ['catalog_name'], [catalogName]);
  const list = isObject(body) ? body.fields : undefined;
  if (!Array.isArray(list) || list.length === 0) {
    const what = list === undefined ? 'missing' : Array.isArray(list) ? 'empty' : `a ${kindOf(list)}`;
    errors.add('invalid-fields', `fields must be an array of {name, type} objects; it is ${what}`);
    throw errors.toAppError();
  }
  if (list.length > MAX_FIELDS_PER_REQUEST)
    errors.add(
      'request-includes-too-many-fields',
      `The request has ${list.length} fields; at most ${MAX_FIELDS_PER_REQUEST} can be added at once`,
      ['fields'],
      [list.length],
    );
  const fields = checkFieldList(list, errors);
  const taken = (fields ?? []).map((f) => f.name).filter((n) => n === 'id' || existing?.includes(n));
  for (const name of taken)
    errors.add('field-names-not-unique', `The catalog already has a field ${name}`, ['name'], [name]);
  if (existing && fields && 1 + existing.length + fields.length > MAX_CATALOG_FIELDS)
    errors.add(
      'catalog-exceeds-fields-limit',
      `The catalog would have ${1 + existing.length + fields.length} fields (id included); at most ${MAX_CATALOG_FIELDS} are allowed`,
      ['fields'],
      [fields.length],
    );
  errors.throwIfAny();
  return fields!;
}

/** POST /catalogs/{name}/fields: validated, recorded and queued. */
export async function acceptAddFields(
  deps: AcceptBatchDeps,
  workspaceId: string,
  catalogName: string,
  body: unknown,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  const catalog = await guarded(() => findCatalog(deps.pool, workspaceId, catalogName));
  const fields = validateAddFields(body, catalog && [...catalog.fields.keys()], catalogName);
  const version = await guarded(() => nextVersion(deps.pool));
  await acceptChange(deps, { op: 'add_fields', workspaceId, catalogId: catalog!.id, version, fields }, onRecorded);
}

/** The selections of a catalog whose filters or sort use a field. */
async function selectionsUsing(db: Pick<PoolClient, 'query'>, catalogId: string, field: string): Promise<string[]> {
  const { rows } = await db.query<{ name: string }>(
    `SELECT name FROM catalog_selections
      WHERE catalog_id = $1
        AND (definition->>'sort_field' = $2 OR definition->'filters' @> jsonb_build_array(jsonb_build_object('field', $2::text)))
      ORDER BY name`,
    [catalogId, field],
  );
  return rows.map((r) => r.name);
}

/** DELETE /catalogs/{name}/fields/{field}: validated, recorded and queued. `id` cannot be deleted. */
export async function acceptDeleteField(
  deps: AcceptBatchDeps,
  workspaceId: string,
  catalogName: string,
  field: string,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  const catalog = await guarded(() => findCatalog(deps.pool, workspaceId, catalogName));
  if (!catalog) throw catalogNotFound(catalogName);
  if (!catalog.fields.has(field))
    throw pathNotFound('invalid-field-name', 'The catalog has no field of that name', 'field_name', field);
  const users = await guarded(() => selectionsUsing(deps.pool, catalog.id, field));
  if (users.length > 0) {
    const errors = new CatalogErrors();
    errors.add(
      'field-referenced-by-selection',
      `The field is used by selections: ${users.join(', ')}`,
      ['field_name', 'selections'],
      [field, users],
    );
    throw errors.toAppError();
  }
  const version = await guarded(() => nextVersion(deps.pool));
  await acceptChange(deps, { op: 'delete_field', workspaceId, catalogId: catalog.id, version, field }, onRecorded);
}

type FieldChange = Extract<CatalogBatchPayload, { op: 'add_fields' | 'delete_field' }>;

/**
 * Applies a field change in the job's transaction, the catalog row locked. Adding skips names the catalog has by now
 * (a change applied again adds nothing); deleting removes the field from the definition and from every item.
 */
export async function applyFieldChange(client: PoolClient, change: FieldChange): Promise<number> {
  const { rows } = await client.query<{ fields: ApiField[] }>(`SELECT fields FROM catalogs WHERE id = $1 FOR UPDATE`, [
    change.catalogId,
  ]);
  const fields = rows[0]!.fields;
  if (change.op === 'add_fields') {
    const added = change.fields.filter((f) => !fields.some((e) => e.name === f.name));
    if (added.length === 0) return 0;
    await client.query(`UPDATE catalogs SET fields = $2::jsonb, updated_at = now() WHERE id = $1`, [
      change.catalogId,
      JSON.stringify([...fields, ...added]),
    ]);
    return added.length;
  }
  const kept = fields.filter((f) => f.name !== change.field);
  if (kept.length === fields.length) return 0;
  await client.query(`UPDATE catalogs SET fields = $2::jsonb, updated_at = now() WHERE id = $1`, [
    change.catalogId,
    JSON.stringify(kept),
  ]);
  const { rowCount } = await client.query(
    `UPDATE catalog_items SET data = data - $2::text, updated_at = now() WHERE catalog_id = $1 AND data ? $2::text`,
    [change.catalogId, change.field],
  );
  return rowCount ?? 0;
}
