import type { EventType } from '../../../profiles/event-log-types.js';
import { encodeAvro } from './avro.js';
import { encodeNdjson } from './ndjson.js';
import { encodeParquet } from './parquet.js';
import type { EventFormat } from './schemas.js';
import type { EventSource } from './source.js';

/**
 * The bytes of one event-stream file: the events of one type (at most max_events_per_file of them) in one format
 * (docs/events-schemas.md). The same events in the same order give the same bytes in every format, so that a file
 * rewritten in place (a retried flush, a backfill) is the same object; Parquet's bytes also depend on the DuckDB
 * version (./parquet.ts).
 *
 * The events may come as an array or as an async iterable (rows read from a cursor as they come): only the encoded
 * file is held, plus, for Parquet, the rows in DuckDB until it writes the file. An event of another type, or one whose
 * Currents-required field has no value, rejects (naming the event's id and the field).
 */
export function encodeEvents(format: EventFormat, type: EventType, events: EventSource): Promise<Buffer> {
  switch (format) {
    case 'avro':
      return encodeAvro(type, events);
    case 'parquet':
      return encodeParquet(type, events);
    case 'ndjson':
      return encodeNdjson(type, events);
  }
}

/** The file name extension of each format (without the dot): the NDJSON files are gzip. */
export const FORMAT_EXTENSIONS: { readonly [F in EventFormat]: string } = {
  avro: 'avro',
  parquet: 'parquet',
  ndjson: 'ndjson.gz',
};
