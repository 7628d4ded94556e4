import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { duckdb } from '../../platform/lib/duckdb.js';
import { LocalStore } from '../../platform/storage/local-store.js';
import type { ObjectStore, StoredObject } from '../../platform/storage/object-store.js';
import type { DuckDBConnection } from '@duckdb/node-api';
import {
  headOf,
  KEPT_PAYLOAD_BYTES,
  MAX_PAYLOAD_BYTES,
  normaliseRow,
  PayloadTooLarge,
  type SourceRow,
} from './rows.js';

/**
 * Files under a prefix of the workspace's store as a Cloud Data Ingestion source (docs/cdi.md): NDJSON (optionally
 * gzipped), CSV with a header, or Parquet, each row the table layout's columns (any letter case; no UPDATED_AT needed,
 * the time a run began reading the file stands for it). A file is taken once per key and etag, files in key order; rows
 * in file order. Parquet and CSV are read by DuckDB from a local copy (the built-in store's file itself, or a
 * download), streamed a chunk at a time, so memory stays flat whatever the file's size.
 */

export type FileFormat = 'parquet' | 'ndjson' | 'csv';

/**
 * What a file row is: its columns, or why the line could not be read (the line's number, never its content); `bytes`
 * about what it holds in memory, which bounds a batch.
 */
export type FileRow = ({ row: SourceRow } | { refused: string }) & { bytes: number };

/** The rejects files the sync writes beside its sources, which are not sources. */
export const REJECTS_SUFFIX = '.rejects.ndjson';

/** The files to take, in key order: under the prefix, of the format, not taken before (by key and etag). */
export async function pendingFiles(
  store: ObjectStore,
  prefix: string,
  format: FileFormat,
  taken: (f: StoredObject) => boolean,
): Promise<StoredObject[]> {
  const extensions = { parquet: /\.parquet$/i, csv: /\.csv$/i, ndjson: /\.(nd)?json(l)?(\.gz)?$/i }[format];
  const files = await store.list(prefix);
  return files
    .filter((f) => !f.key.endsWith(REJECTS_SUFFIX) && extensions.test(f.key) && !taken(f))
    .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
}

/** A local path of the object: the built-in store's own file, or a download into `dir`. */
async function localCopy(store: ObjectStore, key: string, dir: string): Promise<string> {
  if (store instanceof LocalStore) return store.pathOf(key);
  const file = path.join(dir, 'source');
  await pipeline(await store.get(key), createWriteStream(file));
  return file;
}

const DUCKDB_READERS: Record<'parquet' | 'csv', (file: string) => string> = {
  parquet: (file) => `read_parquet('${file.replaceAll("'", "''")}')`,
  // Every value as text, as a warehouse's CSV export writes it: PAYLOAD is JSON text, UPDATED_AT a time.
  csv: (file) => `read_csv('${file.replaceAll("'", "''")}', header = true, all_varchar = true)`,
};

/** Why a payload over the cap is not read: the column (named by DuckDB) that carries its first kilobyte instead. */
const HEAD_COLUMN = '__ces_payload_head';
const quoteDuck = (name: string) => `"${name.replaceAll('"', '""')}"`;

/**
 * The query of a Parquet or CSV file's rows, each one JSON object. Its PAYLOAD column (if any) is measured first, as
 * JSON text when it is a struct, map or list: one over the cap is replaced by NULL and its first kilobyte, so that a
 * larger payload never reaches this process.
 */
async function duckdbQuery(conn: DuckDBConnection, reader: string): Promise<string> {
  const described = await conn.runAndReadAll(`DESCRIBE SELECT * FROM ${reader}`);
  const payload = described.getRows().find(([name]) => String(name).toLowerCase() === 'payload');
  if (!payload) return `SELECT to_json(t)::VARCHAR AS j FROM ${reader} t`;
  const column = quoteDuck(String(payload[0]));
  const type = String(payload[1]).toUpperCase();
  const text = type === 'VARCHAR' ? column : type === 'JSON' ? `${column}::VARCHAR` : `to_json(${column})::VARCHAR`;
  // strlen counts bytes; left counts characters (the head is cut to a kilobyte of bytes in Node).
  return `SELECT to_json(t)::VARCHAR AS j FROM (
            SELECT * REPLACE (CASE WHEN strlen(${text}) > ${MAX_PAYLOAD_BYTES} THEN NULL ELSE ${column} END AS ${column}),
                   CASE WHEN strlen(${text}) > ${MAX_PAYLOAD_BYTES} THEN left(${text}, ${KEPT_PAYLOAD_BYTES}) END AS ${HEAD_COLUMN}
              FROM ${reader}) t`;
}

