import type { EventType } from '../../../profiles/event-log-types.js';
import { EVENT_TYPE_SPECS, type EventField, type FieldKind } from './fields.js';

/**
 * The schema files of each event type: an Avro schema (`.avsc`, also the writer schema in every Avro file's header)
 * and a JSON Schema (draft 2020-12) of one record as each format writes it, both derived from the field list of
 * ./fields.ts. Their bytes depend on the type (and the format) alone, so that a delivery can write them beside the
 * files of every hour and a rewrite gives the same bytes.
 */

export type EventFormat = 'avro' | 'parquet' | 'ndjson';

/**
 * The version of each type's schema, the `version=<n>` of the key layout. Adding a field is a new nullable field at the
 * end of the type's list and keeps the version (an old reader skips it; a new reader reads it as null in old files);
 * only a breaking change (a field removed, renamed or retyped, or made required) moves it.
 */
export const SCHEMA_VERSIONS: { readonly [T in EventType]: number } = {
  'users.behaviors.CustomEvent': 1,
  'users.behaviors.Purchase': 1,
  'users.behaviors.subscription.GlobalStateChange': 1,
  'users.behaviors.subscriptiongroup.StateChange': 1,
  'users.behaviors.Uninstall': 1,
  'users.canvas.Entry': 1,
  'users.Deleted': 1,
  'users.Merged': 1,
};

const AVRO_TYPES: Record<FieldKind, string> = {
  string: 'string',
  // Currents' `time` is an Avro int of Unix seconds (./avro.ts clamps a time beyond 2038 or before 1902).
  time: 'int',
  json: 'string',
  float: 'float',
  long: 'long',
  boolean: 'boolean',
};

type AvroField = { name: string; type: string | string[]; doc: string; default?: null };
export interface AvroRecordSchema {
  type: 'record';
  name: string;
  namespace: string;
  doc: string;
  fields: AvroField[];
}

const avroField = (f: EventField): AvroField =>
  f.nullable
    ? { name: f.name, type: ['null', AVRO_TYPES[f.kind]], doc: f.doc, default: null }
    : { name: f.name, type: AVRO_TYPES[f.kind], doc: f.doc };

/** The type's Avro record schema: Currents' record name, namespace and fields, nullable ones as ["null", T]. */
export function avroSchema(type: EventType): AvroRecordSchema {
  const spec = EVENT_TYPE_SPECS[type];
  return {
    type: 'record',
    name: spec.name,
    namespace: spec.namespace,
    doc: spec.doc,
    fields: (spec.fields as EventField[]).map(avroField),
  };
}

/** The `.avsc` file of the type: its Avro schema, indented, ending in a newline. */
export function avroSchemaText(type: EventType): string {
  return `${JSON.stringify(avroSchema(type), null, 2)}\n`;
}

type JsonSchema = { [key: string]: unknown };

function jsonFieldSchema(f: EventField, format: EventFormat): JsonSchema {
  const types: Record<FieldKind, JsonSchema> = {
    string: { type: 'string' },
    time:
      format === 'avro'
        ? { type: 'integer', description: `${f.doc} (Unix seconds)` }
        : { type: 'string', format: 'date-time', description: `${f.doc} (RFC 3339, UTC, whole seconds)` },
    json:
      format === 'ndjson'
        ? { type: 'object', description: 'Custom properties, as sent' }
        : { type: 'string', contentMediaType: 'application/json', description: f.doc },
    float: { type: 'number' },
    long: { type: 'integer' },
    boolean: { type: 'boolean' },
  };
  const { type, ...rest } = types[f.kind];
  return { type: f.nullable ? [type, 'null'] : type, description: f.doc, ...rest };
}

/**
 * The JSON Schema (draft 2020-12) of one record of the type as `format` writes it (a Parquet row read as JSON, time as
 * RFC 3339), on one line ending in a newline. Every field is written in every record (null when unknown); only
 * Currents' required fields are `required`, and other properties are allowed, so that the files of a version still
 * validate once a nullable field is added.
 */
export function jsonSchemaText(type: EventType, format: EventFormat): string {
  const spec = EVENT_TYPE_SPECS[type];
  const fields = spec.fields as EventField[];
  const schema = {
    $schema: 'https://json-schema.org/draft/2020-12/schema',
    title: `${type} version ${SCHEMA_VERSIONS[type]} (${format})`,
    description: spec.doc,
    type: 'object',
    properties: Object.fromEntries(fields.map((f) => [f.name, jsonFieldSchema(f, format)])),
    required: fields.filter((f) => !f.nullable).map((f) => f.name),
  };
  return `${JSON.stringify(schema)}\n`;
}
