import { MAX_VALUE_NESTING } from '../../platform/lib/storable.js';
import { coerceValue, isStorableText } from './coerce.js';
import { CatalogErrors, type ItemLocator } from './errors.js';
import type { CatalogDefinition } from './fields.js';
import {
  ITEM_ID_PATTERN,
  ItemsEnvelope,
  kindOf,
  MAX_BATCH_ITEMS,
  MAX_ID_LENGTH,
  MAX_ITEM_CHARS,
} from './item-bodies.js';

/*
 * The rules the body schemas of item-bodies.ts cannot say, or that the spec wants reported entry by entry with its
 * error ids. A body this accepts always matches its schema (test/catalogs/catalog-bodies.test.ts holds them to that).
 */

/** An item that passed every check, its values converted to the catalog's field types. */
export interface ValidItem {
  id: string;
  data: Record<string, unknown>;
}

export type ItemObject = Record<string, unknown>;

export const isObject = (v: unknown): v is ItemObject => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Characters as people count them: a surrogate pair is one. */
export function charCount(s: string): number {
  let pairs = 0;
  for (let i = 0; i < s.length - 1; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff) {
      const d = s.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) {
        pairs++;
        i++;
      }
    }
  }
  return s.length - pairs;
}

const isBadKey = (key: string) => key.includes('.') || key.includes('$') || !isStorableText(key);

interface ValueReport {
  tooDeep: boolean;
  badKeys: string[];
  unstorable: boolean;
}

/**
 * Walks a field value without recursion (a request can nest far deeper than the stack allows) and stops descending
 * past the nesting limit. A field value that is an object or array is level 1; each container inside adds a level.
 */
function inspectValue(value: unknown): ValueReport {
  const report: ValueReport = { tooDeep: false, badKeys: [], unstorable: false };
  const stack: Array<[unknown, number]> = [[value, 1]];
  while (stack.length > 0) {
    const [v, level] = stack.pop()!;
    if (typeof v === 'string') {
      if (!isStorableText(v)) report.unstorable = true;
      continue;
    }
    if (v === null || typeof v !== 'object') continue;
    if (level > MAX_VALUE_NESTING) {
      report.tooDeep = true;
      continue;
    }
    if (Array.isArray(v)) {
      for (const child of v) stack.push([child, level + 1]);
    } else {
      for (const [key, child] of Object.entries(v as ItemObject)) {
        if (isBadKey(key) && !report.badKeys.includes(key)) report.badKeys.push(key);
        stack.push([child, level + 1]);
      }
    }
  }
  return report;
}

/** Where the `items` array of a body is, or why there is none (the envelope schema's first complaint). */
export function readItems(body: unknown, errors: CatalogErrors): unknown[] | undefined {
  const parsed = ItemsEnvelope.safeParse(body);
  if (parsed.success) return parsed.data.items;
  errors.add('item-array-invalid', parsed.error.issues[0]!.message);
  return undefined;
}

export function checkCount(items: unknown[], max: number, errors: CatalogErrors): void {
  if (items.length > max) {
    errors.add(
      'request-includes-too-many-items',
      max === 1
        ? `This endpoint takes exactly one item object; the request has ${items.length}`
        : `The request has ${items.length} items; at most ${max} are allowed`,
      ['items'],
      [items.length],
    );
  }
}

export interface IdCheck {
  /** The id when it is a string that passed every id rule. */
  valid?: string;
  at: ItemLocator;
  missing: boolean;
}

/** The id rules of items in a batch body. Each failing rule adds its own entry. */
function checkBodyId(item: ItemObject, index: number, errors: CatalogErrors): IdCheck {
  if (!('id' in item) || item.id === undefined) return { at: { index }, missing: true };
  const id = item.id;
  if (typeof id !== 'string') {
    errors.addForItem('ids-not-string', `Item ids must be strings; the item at index ${index} has a ${kindOf(id)}`, {
      index,
    });
    return { at: { index }, missing: false };
  }
  return checkIdText(id, index, errors, 'id');
}

export function checkIdText(id: string, index: number, errors: CatalogErrors, param: 'id' | 'item_id'): IdCheck {
  const length = charCount(id);
  const tooLarge = length > MAX_ID_LENGTH;
  // An over-long id is not echoed back: the entry names the item by position instead.
  const at: ItemLocator = tooLarge ? { index } : { id };
  let valid = !tooLarge;
  if (tooLarge) {
    const where = param === 'item_id' ? 'The item id in the path' : `The id of the item at index ${index}`;
    errors.add(
      'ids-too-large',
      `${where} has ${length} characters; at most ${MAX_ID_LENGTH} are allowed`,
      param === 'item_id' ? ['item_id'] : ['index'],
      [param === 'item_id' ? length : index],
    );
  }
  if (!ITEM_ID_PATTERN.test(id)) {
    valid = false;
    const message = 'Item ids may contain only letters, digits, hyphens and underscores';
    if (param === 'item_id')
      errors.add('invalid-ids', message, ['item_id'], [tooLarge ? `${id.slice(0, MAX_ID_LENGTH)}...` : id]);
    else errors.addForItem('invalid-ids', message, at);
  }
  return { valid: valid ? id : undefined, at, missing: false };
}

