// What the event-stream fault and bucket tests share: events logged in many transactions, the files of an export read
// back by third-party readers (zlib and JSON.parse, avsc, hyparquet), and the exactly-once check: every logged event of
// the export's types in exactly one file, nothing else in any file, every file recorded and written.
import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import avro from 'avsc';
import { parquetReadObjects } from 'hyparquet';
import { compressors } from 'hyparquet-compressors';
import { expect } from 'vitest';
import type { Pool } from '../../src/platform/db/pool.js';
import type { EventType } from '../../src/profiles/event-log-types.js';

export type Format = 'avro' | 'parquet' | 'ndjson';

const EXTENSIONS: Record<Format, string> = { avro: '.avro', parquet: '.parquet', ndjson: '.ndjson.gz' };

/** Whether a key names an event file of the format (not `_SUCCESS`, not a schema, not a `.partial` of the local store). */
export const isEventFile = (format: Format, key: string) => key.endsWith(EXTENSIONS[format]);

export interface LogOptions {
  /** Transactions to log in, one after another (each gets its own transaction id). */
  transactions: number;
  perTransaction: number;
  /** The types, in turn. */
  types: EventType[];
  /**
   * When the events entered the log, in hours before the current hour (0: now). Rows of an earlier hour are rows a
   * transaction that began then wrote, as a backlog drained late would be: log them before any pass runs.
   */
  hoursAgo?: number[];
}

/**
 * Logs events straight into the event log (the producers' rows: src/profiles/event-log.ts), one multi-row INSERT per
 * transaction. Returns how many.
 */
export async function logEvents(pool: Pool, workspaceId: string, o: LogOptions): Promise<number> {
  const hours = o.hoursAgo ?? [0];
  for (let t = 0; t < o.transactions; t++) {
    const hoursAgo = hours[t % hours.length]!;
    await pool.query(
      `INSERT INTO event_log (workspace_id, accepted_at, id, type, time, user_id, external_user_id, name, properties, data)
       SELECT $1,
              CASE WHEN $2::int = 0 THEN now()
                   ELSE date_trunc('hour', now()) - make_interval(hours => $2::int) + (g % 3600) * interval '1 second' END,
              gen_random_uuid(), ($4::text[])[1 + g % cardinality($4::text[])], now() - interval '1 day',
              'svc-' || g, 'user-' || g,
              CASE WHEN ($4::text[])[1 + g % cardinality($4::text[])] = 'users.behaviors.Purchase' THEN 'sku-1' ELSE 'opened' END,
              jsonb_build_object('n', g),
              CASE WHEN ($4::text[])[1 + g % cardinality($4::text[])] = 'users.behaviors.Purchase'
                   THEN '{"price": 1.5, "currency": "USD", "quantity": 1}'::jsonb ELSE '{}'::jsonb END
         FROM generate_series(1, $3::int) g`,
      [workspaceId, hoursAgo, o.perTransaction, o.types],
    );
  }
  return o.transactions * o.perTransaction;
}

/**
 * Logs events now, a transaction every `everyMs`, until stopped; a transaction that fails (a server away) is tried
 * again later. Whether one that failed at its commit was logged does not matter: the check reads the log at the end.
 */
export function keepLogging(pool: Pool, workspaceId: string, types: EventType[], everyMs = 50) {
  let stopped = false;
  let failures = 0;
  let batches = 0;
  const loop = (async () => {
    while (!stopped) {
      try {
        await logEvents(pool, workspaceId, { transactions: 1, perTransaction: 7, types });
        batches++;
      } catch {
        failures++;
      }
      await new Promise((r) => setTimeout(r, everyMs));
    }
  })();
  return {
    async stop() {
      stopped = true;
      await loop;
      return { batches, failures };
    },
  };
}

/** The records of one delivered file, read by a reader that shares no code with the writer. */
export async function readEventFile(format: Format, bytes: Buffer): Promise<Record<string, unknown>[]> {
  if (format === 'ndjson')
    return gunzipSync(bytes)
      .toString('utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as Record<string, unknown>);
  if (format === 'parquet') {
    const file = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.length) as ArrayBuffer;
    return (await parquetReadObjects({ file, compressors })) as Record<string, unknown>[];
  }
  const records: Record<string, unknown>[] = [];
  const decoder = new avro.streams.BlockDecoder();
  const done = new Promise<void>((resolve, reject) => {
    decoder.on('data', (r: Record<string, unknown>) => records.push(r));
    decoder.on('end', resolve);
    decoder.on('error', reject);
  });
  decoder.end(bytes);
  await done;
  return records;
}

