import type { DuckDBConnection } from '@duckdb/node-api';
import { duckdb, forgetDuckdb } from '../../../platform/lib/duckdb.js';
import { createReadStream } from 'node:fs';
import { open, rm } from 'node:fs/promises';
import path from 'node:path';
import { createInterface } from 'node:readline';
import type { ParquetColumns, ParquetType } from './parquet-schema.js';

/**
 * Parquet parts: a spooled NDJSON part (one JSON object per line, as exportLineSelect prints it) becomes one Parquet
 * file with typed columns (./parquet-schema.ts), written by DuckDB: its read_json with explicit columns feeding
 * COPY ... TO (FORMAT parquet). DuckDB was chosen by measurement over pure-JS and WASM writers, which spend most of
 * their time building nested values in JS (BENCHMARKS.md, `npm run bench:parquet`).
 *
 * Values, by column type. Every column and struct member is nullable: a missing key or a JSON null is null. Nested
 * values are printed from stored jsonb, which old data may have filled with another type than the schema's, so a
 * value of another type never fails the export: it is converted as DuckDB casts it, or becomes null when it cannot be.
 *  - string: a JSON string as is; a number or boolean as text ('7', 'true'); an object or array as compact JSON.
 *  - int64: a number, rounded to the nearest integer (ties to even: 1.5 -> 2, 2.5 -> 2); a numeric string ('12');
 *    true/false -> 1/0; anything else, or a number beyond int64, -> null.
 *  - double: a number; a numeric string ('2.25'); true/false -> 1/0; anything else -> null.
 *  - boolean: true/false; a number (0 -> false, any other -> true); the strings 'true', 't', 'yes', '1' and 'false',
 *    'f', 'no', '0'; anything else -> null.
 *  - timestamp (TIMESTAMP, isAdjustedToUTC, microseconds): an ISO 8601 string, its offset applied (the export prints
 *    'Z'); without an offset it is UTC; a bare date is its midnight UTC; a number or any other string -> null.
 *  - date (DATE): a 'YYYY-MM-DD' string, or the date as written at the start of a timestamp string; an impossible
 *    date or anything else -> null.
 *  - json (custom_attributes): the parsed value printed again as compact JSON, whatever its type.
 *  - list: a JSON array, each element by the element's rule; anything else -> null.
 *  - struct (a list's element, campaigns' engaged): a JSON object; keys the schema does not name are dropped. A value
 *    that is not an object becomes a struct whose members are all null (DuckDB's lenient reader keeps it so, which
 *    keeps a list's length).
 *  - map (campaigns' multiple_converted): a JSON object, each value by the value type's rule; anything else -> null.
 * Top-level keys that are not columns are dropped. Rows keep the file's line order; blank lines are skipped. A line
 * that is not a JSON object fails the conversion with the line's number (never its content, which is personal data).
 *
 * Memory stays bounded whatever the line count: DuckDB reads the file in buffers and the writer holds one row group
 * at a time, sized to about ROW_GROUP_NDJSON_BYTES of NDJSON (at least DuckDB's 2,048-row chunk), and each
 * conversion runs on one thread. At most CONCURRENT_CONVERSIONS run at once in a process; each holds one thread
 * of libuv's pool (default 4, shared with fs and zlib) while it runs.
 */

export type { ParquetColumn, ParquetColumns, ParquetScalar, ParquetType } from './parquet-schema.js';
export { REMOVED_PARQUET_COLUMNS, usersParquetColumns } from './parquet-schema.js';

/** NDJSON bytes per row group: about 30,000 users of every field (~2 KB a line), 10 MB of Parquet. */
const ROW_GROUP_NDJSON_BYTES = 64 * 1024 * 1024;
/** DuckDB reads in chunks of 2,048 rows; its default row group is 122,880 rows. */
const MIN_ROW_GROUP_ROWS = 2_048;
const MAX_ROW_GROUP_ROWS = 122_880;
/** Bytes read from the start of a part to estimate its line size. */
const SAMPLE_BYTES = 1024 * 1024;
/** read_json's default maximum_object_size; its buffers grow with the setting, so it is raised only when needed. */
const DEFAULT_MAX_OBJECT_BYTES = 16 * 1024 * 1024;
/** Conversions at once in one process: each takes a core and up to a few hundred MB while it runs. */
const CONCURRENT_CONVERSIONS = 2;
/**
 * zstd level 1: on every-field export lines, 35% smaller than snappy for about 10% more time, and the same size as
 * zstd's default level 3 in 80% of its time (bench/parquet.ts). Every current Parquet reader has zstd.
 */
