/**
 * The event log's rows in COPY's binary format (PostgreSQL's "Binary Format" of COPY): each value as the type's
 * send/receive form, so that PostgreSQL parses no text at all but the properties' JSON. Per event, on 2 cores with
 * bench:ingest's events, it is the cheapest way found to both sides: the text format cost the process about twice
 * what one JSON.stringify of the batch does (its concatenations), and that JSON as a jsonb parameter cost PostgreSQL
 * about 5 µs an event to parse (BENCHMARKS.md).
 */

import { COPY_BINARY_HEADER } from '../platform/db/copy-binary.js';

/** The row's columns, in the order `LogRowsEncoder` writes them. */
export const LOG_COPY_COLUMNS =
  'workspace_id, id, type, time, profile_id, user_id, external_user_id, app_id, name, properties, data';

/**
 * A row of the log as the writer made it: ids as hex (dashes allowed), times as ISO 8601 text, taken to the
 * millisecond (Date.parse): every writer gives a canonical event time or a toISOString, which carry no more.
 */
export interface LogRow {
  workspaceId: string;
  id: string;
  type: string;
  time: string;
  profileId: number | null;
  userId: string | null;
  externalUserId: string | null;
  appId: string | null;
  name: string | null;
  /** JSON text, or null. */
  properties: string | null;
  /** JSON text. */
  data: string;
}

const FIELDS = 11;
/** PostgreSQL's epoch (2000-01-01 UTC), in Unix milliseconds. */
const PG_EPOCH_MS = Date.UTC(2000, 0, 1);
const CHUNK_BYTES = 1 << 20;
const JSONB_VERSION = 1;
/** How many repeated values an encoder keeps (types and `{}`: a handful). */
const MAX_REPEATED = 64;

/** A value's binary COPY form (its length, then its bytes), for values that rows repeat. */
function valueBytes(bytes: Uint8Array): Uint8Array {
  const out = Buffer.allocUnsafe(4 + bytes.length);
  out.writeInt32BE(bytes.length, 0);
  out.set(bytes, 4);
  return out;
}

/** The 16 bytes of a uuid given as hex, dashes allowed (`text`, as given, for the error). */
function uuidBytes(uuid: string): Uint8Array {
  const hex = uuid.length === 32 ? uuid : uuid.replaceAll('-', '');
  const bytes = Buffer.from(hex, 'hex');
  if (hex.length !== 32 || bytes.length !== 16) throw new Error(`not a uuid: ${JSON.stringify(uuid)}`);
  return bytes;
}

/** Buffers filled one after another; a value never spans two. */
class Chunks {
  readonly done: Buffer[] = [];
  buf = Buffer.allocUnsafe(CHUNK_BYTES);
  at = 0;

  /** Room for `bytes` more in the current buffer (a new one, as large as needed, when it has not). */
  room(bytes: number): void {
    if (this.at + bytes <= this.buf.length) return;
    this.done.push(this.buf.subarray(0, this.at));
    this.buf = Buffer.allocUnsafe(Math.max(CHUNK_BYTES, bytes));
    this.at = 0;
  }

  int16(v: number): void {
    this.room(2);
    this.at = this.buf.writeInt16BE(v, this.at);
  }

  int32(v: number): void {
    this.room(4);
    this.at = this.buf.writeInt32BE(v, this.at);
  }

  null(): void {
    this.int32(-1);
  }

  /** A value already in its binary form (`valueBytes`: length and bytes). */
  value(bytes: Uint8Array): void {
    this.room(bytes.length);
    this.buf.set(bytes, this.at);
    this.at += bytes.length;
  }

  /** A uuid from its 32 hex digits (`text`, as given, for the error). */
  uuid(hex: string, text: string): void {
    this.room(20);
    this.at = this.buf.writeInt32BE(16, this.at);
    if (hex.length !== 32 || this.buf.write(hex, this.at, 'hex') !== 16)
      throw new Error(`not a uuid: ${JSON.stringify(text)}`);
    this.at += 16;
  }

  /** An int64 value (length and value) from a JavaScript integer (exact up to 2^53). */
  int64(v: number): void {
    this.room(12);
    this.at = this.buf.writeInt32BE(8, this.at);
    const high = Math.floor(v / 2 ** 32);
    this.at = this.buf.writeInt32BE(high, this.at);
    this.at = this.buf.writeUInt32BE(v - high * 2 ** 32, this.at);
  }

  /** Text as UTF-8, after a version byte for jsonb. The room asked for is the most UTF-8 a string can take. */
  text(v: string, version?: number): void {
    this.room(4 + 1 + v.length * 3);
    const start = this.at;
    this.at += 4;
    if (version !== undefined) this.buf[this.at++] = version;
    this.at += this.buf.write(v, this.at, 'utf8');
    this.buf.writeInt32BE(this.at - start - 4, start);
  }

  textOrNull(v: string | null): void {
    if (v === null) this.null();
    else this.text(v);
  }
}

/**
 * COPY ... (FORMAT binary) input, a row at a time (`add` reads the row and keeps nothing of it, so a writer may reuse
 * one object for every row): header, tuples, and the trailer `finish` adds.
 */
export class LogRowsEncoder {
  private readonly out = new Chunks();
  /** The last workspace's id, in its binary form: a batch's rows mostly share their workspace. */
  private lastWorkspace = '';
  private lastWorkspaceValue: Uint8Array = new Uint8Array();
  /** Values that many rows repeat (types, an empty `data`), in their binary form. */
  private readonly repeated = new Map<string, Uint8Array>();

  constructor() {
    this.out.at += COPY_BINARY_HEADER.copy(this.out.buf, this.out.at);
  }

  private workspace(uuid: string): Uint8Array {
    if (uuid !== this.lastWorkspace) {
      this.lastWorkspaceValue = valueBytes(uuidBytes(uuid));
      this.lastWorkspace = uuid;
    }
    return this.lastWorkspaceValue;
  }

  /** A short text value that rows repeat, in its binary form (with jsonb's version byte when `version` is given). */
  private repeatedText(v: string, version?: number): Uint8Array {
    const key = version === undefined ? v : `${version}:${v}`;
    let bytes = this.repeated.get(key);
    if (!bytes) {
      const text = Buffer.from(v, 'utf8');
      bytes = valueBytes(version === undefined ? text : Buffer.concat([Buffer.of(version), text]));
      if (this.repeated.size < MAX_REPEATED) this.repeated.set(key, bytes);
    }
    return bytes;
  }

  add(r: LogRow): void {
    const out = this.out;
    const ms = Date.parse(r.time);
    if (!Number.isFinite(ms)) throw new Error(`not a time: ${JSON.stringify(r.time)}`);
    out.int16(FIELDS);
    out.value(this.workspace(r.workspaceId));
    out.uuid(r.id.length === 32 ? r.id : r.id.replaceAll('-', ''), r.id);
    out.value(this.repeatedText(r.type));
    out.int64((ms - PG_EPOCH_MS) * 1000);
    if (r.profileId === null) out.null();
    else out.int64(r.profileId);
    out.textOrNull(r.userId);
    out.textOrNull(r.externalUserId);
    out.textOrNull(r.appId);
    out.textOrNull(r.name);
    if (r.properties === null) out.null();
    else out.text(r.properties);
    if (r.data.length <= 2) out.value(this.repeatedText(r.data, JSONB_VERSION));
    else out.text(r.data, JSONB_VERSION);
  }

  finish(): Buffer[] {
    this.out.int16(-1);
    this.out.done.push(this.out.buf.subarray(0, this.out.at));
    return this.out.done;
  }
}
