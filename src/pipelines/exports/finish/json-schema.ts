import type { OutputFormat } from '../key-layout.js';
import {
  REMOVED_PARQUET_COLUMNS,
  usersParquetColumns,
  type ParquetColumns,
  type ParquetType,
} from '../shard/parquet-schema.js';
import type { ExportField } from '../request/request-body.js';

/**
 * schema.json, written beside an export's parts and named in its manifest: a JSON Schema (draft 2020-12) of one line of
 * a `users` part, with the types the Parquet parts use (src/pipelines/exports/shard/parquet-schema.ts), and of a
 * `removed` part in `$defs`. It is derived from the request alone (fields, custom attributes, format), never from the
 * data, so two exports of the same fields and format have byte-identical schema files, and a loader can create its
 * table before the first part arrives.
 *
 * Types: every column may be null (an export line leaves out what a user lacks). Timestamps are RFC 3339 strings
 * (`format: date-time`, TIMESTAMP WITH TIME ZONE in Parquet), dates `format: date`. `custom_attributes` is one column
 * whatever each attribute holds, since one attribute may be a number for one user and a string for another: in
 * Parquet parts a JSON text (`contentMediaType: application/json`), in NDJSON parts the object itself.
 */

export type JsonSchema = { [key: string]: unknown };

const nullable = (type: string, more: JsonSchema = {}): JsonSchema => ({ type: [type, 'null'], ...more });

function typeSchema(type: ParquetType, format: OutputFormat): JsonSchema {
  if (typeof type === 'string') {
    switch (type) {
      case 'string':
        return nullable('string');
      case 'int64':
        return nullable('integer');
      case 'double':
        return nullable('number');
      case 'boolean':
        return nullable('boolean');
      case 'timestamp':
        return nullable('string', { format: 'date-time' });
      case 'date':
        return nullable('string', { format: 'date' });
      case 'json':
        return format === 'parquet'
          ? nullable('string', {
              contentMediaType: 'application/json',
              description: 'A JSON text: each attribute keeps the JSON type it was sent with',
            })
          : nullable('object', { description: 'Each attribute keeps the JSON type it was sent with' });
    }
  }
  if ('list' in type) return nullable('array', { items: typeSchema(type.list, format) });
  if ('map' in type) return nullable('object', { additionalProperties: typeSchema(type.map, format) });
  return objectSchema(type.struct, format);
}

function objectSchema(columns: ParquetColumns, format: OutputFormat): JsonSchema {
  return nullable('object', {
    properties: Object.fromEntries(columns.map((c) => [c.name, typeSchema(c.type, format)])),
  });
}

/** The schema file's bytes: one line, keys in a fixed order, ending in a newline. */
export function exportJsonSchema(spec: {
  fields: readonly ExportField[];
  customAttributes: string[] | null;
  outputFormat: OutputFormat;
}): string {
  const { type: _nullable, ...users } = objectSchema(usersParquetColumns(spec), spec.outputFormat);
  const { type: _removedNullable, ...removed } = objectSchema(REMOVED_PARQUET_COLUMNS, spec.outputFormat);
  const schema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: 'A line of a users part of a segment export',
    type: 'object',
    ...users,
    $defs: {
      removed: {
        title: 'A line of a removed part of an incremental export',
        type: 'object',
        ...removed,
        required: ['service_id'],
      },
    },
  };
  return `${JSON.stringify(schema)}\n`;
}
