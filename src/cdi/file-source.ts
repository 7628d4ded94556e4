import { createReadStream, createWriteStream } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGunzip } from 'node:zlib';
import { duckdb } from '../lib/duckdb.js';
import { LocalStore } from '../storage/local-store.js';
import type { ObjectStore, StoredObject } from '../storage/object-store.js';
import { normaliseRow, type SourceRow } from './rows.js';

/**
 * Files under a prefix of the workspace's store as a Cloud Data Ingestion source (docs/cdi.md): NDJSON (optionally
 * gzipped), CSV with a header, or Parquet, each row the table layout's columns (any letter case; no UPDATED_AT needed,
 * the time a run began reading the file stands for it). A file is taken once per key and etag, files in key order;
 * rows in file order. Parquet and CSV are read by DuckDB from a local copy (the built-in store's file itself, or a download), streamed a
 * chunk at a time, so memory stays flat whatever the file's size.
 */

export type FileFormat = 'parquet' | 'ndjson' | 'csv';

/** What a file row is: its columns, or why the line could not be read (the line's number, never its content). */
export type FileRow = { row: SourceRow } | { refused: string };

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

async function* duckdbRows(file: string, format: 'parquet' | 'csv'): AsyncGenerator<FileRow> {
  const db = await duckdb();
  const conn = await db.connect();
  try {
    // Each row as one JSON object: text stays text, a Parquet struct or JSON column becomes nested JSON.
    const result = await conn.stream(`SELECT to_json(t)::VARCHAR AS j FROM ${DUCKDB_READERS[format](file)} t`);
    for (;;) {
      const chunk = await result.fetchChunk();
      if (!chunk || chunk.rowCount === 0) break;
      for (const [j] of chunk.getRows()) yield { row: normaliseRow(JSON.parse(String(j)) as Record<string, unknown>) };
    }
  } finally {
    conn.closeSync();
  }
}

async function* ndjsonRows(body: Readable, gzipped: boolean): AsyncGenerator<FileRow> {
  const lines = createInterface({ input: gzipped ? body.pipe(createGunzip()) : body, crlfDelay: Infinity });
  let n = 0;
  for await (const line of lines) {
    n++;
    if (line.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(line);
    } catch {
      yield { refused: `line ${n} is not JSON` };
      continue;
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value))
      yield { refused: `line ${n} is not a JSON object` };
    else yield { row: normaliseRow(value as Record<string, unknown>) };
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