/** What the field checks found in an item, each problem by field (or key); `data` holds the values converted. */
interface FieldFindings {
  unknownFields: string[];
  badKeys: string[];
  tooDeep: string[];
  unconvertible: string[];
  /** Why each of `unconvertible` could not be converted. */
  reasons: string[];
  data: ItemObject;
}

/**
 * The field checks shared by every write: keys, nesting, field names, conversion and size. Returns the converted
 * data when the item passed them all. `id` keys are left to the caller.
 */
export function checkFields(
  item: ItemObject,
  catalog: CatalogDefinition | undefined,
  at: ItemLocator,
  errors: CatalogErrors,
): ItemObject | undefined {
  const found = inspectFields(item, catalog);
  reportFields(item, found, at, errors);
  const clean =
    found.unknownFields.length === 0 &&
    found.badKeys.length === 0 &&
    found.tooDeep.length === 0 &&
    found.unconvertible.length === 0;
  return clean ? found.data : undefined;
}

/** Inspects every field but `id`: its name, its value's keys and depth, and (given a catalog) its conversion. */
function inspectFields(item: ItemObject, catalog: CatalogDefinition | undefined): FieldFindings {
  const found: FieldFindings = {
    unknownFields: [],
    badKeys: [],
    tooDeep: [],
    unconvertible: [],
    reasons: [],
    data: {},
  };
  const { badKeys } = found;
  for (const [key, value] of Object.entries(item)) {
    if (key === 'id') continue;
    if (isBadKey(key)) {
      // A field name never holds "." or "$": the key error is the precise one, so invalid-fields is not added too.
      badKeys.push(key);
      continue;
    }
    const report = inspectValue(value);
    for (const k of report.badKeys) if (!badKeys.includes(k)) badKeys.push(k);
    if (report.tooDeep) found.tooDeep.push(key);
    if (!catalog) continue;
    const type = catalog.fields.get(key);
    if (!type) {
      found.unknownFields.push(key);
      continue;
    }
    // A value already refused for its keys or depth is not also reported as unconvertible.
    if (report.tooDeep || report.badKeys.length > 0) continue;
    const converted = report.unstorable
      ? ({ ok: false, reason: 'text contains NUL or an unpaired surrogate' } as const)
      : coerceValue(type, value);
    if (converted.ok) found.data[key] = converted.value;
    else {
      found.unconvertible.push(key);
      found.reasons.push(`${key} (${type}): ${converted.reason}`);
    }
  }
  return found;
}

/** Adds an entry for each kind of problem found, in the order docs/catalogs.md gives; the size is checked here. */
function reportFields(item: ItemObject, found: FieldFindings, at: ItemLocator, errors: CatalogErrors): void {
  const { unknownFields, badKeys, tooDeep, unconvertible } = found;
  if (unknownFields.length > 0) {
    errors.addForItem(
      'invalid-fields',
      `Some of the fields given do not exist in the catalog: ${unknownFields.join(', ')}`,
      at,
      { fields: unknownFields },
    );
  }
  if (badKeys.length > 0) {
    errors.addForItem('invalid-keys-in-value-object', 'Item object keys cannot contain "." or "$"', at, {
      keys: badKeys,
    });
  }
  if (tooDeep.length > 0) {
    errors.addForItem(
      'too-deep-nesting-in-value-object',
      `Item values cannot be nested more than ${MAX_VALUE_NESTING} levels deep`,
      at,
      { fields: tooDeep },
    );
  } else {
    // Measured only when the nesting is bounded: serialising an arbitrarily deep value would exhaust the stack.
    const { id: _id, ...fields } = item;
    const size = charCount(JSON.stringify(fields));
    if (size > MAX_ITEM_CHARS) {
      errors.addForItem(
        'items-too-large',
        `The item has ${size} characters of JSON; at most ${MAX_ITEM_CHARS} are allowed`,
        at,
        { characters: size },
      );
    }
  }
  if (unconvertible.length > 0) {
    errors.addForItem(
      'unable-to-coerce-value',
      `Some values cannot be converted to their field's type: ${found.reasons.join('; ')}`,
      at,
      { fields: unconvertible },
    );
  }
}

