import { describe, expect, it } from 'vitest';
import type { CatalogDefinition } from '../../src/features/catalogs/fields.js';
import { BatchItemsBody, DeleteItemsBody, SingleItemBody } from '../../src/features/catalogs/item-bodies.js';
import type { AppError } from '../../src/platform/errors.js';
import { validateBatchDelete, validateBatchReplace, validateSingle } from '../../src/features/catalogs/validate.js';

/*
 * The API reference shows the zod schemas of catalogs/item-bodies.ts; the endpoints validate with validate.ts. These
 * hold the two together: every body the validation accepts matches its documented schema, and the shape rules the
 * schemas state are refused by the validation too, over a corpus of bodies built from valid and hostile parts.
 */

const catalog: CatalogDefinition = {
  id: 'c',
  name: 'shoes',
  fields: new Map([
    ['name', 'string'],
    ['price', 'number'],
    ['meta', 'object'],
    ['tags', 'array'],
  ]),
};

const ids: unknown[] = [
  'a',
  'shoe-1',
  'A_b-9',
  'x'.repeat(250),
  'x'.repeat(251),
  'has space',
  'dot.ted',
  'ünï',
  '',
  7,
  null,
  ['a'],
];
const fieldSets: Array<Record<string, unknown>> = [
  {},
  { name: 'Trail', price: 12 },
  { name: 'Trail', price: '12.5', meta: { colour: 'red' }, tags: ['a'] },
  { unknown_field: 1 },
  { 'bad.key': 1 },
  { $bad: 1 },
  { meta: { 'inner.key': 1 } },
  { price: 'twelve' },
  { name: 'x'.repeat(6000) },
  { id: 'in-body' },
];
const itemShapes: unknown[] = [...fieldSets, 'not an object', 3, null, ['array']];

function* batchBodies(): Generator<unknown> {
  yield* [undefined, null, 'text', 3, [], {}, { items: null }, { items: 'x' }, { items: {} }, { items: [] }];
  for (const id of ids) for (const fields of fieldSets) yield { items: [{ ...fields, id }] };
  for (const shape of itemShapes) yield { items: [shape] };
  yield { items: [{ id: 'a' }, { id: 'a' }] };
  yield { items: [{ id: 'a' }, { id: 'b', name: 'ok' }] };
  yield { items: [{ name: 'no id' }] };
  for (const n of [49, 50, 51]) yield { items: Array.from({ length: n }, (_, i) => ({ id: `i${i}`, price: i })) };
}

function* singleBodies(): Generator<unknown> {
  yield* [undefined, null, {}, { items: [] }, { items: 'x' }];
  for (const shape of itemShapes) yield { items: [shape] };
  yield { items: [{ name: 'a' }, { name: 'b' }] };
}

const show = (body: unknown) => String(JSON.stringify(body)).slice(0, 200);

const accepts = (validate: () => unknown) => {
  try {
    validate();
    return true;
  } catch {
    return false;
  }
};

describe('catalog item bodies: the documented schema and the validation agree', () => {
  it('every batch replace body the validation accepts matches BatchItemsBody; what the schema refuses is refused', () => {
    let accepted = 0;
    let refused = 0;
    for (const body of batchBodies()) {
      const valid = accepts(() => validateBatchReplace(body, catalog, 'shoes'));
      const documented = BatchItemsBody.safeParse(body).success;
      if (valid) expect(documented, show(body)).toBe(true);
      if (!documented) expect(valid, show(body)).toBe(false);
      if (valid) accepted++;
      else refused++;
    }
    // The corpus holds both kinds, so the implications above were exercised in both directions.
    expect(accepted).toBeGreaterThan(5);
    expect(refused).toBeGreaterThan(50);
  });

  it('every batch delete body the validation accepts matches DeleteItemsBody', () => {
    let accepted = 0;
    for (const body of batchBodies()) {
      const valid = accepts(() => validateBatchDelete(body, catalog, 'shoes'));
      const documented = DeleteItemsBody.safeParse(body).success;
      if (valid) expect(documented, show(body)).toBe(true);
      if (!documented) expect(valid, show(body)).toBe(false);
      if (valid) accepted++;
    }
    expect(accepted).toBeGreaterThan(20);
  });

  it('every single-item body the validation accepts matches SingleItemBody', () => {
    let accepted = 0;
    for (const body of singleBodies()) {
      const valid = accepts(() => validateSingle(body, 'shoe-1', catalog, 'shoes'));
      const documented = SingleItemBody.safeParse(body).success;
      if (valid) expect(documented, show(body)).toBe(true);
      if (!documented) expect(valid, show(body)).toBe(false);
      if (valid) accepted++;
    }
    expect(accepted).toBeGreaterThan(1);
  });

  it('the envelope refusals keep their item-array-invalid messages', () => {
    const messageOf = (body: unknown) => {
      try {
        validateBatchReplace(body, catalog, 'shoes');
      } catch (err) {
        return (err as AppError).options.catalogErrors?.map(({ id, message }) => ({ id, message }));
      }
      return undefined;
    };
    expect(messageOf('text')).toEqual([
      { id: 'item-array-invalid', message: 'The request body must be a JSON object with an items array of objects' },
    ]);
    expect(messageOf({})).toEqual([
      { id: 'item-array-invalid', message: 'items is required: an array of item objects' },
    ]);
    expect(messageOf({ items: null })).toEqual([
      { id: 'item-array-invalid', message: 'items must be an array of objects, not a null' },
    ]);
    expect(messageOf({ items: {} })).toEqual([
      { id: 'item-array-invalid', message: 'items must be an array of objects, not a object' },
    ]);
    expect(messageOf({ items: [] })).toEqual([
      { id: 'item-array-invalid', message: 'items must hold at least one item object' },
    ]);
  });
});
