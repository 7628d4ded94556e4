import { to as copyTo } from 'pg-copy-streams';
import type { PoolClient } from '../../platform/db/pool.js';
import type { EventType } from '../../profiles/event-log-types.js';
import type { EventExport } from './event-exports.js';
import { compactJsonb, JsonText } from './formats/json-text.js';
import type { SourceEvent } from './formats/source.js';

/**
 * Reading a planned file's rows from the log as COPY text, streamed to the encoder as they come. A profile of a
 * 1,000,000-event delivery (bench:events, BENCHMARKS.md) found `pg`'s row parsing, timestamps and JSON.parse of
 * jsonb (which the encoders stringified again) a third of the worker's busy time, and, once those were gone, the
 * young-generation garbage collector a third of its time: a file's 15,000 rows read whole into an array (three files
 * in flight) outlived the nursery and were copied, then promoted. Streamed, a row lives from its line to its record.
 *
 * Each line is the event's id, time (Unix milliseconds), user_id, external_user_id, app_id, name, properties and data
 * (their JSON text: jsonb's, or for properties logged since migration 0450 the json as written). Only `data` (a few
 * fields, which the mappings read) is parsed; `properties` goes on as its JSON text (JsonText), the bytes
 * JSON.stringify gives of the parsed object (./formats/json-text.ts). The type and workspace are the file's.
 */

/** Where a file's rows begin and end (a row of event_export_files). */
export interface FileSlice {
  event_type: EventType;
  hour: Date;
  xid_from: string;
  xid_to: string;
  first_xid: string | null;
  first_id: string | null;
  next_xid: string | null;
  next_id: string | null;
}

const NEWLINE = 0x0a;
/** COPY text's escapes as it writes them (the letter after the backslash), and the character each stands for. */
const COPY_UNESCAPES: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v', '\\': '\\' };
const COPY_ESCAPE = /\\(.)/g;

function copyField(text: string): string | null {
  if (text === '\\N') return null;
  return text.includes('\\') ? text.replace(COPY_ESCAPE, (_, c: string) => COPY_UNESCAPES[c] ?? c) : text;
}

/** An object's or array's text as JsonText; null, or a value of another kind (which the encoders refuse), parsed. */
function propertiesOf(text: string | null): SourceEvent['properties'] {
  if (text === null) return null;
  if (text.startsWith('{') || text.startsWith('[')) return new JsonText(compactJsonb(text));
  return JSON.parse(text) as Record<string, unknown> | null;
}

/**
 * The statement reading a file's rows, in (xid, id) order. COPY takes no parameters: every value is a literal quoted
 * by `pg`. The row comparisons alone leave the BRIN index on xid unused (it takes only plain bounds), and every file
 * then scanned its whole day partition: the plain xid bounds of its slice restate them for the index.
 */
function fileSql(db: PoolClient, exp: EventExport, f: FileSlice): string {
  const q = (v: string | null) => (v === null ? 'NULL' : db.escapeLiteral(v));
  const [from, to] = [`${q(f.xid_from)}::bigint`, `${q(f.xid_to)}::bigint`];
  const [firstXid, nextXid] = [`${q(f.first_xid)}::bigint`, `${q(f.next_xid)}::bigint`];
  const hour = `${q(f.hour.toISOString())}::timestamptz`;
  return `SELECT id, floor(date_part('epoch', time) * 1000)::int8, user_id, external_user_id, app_id, name,
                 properties, data
            FROM event_log
           WHERE workspace_id = ${q(exp.workspaceId)}::uuid AND type = ${q(f.event_type)}
             AND accepted_at >= ${hour} AND accepted_at < ${hour} + interval '1 hour'
             AND xid >= ${from} AND xid < ${to}
             AND xid >= coalesce(${firstXid}, ${from}) AND xid <= coalesce(${nextXid}, ${to})
             AND (${firstXid} IS NULL OR (xid, id) >= (${firstXid}, ${q(f.first_id)}::uuid))
             AND (${nextXid} IS NULL OR (xid, id) < (${nextXid}, ${q(f.next_id)}::uuid))
           ORDER BY xid, id`;
}

/** Counts what a file's rows gave, once they have all been read. */
export interface RowCount {
  events: number;
}

/**
 * The file's rows as events, read on `db` as they arrive (the COPY stream's backpressure holds PostgreSQL back while
 * the encoder works). Left early (the encoder failed), the rest of the COPY is read and dropped, so that `db` can go on.
 */
export async function* fileRows(
  db: PoolClient,
  exp: EventExport,
  f: FileSlice,
  count: RowCount,
): AsyncGenerator<SourceEvent> {
  const stream = db.query(copyTo(`COPY (${fileSql(db, exp, f)}) TO STDOUT`));
  const chunks = stream[Symbol.asyncIterator]() as AsyncIterator<Buffer>;
  let rest: Buffer | null = null;
  let ended = false;
  try {
    for (;;) {
      const next = await chunks.next();
      if (next.done) break;
      let chunk: Buffer = rest ? Buffer.concat([rest, next.value]) : next.value;
      const end: number = chunk.lastIndexOf(NEWLINE);
      rest = end + 1 < chunk.length ? chunk.subarray(end + 1) : null;
      chunk = chunk.subarray(0, end + 1);
      // A newline byte is never inside a UTF-8 character: the lines decode whole.
      const lines = chunk.toString('utf8').split('\n');
      lines.pop();
      for (const line of lines) {
        count.events++;
        yield eventOf(exp, f, line);
      }
    }
    ended = true;
    if (rest) throw new Error(`event file read ended inside a row (${rest.length} bytes)`);
  } finally {
    if (!ended) for (let r = await chunks.next(); !r.done; r = await chunks.next());
  }
}

function eventOf(exp: EventExport, f: FileSlice, line: string): SourceEvent {
  const c = line.split('\t');
  return {
    id: c[0]!,
    type: f.event_type,
    workspaceId: exp.workspaceId,
    time: new Date(Number(c[1])),
    userId: copyField(c[2]!),
    externalUserId: copyField(c[3]!),
    appId: copyField(c[4]!),
    name: copyField(c[5]!),
    properties: propertiesOf(copyField(c[6]!)),
    data: JSON.parse(copyField(c[7]!)!) as SourceEvent['data'],
  };
}
