// Parquet files read back with hyparquet, a pure-JS reader that shares no code with the writer (DuckDB), and their
// values compared with the NDJSON lines the same export prints.
import { asyncBufferFromFile, parquetMetadataAsync, parquetReadObjects, type FileMetaData } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import type { ParquetColumns, ParquetType } from '../../src/pipelines/exports/shard/parquet-schema.js';

export async function readParquet(
  parquetPath: string,
  columns?: string[],
): Promise<{ metadata: FileMetaData; rows: Record<string, unknown>[] }> {
  const buffer = await asyncBufferFromFile(parquetPath);
  const metadata = await parquetMetadataAsync(buffer);
  const rows = await parquetReadObjects({ file: buffer, metadata, compressors, columns });
  return { metadata, rows };
}

// ---- Values: what the file holds and what the NDJSON says, both in one comparable form (times as instants).
export function fromNdjson(type: ParquetType, v: unknown): unknown {
  if (v === undefined || v === null) return null;
  if (typeof type === 'string') {
    if (type === 'int64') return BigInt(v as number);
    if (type === 'timestamp') return Date.parse(v as string);
    return v;
  }
  if ('list' in type) return (v as unknown[]).map((e) => fromNdjson(type.list, e));
  if ('map' in type)
    return Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, fromNdjson(type.map, x)]));
  return Object.fromEntries(
    type.struct.map((m) => [m.name, fromNdjson(m.type, (v as Record<string, unknown>)[m.name])]),
  );
}

export function fromParquet(type: ParquetType, v: unknown): unknown {
  if (v === undefined || v === null) return null;
  if (typeof type === 'string') {
    if (type === 'timestamp') return (v as Date).getTime();
    if (type === 'date') return (v as Date).toISOString().slice(0, 10);
    if (type === 'json') return JSON.parse(v as string);
    return v;
  }
  if ('list' in type) return (v as unknown[]).map((e) => fromParquet(type.list, e));
  if ('map' in type)
    return Object.fromEntries(Object.entries(v as object).map(([k, x]) => [k, fromParquet(type.map, x)]));
  return Object.fromEntries(
    type.struct.map((m) => [m.name, fromParquet(m.type, (v as Record<string, unknown>)[m.name])]),
  );
}

/** The rows as the columns say they should read back, and as they do. */
export function compareParquet(
  columns: ParquetColumns,
  lines: Record<string, unknown>[],
  rows: Record<string, unknown>[],
) {
  const want = lines.map((line) => Object.fromEntries(columns.map((c) => [c.name, fromNdjson(c.type, line[c.name])])));
  const got = rows.map((row) => Object.fromEntries(columns.map((c) => [c.name, fromParquet(c.type, row[c.name])])));
  return { want, got };
}