const COMPRESSION = 'zstd';
const COMPRESSION_LEVEL = 1;

let running = 0;
const waiting: (() => void)[] = [];

async function inSlot<T>(work: () => Promise<T>): Promise<T> {
  if (running < CONCURRENT_CONVERSIONS) running++;
  else await new Promise<void>((resolve) => waiting.push(resolve));
  try {
    return await work();
  } finally {
    // The slot passes straight to the next waiter, if any.
    const next = waiting.shift();
    if (next) next();
    else running--;
  }
}

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

function duckdbType(type: ParquetType): string {
  if (typeof type === 'string') {
    const scalars = {
      string: 'VARCHAR',
      int64: 'BIGINT',
      double: 'DOUBLE',
      boolean: 'BOOLEAN',
      timestamp: 'TIMESTAMPTZ',
      date: 'DATE',
      json: 'JSON',
    };
    return scalars[type];
  }
  if ('list' in type) return `${duckdbType(type.list)}[]`;
  if ('map' in type) return `MAP(VARCHAR, ${duckdbType(type.map)})`;
  return `STRUCT(${type.struct.map((m) => `${ident(m.name)} ${duckdbType(m.type)}`).join(', ')})`;
}

interface CopyOptions {
  /** read_json's ignore_errors: a value that does not convert becomes null instead of failing the statement. */
  lenient: boolean;
  maxObjectBytes: number;
  rowGroupRows: number;
}

function copySql(ndjsonPath: string, parquetPath: string, columns: ParquetColumns, o: CopyOptions): string {
  const read = `{${columns.map((c) => `${literal(c.name)}: ${literal(duckdbType(c.type))}`).join(', ')}}`;
  // JSON columns hold the parsed value; as VARCHAR it is printed again, compact.
  const select = columns
    .map((c) => (c.type === 'json' ? `${ident(c.name)}::VARCHAR AS ${ident(c.name)}` : ident(c.name)))
    .join(', ');
  return (
    `COPY (SELECT ${select} FROM read_json(${literal(ndjsonPath)}, format = 'newline_delimited', records = true, ` +
    `columns = ${read}, maximum_object_size = ${o.maxObjectBytes}, ignore_errors = ${o.lenient})) ` +
    `TO ${literal(parquetPath)} (FORMAT parquet, COMPRESSION ${COMPRESSION}, COMPRESSION_LEVEL ${COMPRESSION_LEVEL}, ROW_GROUP_SIZE ${o.rowGroupRows})`
  );
}

async function copy(
  conn: DuckDBConnection,
  ndjsonPath: string,
  parquetPath: string,
  columns: ParquetColumns,
  o: CopyOptions,
): Promise<number> {
  const result = await conn.runAndReadAll(copySql(ndjsonPath, parquetPath, columns, o));
  return Number(result.getRows()[0]?.[0] ?? 0);
}

/** Rows per row group for about ROW_GROUP_NDJSON_BYTES of this file's lines, judged from its first SAMPLE_BYTES. */
async function rowGroupRows(ndjsonPath: string): Promise<number> {
  const file = await open(ndjsonPath, 'r');
  try {
    const sample = Buffer.alloc(SAMPLE_BYTES);
    const { bytesRead } = await file.read(sample, 0, SAMPLE_BYTES, 0);
    let lines = 0;
    for (let i = sample.indexOf(10); i !== -1 && i < bytesRead; i = sample.indexOf(10, i + 1)) lines++;
    const lineBytes = bytesRead / Math.max(lines, 1);
    return Math.min(
      MAX_ROW_GROUP_ROWS,
      Math.max(MIN_ROW_GROUP_ROWS, Math.floor(ROW_GROUP_NDJSON_BYTES / Math.max(lineBytes, 1))),
    );
  } finally {
    await file.close();
  }
}

