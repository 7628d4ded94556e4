import { z } from 'zod';
import { MAX_VALUE_NESTING } from '../../platform/lib/storable.js';

/**
 * The request bodies of the catalog item endpoints, as zod schemas: the one description of their shape, from which
 * the API reference is generated and on which the validation in validate.ts is built. What zod says here (the
 * envelope, id text, top-level keys, counts) is what every body must be; validate.ts adds what a schema cannot say or
 * what the spec wants reported its own way: keys and nesting inside values, the JSON size of an item, field names
 * of the catalog, type conversion, repeated ids, and one error entry per problem with the spec's error ids.
 */

/** Limits from the spec's Limits table. */
export const MAX_BATCH_ITEMS = 50;
export const MAX_ID_LENGTH = 250;
export const MAX_ITEM_CHARS = 5_000;

export const ITEM_ID_PATTERN = /^[A-Za-z0-9_-]+$/;
/** A key of an item object: never "." or "$" (the same rule holds inside values, checked by validate.ts). */
const ITEM_KEY_PATTERN = /^[^.$]*$/;
/** A key of an item object whose id is the path's: an `id` key is refused (id-in-body). */
const FIELD_KEY_PATTERN = /^(?!id$)[^.$]*$/;

export const ItemId = z
  .string()
  .max(MAX_ID_LENGTH)
  .regex(ITEM_ID_PATTERN)
  .describe(`Item id: letters, digits, - and _, at most ${MAX_ID_LENGTH} characters`);

const fieldsDescription = `Fields of the catalog, at most ${MAX_ITEM_CHARS} characters of JSON, values nested at most ${MAX_VALUE_NESTING} levels, no "." or "$" in any key`;
const ItemFields = z.record(z.string().regex(ITEM_KEY_PATTERN), z.unknown());
const ItemFieldsWithoutId = z
  .record(z.string().regex(FIELD_KEY_PATTERN), z.unknown())
  .describe(`${fieldsDescription}; no id`);

export const BatchItemsBody = z.object({
  items: z
    .array(ItemFields.and(z.object({ id: ItemId })).describe(fieldsDescription))
    .min(1)
    .max(MAX_BATCH_ITEMS)
    .describe(`1 to ${MAX_BATCH_ITEMS} item objects, each with a unique id`),
});

export const SingleItemBody = z.object({
  items: z
    .array(ItemFieldsWithoutId)
    .length(1)
    .describe('Exactly one item object, without id: the id is the one in the path'),
});

export const BatchEditBody = z.object({
  items: z
    .array(
      ItemFields.and(z.object({ id: ItemId })).describe(
        `${fieldsDescription}; on a field of type array, {"$add": [strings], "$remove": [strings]} may replace the value`,
      ),
    )
    .min(1)
    .max(MAX_BATCH_ITEMS)
    .describe(`1 to ${MAX_BATCH_ITEMS} edits, each with the unique id of an item; fields not sent are kept`),
});

export const SingleEditBody = z.object({
  items: z
    .array(ItemFieldsWithoutId)
    .length(1)
    .describe(
      'Exactly one item object, without id: the fields to set, or array operators ({"$add": [...], "$remove": [...]})',
    ),
});

/** Keys other than `id` are ignored by a delete. */
export const DeleteItemsBody = z.object({
  items: z
    .array(z.looseObject({ id: ItemId }))
    .min(1)
    .max(MAX_BATCH_ITEMS)
    .describe(`1 to ${MAX_BATCH_ITEMS} objects, each with the unique id of an item to delete`),
});

export function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * The envelope every item body shares, with the messages of the spec's item-array-invalid. The elements are checked
 * one by one by validate.ts, so that each failing item gets its own entries.
 */
export const ItemsEnvelope = z.object(
  {
    items: z
      .array(z.unknown(), {
        error: (issue) =>
          issue.input === undefined
            ? 'items is required: an array of item objects'
            : `items must be an array of objects, not a ${kindOf(issue.input)}`,
      })
      .min(1, 'items must hold at least one item object'),
  },
  { error: 'The request body must be a JSON object with an items array of objects' },
);
