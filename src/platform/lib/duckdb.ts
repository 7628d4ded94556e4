import { DuckDBInstance } from '@duckdb/node-api';
import { tmpdir } from 'node:os';
import path from 'node:path';

/**
 * The process's one in-memory DuckDB, loaded only by code that needs it (Parquet export parts, Cloud Data Ingestion
 * of Parquet and CSV files); each user takes a connection of its own.
 */

let instance: Promise<DuckDBInstance> | undefined;

/** The process's DuckDB, opened on first use. */
export function duckdb(): Promise<DuckDBInstance> {
  if (!instance) {
    instance = openDuckdb();
    // A failed start is tried again by the next conversion.
    instance.catch(() => {
      instance = undefined;
    });
  }
  return instance;
}

async function openDuckdb(): Promise<DuckDBInstance> {
  const db = await DuckDBInstance.create(':memory:', {
    // One thread a conversion: a conversion runs on the thread that called it, and concurrent parts spread over the
    // cores as gzip parts do.
    threads: '1',
    // The json and parquet extensions are built in; nothing is ever fetched.
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
    allow_community_extensions: 'false',
    // Should DuckDB ever spill, its files go where the export spool goes, named so that a starting worker removes
    // those of a dead process (./spool.ts).
    temp_directory: path.join(tmpdir(), `ces-export-${process.pid}-duckdb`),
  });
  const conn = await db.connect();
  try {
    // Only times written without an offset depend on it; the export always prints 'Z'.
    await conn.run(`SET GLOBAL TimeZone = 'UTC'`);
  } finally {
    conn.closeSync();
  }
  return db;
}

/** After some internal errors DuckDB refuses every later statement: the next user then opens a new one. */
export function forgetDuckdb(): void {
  instance = undefined;
}