/** A row DuckDB wrote as JSON, its payload marked too large when the query found it so. */
function duckdbRow(json: string): FileRow {
  const raw = JSON.parse(json) as Record<string, unknown>;
  const head = raw[HEAD_COLUMN];
  const row = normaliseRow(raw);
  if (typeof head === 'string') row.payload = new PayloadTooLarge(headOf(head));
  return { row, bytes: json.length };
}

async function* duckdbRows(file: string, format: 'parquet' | 'csv'): AsyncGenerator<FileRow> {
  const db = await duckdb();
  const conn = await db.connect();
  try {
    // Each row as one JSON object: text stays text, a Parquet struct or JSON column becomes nested JSON.
    const result = await conn.stream(await duckdbQuery(conn, DUCKDB_READERS[format](file)));
    for (;;) {
      const chunk = await result.fetchChunk();
      if (!chunk || chunk.rowCount === 0) break;
      for (const [j] of chunk.getRows()) yield duckdbRow(String(j));
    }
  } finally {
    conn.closeSync();
  }
}

/**
 * The longest NDJSON line read: longer ones are refused without being held whole (a PAYLOAD of at most 1 MB written
 * as escaped JSON text takes more than 1 MB of its line, rarely four times as much).
 */
const MAX_LINE_BYTES = 4 * MAX_PAYLOAD_BYTES;

/** The lines of a byte stream (split at \n, a \r before it dropped); a line over `max` bytes comes as null, unread. */
export async function* boundedLines(body: AsyncIterable<Buffer>, max: number): AsyncGenerator<string | null> {
  let parts: Buffer[] = [];
  let size = 0;
  let over = false;
  const line = (): string | null => {
    if (over) return null;
    const text = (parts.length === 1 ? parts[0]! : Buffer.concat(parts)).toString('utf8');
    return text.endsWith('\r') ? text.slice(0, -1) : text;
  };
  for await (const chunk of body) {
    let start = 0;
    for (;;) {
      const nl = chunk.indexOf(0x0a, start);
      const piece = chunk.subarray(start, nl === -1 ? chunk.length : nl);
      if (!over && size + piece.length > max) {
        over = true;
        parts = [];
      } else if (!over) parts.push(piece);
      size += piece.length;
      if (nl === -1) break;
      yield line();
      parts = [];
      size = 0;
      over = false;
      start = nl + 1;
    }
  }
  if (size > 0 || over) yield line();
}

/** The payload of an NDJSON row, or its too-large marker: measured only when its line could hold more than the cap. */
function cappedPayload(value: unknown, line: string): unknown {
  if (value === null || typeof value !== 'object') return value;
  // A UTF-16 unit is at most 3 bytes of UTF-8: most lines are too short to need counting.
  if (line.length * 3 <= MAX_PAYLOAD_BYTES || Buffer.byteLength(line) <= MAX_PAYLOAD_BYTES) return value;
  const text = JSON.stringify(value);
  return Buffer.byteLength(text) > MAX_PAYLOAD_BYTES ? new PayloadTooLarge(headOf(text)) : value;
}

async function* ndjsonRows(body: Readable, gzipped: boolean): AsyncGenerator<FileRow> {
  const input = gzipped ? body.pipe(createGunzip()) : body;
  let n = 0;
  for await (const line of boundedLines(input, MAX_LINE_BYTES)) {
    n++;
    if (line === null) {
      yield { refused: `line ${n} is longer than ${MAX_LINE_BYTES / MAX_PAYLOAD_BYTES} MB`, bytes: 0 };
      continue;
    }
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      yield { refused: `line ${n} is not JSON`, bytes: 0 };
      continue;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      yield { refused: `line ${n} is not a JSON object`, bytes: 0 };
      continue;
    }
    const row = normaliseRow(value as Record<string, unknown>);
    if (row.payload !== undefined) row.payload = cappedPayload(row.payload, line);
    yield { row, bytes: line.length };
  }
}

/** The rows of one file, in order. A file that is not its format throws (the run ends as an error, naming the key). */
export async function* fileRows(store: ObjectStore, key: string, format: FileFormat): AsyncGenerator<FileRow> {
  if (format === 'ndjson') {
    const body = store instanceof LocalStore ? createReadStream(store.pathOf(key)) : await store.get(key);
    yield* ndjsonRows(body, /\.gz$/i.test(key));
    return;
  }
  const dir = await mkdtemp(path.join(tmpdir(), 'ces-cdi-'));
  try {
    yield* duckdbRows(await localCopy(store, key, dir), format);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}
