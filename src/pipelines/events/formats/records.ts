import type { EventType } from '../../../profiles/event-log-types.js';
import { EVENT_TYPE_SPECS, type EventField, type FieldKind, type FieldValue } from './fields.js';
import { JsonText } from './json-text.js';
import type { SourceEvent } from './source.js';

/**
 * One event's field values, as every format starts from them. The log's rows are written by typed code, but `data` is
 * jsonb and old rows outlive code: a value of the wrong type for its field (a number where a string belongs, a price
 * that is not a finite number, a fractional quantity) is treated as absent. An absent value is null; a required field
 * (Currents' required, which the mappings of ./fields.ts fill whenever the row is well formed) left without a value
 * fails the file, naming the event's id and the field, never a value (personal data).
 */

export function eventFields(type: EventType): EventField[] {
  return EVENT_TYPE_SPECS[type].fields as EventField[];
}

/** Throws unless the event is of the file's type (a file holds one type). */
export function assertType(type: EventType, e: SourceEvent): void {
  if (e.type !== type) throw new Error(`event ${e.id} is a ${e.type}, not a ${type}`);
}

// A switch rather than a table of closures: one call site per kind keeps this hot path monomorphic.
function valid(kind: FieldKind, v: FieldValue): boolean {
  switch (kind) {
    case 'string':
      return typeof v === 'string';
    case 'time':
      return v instanceof Date && !Number.isNaN(v.getTime());
    case 'json':
      return typeof v === 'object' && v !== null && !(v instanceof Date);
    case 'float':
      return typeof v === 'number' && Number.isFinite(v);
    case 'long':
      return Number.isSafeInteger(v);
    case 'boolean':
      return typeof v === 'boolean';
  }
}

export function fieldValue(type: EventType, f: EventField, e: SourceEvent): FieldValue {
  const v = f.value(e) ?? null;
  if (v !== null && valid(f.kind, v)) return v;
  if (!f.nullable) throw new Error(`event ${e.id} (${type}) has no value for its required ${f.name}`);
  return null;
}

/** A json field's text: the object's JSON, or the text it came as (the same bytes: ./json-text.ts). */
export const jsonText = (v: FieldValue): string => (v instanceof JsonText ? v.text : JSON.stringify(v));

/** Unix seconds of a time (whole seconds, rounded down as Currents' int is). */
export const unixSeconds = (d: Date): number => Math.floor(d.getTime() / 1000);

let lastSecond = NaN;
let lastIso = '';

/**
 * RFC 3339 in UTC, whole seconds: the same instant as the Avro `time` (toISOString's fields are the floor of the
 * second, before 1970 too). Ingestion keeps years to 0000-9999, which toISOString writes with four digits. The last
 * second's text is kept: the events of a file mostly come seconds apart, many in the same second.
 */
export function isoSeconds(d: Date): string {
  const second = unixSeconds(d);
  if (second !== lastSecond) {
    lastSecond = second;
    lastIso = `${d.toISOString().slice(0, 19)}Z`;
  }
  return lastIso;
}
