import type { ItemEdit } from '../../platform/queues/catalog-batch.js';
import { coerceValue } from './coerce.js';
import type { CatalogErrors, ItemLocator } from './errors.js';
import type { CatalogDefinition } from './fields.js';
import { MAX_BATCH_ITEMS } from './item-bodies.js';
import {
  batchIds,
  checkCount,
  checkFields,
  checkIdText,
  forEachItemObject,
  isObject,
  readItems,
  startErrors,
  type ItemObject,
} from './validate.js';

/**
 * The edit bodies (PATCH .../items and PATCH .../items/{id}): the rules of the replace bodies (validate.ts), and on
 * fields of type array, an object of `$add` and/or `$remove`, each an array of values, in place of a value. Such an
 * object on a field of any other type keeps the usual refusal of "$" in keys (invalid-keys-in-value-object), as the
 * public API allows the operators on array fields only.
 */

const OPERATORS = new Set(['$add', '$remove']);

/** True when `value` is meant as array operators: an object whose keys are all `$add` or `$remove`. */
const isOperatorObject = (value: unknown): value is ItemObject =>
  isObject(value) && Object.keys(value).length > 0 && Object.keys(value).every((k) => OPERATORS.has(k));

/** Takes the array operators out of an item; each one that cannot be converted adds an unable-to-coerce-value. */
function splitArrayOperators(
  item: ItemObject,
  catalog: CatalogDefinition | undefined,
  at: ItemLocator,
  errors: CatalogErrors,
): { rest: ItemObject; arrays: ItemEdit['arrays']; ok: boolean } {
  const rest: ItemObject = {};
  const arrays: ItemEdit['arrays'] = {};
  const failed: string[] = [];
  const reasons: string[] = [];
  for (const [key, value] of Object.entries(item)) {
    if (catalog?.fields.get(key) !== 'array' || !isOperatorObject(value)) {
      rest[key] = value;
      continue;
    }
    const add = coerceValue('array', value.$add ?? []);
    const remove = coerceValue('array', value.$remove ?? []);
    if (add.ok && remove.ok && add.value !== null && remove.value !== null)
      arrays[key] = { add: add.value as string[], remove: remove.value as string[] };
    else {
      failed.push(key);
      reasons.push(`${key} (array): $add and $remove take arrays of strings`);
    }
  }
  if (failed.length > 0)
    errors.addForItem('unable-to-coerce-value', `Some values cannot be converted: ${reasons.join('; ')}`, at, {
      fields: failed,
    });
  return { rest, arrays, ok: failed.length === 0 };
}

/** Checks a batch edit body against a catalog; returns the edits, or throws one error listing every problem. */
export function validateBatchEdit(
  body: unknown,
  catalog: CatalogDefinition | undefined,
  catalogName: string,
): ItemEdit[] {
  const errors = startErrors(catalog, catalogName);
  const items = readItems(body, errors);
  if (!items) throw errors.toAppError();
  checkCount(items, MAX_BATCH_ITEMS, errors);
  const ids = batchIds(errors);
  const edits: ItemEdit[] = [];
  forEachItemObject(items, errors, (item, index) => {
    const id = ids.check(item, index);
    const { rest, arrays, ok } = splitArrayOperators(item, catalog, id.at, errors);
    const data = checkFields(rest, catalog, id.at, errors);
    if (data && ok && id.valid !== undefined) edits.push({ id: id.valid, data, arrays });
  });
  ids.finish();
  errors.throwIfAny();
  return edits;
}

/** Checks the body of PATCH .../items/{item_id}: one item object without an id. */
export function validateSingleEdit(
  body: unknown,
  itemId: string,
  catalog: CatalogDefinition | undefined,
  catalogName: string,
): ItemEdit {
  const errors = startErrors(catalog, catalogName);
  const id = checkIdText(itemId, 0, errors, 'item_id');
  const items = readItems(body, errors);
  if (!items) throw errors.toAppError();
  checkCount(items, 1, errors);
  let edit: ItemEdit | undefined;
  forEachItemObject(items, errors, (item, index) => {
    const at: ItemLocator = items.length === 1 ? id.at : { index };
    if ('id' in item)
      errors.addForItem('id-in-body', 'Remove the id from the item object: the id is the one in the path', at);
    const { rest, arrays, ok } = splitArrayOperators(item, catalog, at, errors);
    const data = checkFields(rest, catalog, at, errors);
    if (index === 0 && data && ok) edit = { id: itemId, data, arrays };
  });
  errors.throwIfAny();
  return edit!;
}
