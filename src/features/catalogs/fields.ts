import { z } from 'zod';

/** The value types a catalog field can declare (see docs/catalogs.md for how values convert to each). */
export const CATALOG_FIELD_TYPES = ['string', 'number', 'boolean', 'time', 'object', 'array'] as const;
export type CatalogFieldType = (typeof CATALOG_FIELD_TYPES)[number];

/**
 * One field of a catalog definition, as stored in `catalogs.fields` (a JSON array of these) and as written in the
 * workspace file. Field names follow the item-key rules: no `.` or `$`, so that every item key that names a field is
 * also a valid key.
 */
export const CatalogFieldSchema = z.object({
  name: z
    .string()
    .min(1)
    .max(250)
    .regex(/^[^.$\u0000]+$/, 'field names cannot contain ".", "$" or NUL')
    .describe('Field name, as item objects spell the key.'),
  type: z.enum(CATALOG_FIELD_TYPES).describe('Value type; values sent for the field are converted to it.'),
});

export const CatalogFieldsSchema = z
  .array(CatalogFieldSchema)
  .refine((fields) => new Set(fields.map((f) => f.name)).size === fields.length, 'field names must be unique')
  .describe('The fields of a catalog. An `id` field of type string may be listed; every item has one regardless.');

/** A catalog definition as the item endpoints need it. */
export interface CatalogDefinition {
  id: string;
  name: string;
  /** Field name -> type, without `id`. */
  fields: Map<string, CatalogFieldType>;
}

/** Turns the stored `fields` column into the lookup the validator uses; a broken definition is a server fault. */
export function parseCatalogFields(raw: unknown): Map<string, CatalogFieldType> {
  const fields = CatalogFieldsSchema.parse(raw);
  return new Map(fields.filter((f) => f.name !== 'id').map((f) => [f.name, f.type]));
}