/** Every event file under a directory of the local store (a workspace's), by key relative to it, read. */
export async function localFiles(dir: string, format: Format): Promise<Map<string, Record<string, unknown>[]>> {
  const all = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  const files = new Map<string, Record<string, unknown>[]>();
  for (const d of all) {
    if (!d.isFile() || !isEventFile(format, d.name)) continue;
    const full = path.join(d.parentPath, d.name);
    files.set(path.relative(dir, full), await readEventFile(format, await readFile(full)));
  }
  return files;
}

/** Files recorded for an export: written or not yet. */
export async function fileProgress(pool: Pool, exportId: string): Promise<{ written: number; unwritten: number }> {
  const { rows } = await pool.query<{ written: number; unwritten: number }>(
    `SELECT count(*) FILTER (WHERE written_at IS NOT NULL)::int AS written,
            count(*) FILTER (WHERE written_at IS NULL)::int AS unwritten
       FROM event_export_files WHERE export_id = $1`,
    [exportId],
  );
  return rows[0]!;
}

/**
 * True once the export has planned every row the log holds for it and written every file it planned (nothing may be
 * logging meanwhile).
 */
export async function allDelivered(pool: Pool, exportId: string): Promise<boolean> {
  const { rows } = await pool.query<{ done: boolean }>(
    `SELECT NOT EXISTS (SELECT 1 FROM event_export_files f WHERE f.export_id = e.id AND f.written_at IS NULL)
        AND NOT EXISTS (SELECT 1 FROM event_log l
                         WHERE l.workspace_id = e.workspace_id AND l.xid >= e.planned_xid
                           AND (e.event_types IS NULL OR l.type = ANY(e.event_types))) AS done
       FROM event_exports e WHERE e.id = $1`,
    [exportId],
  );
  return rows[0]?.done === true;
}

/**
 * Exactly once: the ids in the files are the log's ids of the export's workspace and types, each in one file only, in
 * a file of its own type; every file in the bucket is one the export recorded as written, and every such file is there.
 * `keyOf` turns a recorded key into the key the files are listed by (a prefix the listing leaves out, say).
 */
export async function expectExactlyOnce(
  pool: Pool,
  exportId: string,
  files: Map<string, Record<string, unknown>[]>,
  keyOf: (recorded: string) => string = (k) => k,
): Promise<{ events: number; files: number }> {
  const { rows: logged } = await pool.query<{ id: string; type: string }>(
    `SELECT l.id, l.type FROM event_log l JOIN event_exports e ON e.workspace_id = l.workspace_id
      WHERE e.id = $1 AND (e.event_types IS NULL OR l.type = ANY(e.event_types))`,
    [exportId],
  );
  const typeOf = new Map(logged.map((r) => [r.id, r.type]));
  const seen = new Map<string, string[]>();
  const wrongFolder: string[] = [];
  for (const [key, records] of files)
    for (const r of records) {
      const id = String(r.id);
      seen.set(id, [...(seen.get(id) ?? []), key]);
      const type = typeOf.get(id);
      if (type && !key.includes(`event_type=${type}/`)) wrongFolder.push(`${id} (${type}) in ${key}`);
    }
  const twice = [...seen].filter(([, keys]) => keys.length > 1).map(([id, keys]) => `${id}: ${keys.join(', ')}`);
  const missing = logged.filter((r) => !seen.has(r.id)).map((r) => r.id);
  const unknown = [...seen.keys()].filter((id) => !typeOf.has(id));
  expect(twice.slice(0, 5), `${twice.length} events in more than one file`).toEqual([]);
  expect(missing.slice(0, 5), `${missing.length} logged events in no file`).toEqual([]);
  expect(unknown.slice(0, 5), `${unknown.length} delivered events the log does not hold`).toEqual([]);
  expect(wrongFolder.slice(0, 5)).toEqual([]);
  const { rows: recorded } = await pool.query<{ key: string; written: boolean }>(
    `SELECT key, written_at IS NOT NULL AS written FROM event_export_files WHERE export_id = $1`,
    [exportId],
  );
  expect(recorded.filter((f) => !f.written).map((f) => f.key)).toEqual([]);
  expect([...files.keys()].sort()).toEqual(recorded.map((f) => keyOf(f.key)).sort());
  return { events: logged.length, files: files.size };
}
