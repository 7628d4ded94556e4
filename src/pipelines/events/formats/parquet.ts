import type { DuckDBAppender, DuckDBConnection } from '@duckdb/node-api';
import { randomUUID } from 'node:crypto';
import { readFile, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import path from 'node:path';
import type { EventType } from '../../../profiles/event-log-types.js';
import { duckdb, forgetDuckdb } from '../../../platform/lib/duckdb.js';
import type { EventField, FieldKind, FieldValue } from './fields.js';
import { assertType, eventFields, fieldValue, jsonText, unixSeconds } from './records.js';
import { forEachEvent, type EventSource } from './source.js';

/**
 * Parquet files, written by DuckDB (the process's one instance, src/platform/lib/duckdb.ts): the events are appended
 * to a temporary table of the type's typed columns (an appender, no JSON round trip), which COPY writes as one Parquet
 * file. Columns: VARCHAR (strings; `properties` as its JSON text), TIMESTAMP WITH TIME ZONE (`time`, whole seconds:
 * Parquet TIMESTAMP, isAdjustedToUTC, microseconds), DOUBLE (price), BIGINT (quantity), BOOLEAN. Rows keep the
 * events' order. zstd level 1, as the export's Parquet parts (src/pipelines/exports/shard/parquet-writer.ts).
 *
 * Deterministic: DuckDB writes the same bytes for the same rows on one thread (the instance runs one) with the same
 * DuckDB version, whose name is in the footer (`created_by`); another DuckDB version may write other bytes.
 *
 * Memory: the table holds the file's rows until COPY (max_events_per_file of them, tens of MB at 100,000 events), then
 * the file is read back into memory and its spool file removed.
 */

/** Each kind's column type in the file. */
const DUCKDB_TYPES: Record<FieldKind, string> = {
  string: 'VARCHAR',
  time: 'TIMESTAMPTZ',
  json: 'VARCHAR',
  float: 'DOUBLE',
  long: 'BIGINT',
  boolean: 'BOOLEAN',
};
/**
 * Each kind's column in the staging table, filled by the appender's direct calls: a time as its Unix seconds and a
 * long as a double (a TIMESTAMPTZ or BIGINT value goes through a slower generic path, one object a value), both made
 * the file's type by COPY's SELECT. Seconds and quantities are integers far below 2^53: exact as doubles.
 */
const STAGING_TYPES: Record<FieldKind, string> = { ...DUCKDB_TYPES, time: 'DOUBLE', long: 'DOUBLE' };
const TABLE = 'event_file';

const ident = (name: string) => `"${name.replaceAll('"', '""')}"`;
const literal = (text: string) => `'${text.replaceAll("'", "''")}'`;

function append(appender: DuckDBAppender, f: EventField, v: FieldValue): void {
  if (v === null) return appender.appendNull();
  switch (f.kind) {
    case 'string':
      return appender.appendVarchar(v as string);
    case 'json':
      return appender.appendVarchar(jsonText(v));
    case 'time':
      return appender.appendDouble(unixSeconds(v as Date));
    case 'float':
    case 'long':
      return appender.appendDouble(v as number);
    case 'boolean':
      return appender.appendBoolean(v as boolean);
  }
}

/** The file's columns, in the type's order: a field the log never knows is a typed NULL, not a staged column. */
function selectSql(type: EventType): string {
  const columns = eventFields(type).map((f) => {
    const name = ident(f.name);
    if (f.neverKnown) return `NULL::${DUCKDB_TYPES[f.kind]} AS ${name}`;
    if (f.kind === 'time') return `to_timestamp(${name}) AS ${name}`;
    if (f.kind === 'long') return `${name}::BIGINT AS ${name}`;
    return name;
  });
  return `SELECT ${columns.join(', ')} FROM ${TABLE}`;
}

async function appendEvents(conn: DuckDBConnection, type: EventType, events: EventSource): Promise<void> {
  const fields = eventFields(type).filter((f) => !f.neverKnown);
  await conn.run(
    `CREATE OR REPLACE TEMP TABLE ${TABLE} (${fields.map((f) => `${ident(f.name)} ${STAGING_TYPES[f.kind]}`).join(', ')})`,
  );
  const appender = await conn.createAppender(TABLE, 'main', 'temp');
  // A row's values are all taken before any is appended: an event that fails leaves no half row behind it.
  const row = new Array<FieldValue>(fields.length);
  try {
    await forEachEvent(events, (e) => {
      assertType(type, e);
      for (let i = 0; i < fields.length; i++) row[i] = fieldValue(type, fields[i]!, e);
      for (let i = 0; i < fields.length; i++) append(appender, fields[i]!, row[i]!);
      appender.endRow();
    });
    appender.flushSync();
  } finally {
    appender.closeSync();
  }
}

/** The events (all of `type`) as one Parquet file. */
export async function encodeParquet(type: EventType, events: EventSource): Promise<Buffer> {
  // Named as the export's spool (`ces-export-<pid>-...`), so that a starting worker removes the file of a process
  // killed while writing it (removeOrphanSpoolDirs, src/pipelines/exports/shard/spool.ts).
  const file = path.join(tmpdir(), `ces-export-${process.pid}-event-file-${randomUUID()}.parquet`);
  const conn = await (await duckdb()).connect();
  try {
    await appendEvents(conn, type, events);
    await conn.run(
      `COPY (${selectSql(type)}) TO ${literal(file)} (FORMAT parquet, COMPRESSION zstd, COMPRESSION_LEVEL 1)`,
    );
    return await readFile(file);
  } catch (err) {
    // After some internal errors DuckDB refuses every later statement; the next file then opens a new instance.
    if (/invalidated/i.test(String((err as Error)?.message))) forgetDuckdb();
    throw err;
  } finally {
    conn.closeSync();
    await rm(file, { force: true });
  }
}