function checkUnique(ids: string[], errors: CatalogErrors): void {
  const counts = new Map<string, number>();
  for (const id of ids) counts.set(id, (counts.get(id) ?? 0) + 1);
  for (const [id, n] of counts) {
    if (n > 1)
      errors.add('ids-not-unique', `Item id ${id} appears ${n} times in the request; ids must be unique`, ['id'], [id]);
  }
}

export function startErrors(catalog: CatalogDefinition | undefined, catalogName: string): CatalogErrors {
  const errors = new CatalogErrors();
  if (!catalog) errors.add('catalog-not-found', 'Could not find catalog', ['catalog_name'], [catalogName]);
  return errors;
}

/** Calls `fn` with every element that is an object; reports each other element as item-array-invalid. */
export function forEachItemObject(
  items: unknown[],
  errors: CatalogErrors,
  fn: (item: ItemObject, index: number) => void,
): void {
  items.forEach((item, index) => {
    if (!isObject(item)) {
      errors.add(
        'item-array-invalid',
        `items must be an array of objects; the element at index ${index} is a ${kindOf(item)}`,
        ['index'],
        [index],
      );
      return;
    }
    fn(item, index);
  });
}

/** The id rules of a batch body: each item checked as it comes, then missing and repeated ids reported once. */
export function batchIds(errors: CatalogErrors) {
  let missing = 0;
  const ids: string[] = [];
  return {
    check(item: ItemObject, index: number): IdCheck {
      const id = checkBodyId(item, index, errors);
      if (id.missing) missing++;
      if (id.valid !== undefined) ids.push(id.valid);
      return id;
    },
    finish(): string[] {
      if (missing > 0) errors.add('items-missing-ids', `There are ${missing} item(s) that do not have ids`);
      checkUnique(ids, errors);
      return ids;
    },
  };
}

/**
 * Checks a batch replace body against a catalog (undefined when it does not exist) and returns its items converted,
 * or throws one error listing every problem found. See docs/catalogs.md for the order and overlaps of error ids.
 */
export function validateBatchReplace(
  body: unknown,
  catalog: CatalogDefinition | undefined,
  catalogName: string,
): ValidItem[] {
  const errors = startErrors(catalog, catalogName);
  const items = readItems(body, errors);
  if (!items) throw errors.toAppError();
  checkCount(items, MAX_BATCH_ITEMS, errors);

  const ids = batchIds(errors);
  const valid: ValidItem[] = [];
  forEachItemObject(items, errors, (item, index) => {
    const id = ids.check(item, index);
    const data = checkFields(item, catalog, id.at, errors);
    if (data && id.valid !== undefined) valid.push({ id: id.valid, data });
  });
  ids.finish();
  errors.throwIfAny();
  return valid;
}

/** Checks the body of a single-item write (PUT replace or POST create) whose id comes from the path. */
export function validateSingle(
  body: unknown,
  itemId: string,
  catalog: CatalogDefinition | undefined,
  catalogName: string,
): ValidItem {
  const errors = startErrors(catalog, catalogName);
  const id = checkIdText(itemId, 0, errors, 'item_id');
  const items = readItems(body, errors);
  if (!items) throw errors.toAppError();
  checkCount(items, 1, errors);

  let result: ItemObject | undefined;
  forEachItemObject(items, errors, (item, index) => {
    const at: ItemLocator = items.length === 1 ? id.at : { index };
    if ('id' in item)
      errors.addForItem('id-in-body', 'Remove the id from the item object: the id is the one in the path', at);
    const data = checkFields(item, catalog, at, errors);
    if (index === 0) result = data;
  });
  errors.throwIfAny();
  return { id: itemId, data: result! };
}

/** Checks a batch delete body: the id rules of a batch replace; keys other than `id` are ignored. */
export function validateBatchDelete(
  body: unknown,
  catalog: CatalogDefinition | undefined,
  catalogName: string,
): string[] {
  const errors = startErrors(catalog, catalogName);
  const items = readItems(body, errors);
  if (!items) throw errors.toAppError();
  checkCount(items, MAX_BATCH_ITEMS, errors);
  const ids = batchIds(errors);
  forEachItemObject(items, errors, (item, index) => void ids.check(item, index));
  const checked = ids.finish();
  errors.throwIfAny();
  return checked;
}

/** True when an id could name an item (the read and delete paths answer item-not-found for any other). */
export const isPlausibleId = (id: string) => id.length <= MAX_ID_LENGTH && ITEM_ID_PATTERN.test(id);