/** The length in bytes of the file's longest line. */
async function longestLine(ndjsonPath: string): Promise<number> {
  let longest = 0;
  let current = 0;
  for await (const chunk of createReadStream(ndjsonPath, { highWaterMark: 1024 * 1024 }) as AsyncIterable<Buffer>) {
    let from = 0;
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) {
      longest = Math.max(longest, current + i - from);
      current = 0;
      from = i + 1;
    }
    current += chunk.length - from;
  }
  return Math.max(longest, current);
}

/**
 * The first line that is not a JSON object, with why, or null. Messages name the line, not its content, which is
 * personal data.
 */
async function firstInvalidLine(ndjsonPath: string): Promise<{ line: number; reason: string } | null> {
  let line = 0;
  for await (const text of createInterface({ input: createReadStream(ndjsonPath), crlfDelay: Infinity })) {
    line++;
    if (text.trim() === '') continue;
    let value: unknown;
    try {
      value = JSON.parse(text);
    } catch {
      return { line, reason: 'is not valid JSON' };
    }
    if (value === null || typeof value !== 'object' || Array.isArray(value)) {
      return {
        line,
        reason: `is JSON but not an object (${value === null ? 'null' : Array.isArray(value) ? 'an array' : `a ${typeof value}`})`,
      };
    }
  }
  return null;
}

/** Throws, naming the line, unless every non-blank line of the file is a JSON object. */
async function assertJsonObjects(conn: DuckDBConnection, ndjsonPath: string, maxObjectBytes: number): Promise<void> {
  let failure: unknown = null;
  try {
    const result = await conn.runAndReadAll(
      `SELECT count(*) FILTER (WHERE json_type(json) <> 'OBJECT') FROM read_json_objects(${literal(ndjsonPath)}, format = 'newline_delimited', maximum_object_size = ${maxObjectBytes})`,
    );
    if (Number(result.getRows()[0]?.[0] ?? 0) === 0) return;
  } catch (err) {
    failure = err;
  }
  const invalid = await firstInvalidLine(ndjsonPath);
  const name = path.basename(ndjsonPath);
  if (invalid) throw new Error(`NDJSON part ${name}: line ${invalid.line} ${invalid.reason}`);
  throw new Error(`NDJSON part ${name} could not be read as JSON lines`, { cause: failure ?? undefined });
}

/**
 * Converts the NDJSON file (one JSON object per line, as exportLineSelect produces) into a Parquet file at
 * parquetPath, replacing any file there. Bounded memory whatever the line count; throws on a line that is not a JSON
 * object, naming the line, and then leaves no file at parquetPath.
 */
export async function writeParquetFile(
  ndjsonPath: string,
  parquetPath: string,
  columns: ParquetColumns,
): Promise<{ rows: number }> {
  if (columns.length === 0) throw new Error('a Parquet part needs at least one column');
  // read_json takes a glob: a path with glob characters could name other files.
  if (/[*?[\]{}]/.test(ndjsonPath)) throw new Error(`NDJSON part path must not contain glob characters: ${ndjsonPath}`);
  return inSlot(async () => {
    const groupRows = await rowGroupRows(ndjsonPath);
    const conn = await (await duckdb()).connect();
    try {
      try {
        // The common case, strict: any value that does not convert fails the statement, which is then redone below.
        return {
          rows: await copy(conn, ndjsonPath, parquetPath, columns, {
            lenient: false,
            maxObjectBytes: DEFAULT_MAX_OBJECT_BYTES,
            rowGroupRows: groupRows,
          }),
        };
      } catch {
        // A value of an unexpected type, a line longer than the object limit, or a line that is not a JSON object.
        // ignore_errors would also turn a malformed line into a row of nulls, so the lines are checked first; then
        // the same reader, lenient, makes each failed value null (the same result as strict for every other value).
        const maxObjectBytes = Math.max(DEFAULT_MAX_OBJECT_BYTES, (await longestLine(ndjsonPath)) + 1);
        await assertJsonObjects(conn, ndjsonPath, maxObjectBytes);
        return {
          rows: await copy(conn, ndjsonPath, parquetPath, columns, {
            lenient: true,
            maxObjectBytes,
            rowGroupRows: groupRows,
          }),
        };
      }
    } catch (err) {
      await rm(parquetPath, { force: true });
      // After some internal errors DuckDB refuses every later statement; the next conversion then opens a new one.
      if (/invalidated/i.test(String((err as Error)?.message))) forgetDuckdb();
      throw err;
    } finally {
      conn.closeSync();
    }
  });
}
