import { createGzip, type ZlibOptions } from 'node:zlib';
import type { EventType } from '../../../profiles/event-log-types.js';
import type { EventField } from './fields.js';
import type { FieldValue } from './fields.js';
import { assertType, eventFields, fieldValue, isoSeconds, jsonText } from './records.js';
import { collect, forEachEvent, type EventSource, type SourceEvent } from './source.js';

/**
 * NDJSON files, gzip: one JSON object per event and line, keys in the type's field order, every field present (null
 * when unknown). `time` is RFC 3339 in UTC to the second (the instant of the Avro `time`); `properties` is the object
 * itself (Avro and Parquet hold its JSON text).
 *
 * Lines are compressed as they are made, in chunks of CHUNK_CHARS (one write a line costs about 3x: performance.md),
 * so only the compressed file is held; zlib compresses on libuv's pool while the next chunk is built, so that the
 * two share the cores. Deterministic: Node's gzip header has no name and an mtime of 0, and deflate of the same bytes
 * at the same level gives the same bytes with the same zlib.
 */

/** gzip level 1: the ceiling the issue measures against is `gzip -1`; level 6 is ~20% smaller at half the speed. */
const GZIP_LEVEL = 1;
const CHUNK_CHARS = 64 * 1024;
/** Chunks queued for the compressor before the line builder waits: it keeps building while zlib works. */
const QUEUED_BYTES = 4 * CHUNK_CHARS;

/** What JSON.stringify escapes in a string: quotes, backslashes, control characters and (unpaired) surrogates. */
const NEEDS_ESCAPE = /["\\\u0000-\u001f\ud800-\udfff]/;

function jsonValue(f: EventField, v: FieldValue): string {
  if (v === null) return 'null';
  if (f.kind === 'time') return `"${isoSeconds(v as Date)}"`;
  // Most values (ids, names) need no escape: quoting them is twice as fast as JSON.stringify.
  if (f.kind === 'string' && !NEEDS_ESCAPE.test(v as string)) return `"${v as string}"`;
  if (f.kind === 'json') return jsonText(v);
  // A number that is not finite has no JSON form: null, as JSON.stringify writes it.
  return JSON.stringify(v) ?? 'null';
}

/**
 * A type's line, compiled once: the text before each field the log fills (its key, and the keys and nulls of the
 * fields it never knows that come before it), then what follows the last one.
 */
interface LineTemplate {
  fields: EventField[];
  prefixes: string[];
  suffix: string;
}

function lineTemplate(type: EventType): LineTemplate {
  const fields: EventField[] = [];
  const prefixes: string[] = [];
  let pending = '{';
  eventFields(type).forEach((f, i) => {
    pending += `${i === 0 ? '' : ','}${JSON.stringify(f.name)}:`;
    if (f.neverKnown) {
      pending += 'null';
      return;
    }
    fields.push(f);
    prefixes.push(pending);
    pending = '';
  });
  return { fields, prefixes, suffix: `${pending}}\n` };
}

function line(type: EventType, t: LineTemplate, e: SourceEvent): string {
  assertType(type, e);
  let text = '';
  for (let i = 0; i < t.fields.length; i++) {
    const f = t.fields[i]!;
    text += t.prefixes[i]! + jsonValue(f, fieldValue(type, f, e));
  }
  return text + t.suffix;
}

const templates = new Map<EventType, LineTemplate>();

/** The events (all of `type`) as one gzip NDJSON file. */
export function encodeNdjson(type: EventType, events: EventSource): Promise<Buffer> {
  let t = templates.get(type);
  if (!t) templates.set(type, (t = lineTemplate(type)));
  const template = t;
  // zlib passes its options on to its Transform (Node's lib/zlib.js), whose types do not say so.
  const gzip = createGzip({ level: GZIP_LEVEL, ...({ writableHighWaterMark: QUEUED_BYTES } as ZlibOptions) });
  return collect(gzip, async (write) => {
    let chunk = '';
    await forEachEvent(events, (e) => {
      chunk += line(type, template, e);
      if (chunk.length < CHUNK_CHARS) return;
      const full = chunk;
      chunk = '';
      return write(full);
    });
    if (chunk) await write(chunk);
  });
}
