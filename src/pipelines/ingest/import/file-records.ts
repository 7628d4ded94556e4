import type { Readable } from 'node:stream';
import streamArray from 'stream-json/streamers/stream-array.js';

/** Reading an import's file: records of NDJSON lines or of one JSON array, and the lines of its rejects file. */

/** A record of the file: its 1-based line (NDJSON) or element position (JSON array), and its parsed value or why not. */
export interface FileRecord {
  line: number;
  value?: unknown;
  /** Raw text of a line that is not JSON. */
  raw?: string;
  reason?: string;
}

const MAX_LINE_BYTES = 1024 * 1024;

/** The reason written in the rejects file for a record PostgreSQL refused at apply time. */
export const refusedReason = (message: string) => `the database refused it: ${message}`;

/**
 * A line of the rejects file. A record nested too deep for JSON.stringify (a few thousand levels; refused for its
 * nesting, or for not being an event object) is written with `object: null` rather than failing the import.
 */
export function rejectLine(line: number, reason: string, object: unknown): string {
  try {
    return `${JSON.stringify({ line, reason, object })}\n`;
  } catch {
    return `${JSON.stringify({ line, reason, object: null })}\n`;
  }
}

/** NDJSON lines, split on bytes so that multi-byte characters never straddle a chunk; blank lines are skipped. */
export async function* ndjsonRecords(source: Readable): AsyncGenerator<FileRecord> {
  let carry: Buffer = Buffer.alloc(0);
  let line = 0;
  let skipping = false;
  const parse = (buf: Buffer, from: number, to: number): FileRecord | null => {
    line++;
    if (skipping) {
      skipping = false;
      return { line, reason: `line longer than ${MAX_LINE_BYTES} bytes`, raw: '' };
    }
    const text = buf.toString('utf8', from, to).trim();
    if (text === '') return null;
    try {
      return { line, value: JSON.parse(text) };
    } catch (err) {
      return {
        line,
        reason: `malformed JSON: ${(err as Error).message}`,
        raw: text.length > 1000 ? `${text.slice(0, 1000)}...` : text,
      };
    }
  };
  for await (const chunk of source as AsyncIterable<Buffer>) {
    const buf = carry.length ? Buffer.concat([carry, chunk]) : chunk;
    let start = 0;
    let nl: number;
    while ((nl = buf.indexOf(10, start)) !== -1) {
      const rec = parse(buf, start, nl);
      if (rec) yield rec;
      start = nl + 1;
    }
    carry = buf.subarray(start);
    if (carry.length > MAX_LINE_BYTES) {
      // Drop the rest of an overlong line rather than hold it: the record is refused when its end arrives.
      skipping = true;
      carry = Buffer.alloc(0);
    }
  }
  if (carry.length > 0 || skipping) {
    const rec = parse(carry, 0, carry.length);
    if (rec) yield rec;
  }
}

/** Elements of one top-level JSON array, streamed with stream-json (never the whole document in memory). */
export async function* jsonArrayRecords(source: Readable): AsyncGenerator<FileRecord> {
  const items = streamArray.withParserAsStream();
  source.on('error', (err) => items.destroy(err));
  source.pipe(items);
  for await (const item of items as AsyncIterable<{ key: number; value: unknown }>) {
    yield { line: item.key + 1, value: item.value };
  }
}
