import avro from 'avsc';
import { createHash } from 'node:crypto';
import { promisify } from 'node:util';
import { deflateRaw } from 'node:zlib';
import type { EventType } from '../../../profiles/event-log-types.js';
import type { EventField } from './fields.js';
import { assertType, eventFields, fieldValue, jsonText, unixSeconds } from './records.js';
import { avroSchema, SCHEMA_VERSIONS } from './schemas.js';
import { forEachEvent, type EventSource, type SourceEvent } from './source.js';

/**
 * Avro object container files (Currents' format): avsc encodes each record with the type's schema (./schemas.ts);
 * the container around them (the header, with the schema as the .avsc holds it, then blocks of records, each followed
 * by the sync marker) is framed here, so that blocks are deflated on libuv's pool while the next one is encoded.
 * avsc's own BlockEncoder, a stream of one record a write that compresses one block at a time, was half as fast
 * (bench/events-formats.ts); avsc's decoder reads these files in the tests.
 *
 * Deterministic: the same events give the same bytes, so that a file rewritten in place (a retried flush, a backfill)
 * is the same object. The sync marker, random per file in most writers, is fixed per type and schema version (the md5
 * of both); a block is cut before the record that would take it past BLOCK_BYTES; deflate of the same bytes at the
 * same level gives the same bytes with the same zlib.
 *
 * Codec: deflate (every Avro reader has it: the specification requires null and deflate) at level 1, 4-5 times
 * smaller than Currents' null codec for about the cost of the ceiling's own gzip -1.
 */

const DEFLATE_LEVEL = 1;
const BLOCK_BYTES = 64 * 1024;
/** Blocks being deflated at once while the next is encoded: two keep both cores busy. */
const BLOCKS_IN_FLIGHT = 2;
const INT_MIN = -(2 ** 31);
const INT_MAX = 2 ** 31 - 1;
const MAGIC = Buffer.from('Obj\x01', 'latin1');

const HEADER = avro.Type.forSchema({
  type: 'record',
  name: 'org.apache.avro.file.Header',
  fields: [
    { name: 'magic', type: { type: 'fixed', name: 'Magic', size: 4 } },
    { name: 'meta', type: { type: 'map', values: 'bytes' } },
    { name: 'sync', type: { type: 'fixed', name: 'Sync', size: 16 } },
  ],
});
const LONG = avro.Type.forSchema('long');
const deflate = promisify(deflateRaw);

interface AvroWriter {
  type: avro.Type;
  /** avsc's class of the record: built positionally, faster to make and to encode than an object filled by name. */
  Record: new (...values: unknown[]) => object;
  fields: EventField[];
  header: Buffer;
  syncMarker: Buffer;
}

const writers = new Map<EventType, AvroWriter>();

function writerFor(type: EventType): AvroWriter {
  let w = writers.get(type);
  if (!w) {
    const schema = avroSchema(type);
    const syncMarker = createHash('md5').update(`ces event stream ${type} version ${SCHEMA_VERSIONS[type]}`).digest();
    const meta = { 'avro.schema': Buffer.from(JSON.stringify(schema)), 'avro.codec': Buffer.from('deflate') };
    const header = HEADER.toBuffer({ magic: MAGIC, meta, sync: syncMarker });
    const avroType = avro.Type.forSchema(schema as avro.Schema) as avro.types.RecordType;
    const Record = avroType.recordConstructor as unknown as AvroWriter['Record'];
    w = { type: avroType, Record, fields: eventFields(type), header, syncMarker };
    writers.set(type, w);
  }
  return w;
}

/**
 * Currents' `time` is a 32-bit int of seconds: a time it cannot hold (before 1901-12-13T20:45:52Z or after
 * 2038-01-19T03:14:07Z, which ingestion accepts: it takes the years 0000 to 9999) is written as the nearest bound.
 */
const clampInt = (n: number): number => Math.min(INT_MAX, Math.max(INT_MIN, n));

function avroRecord(type: EventType, w: AvroWriter, e: SourceEvent): object {
  assertType(type, e);
  const values = new Array<unknown>(w.fields.length);
  for (let i = 0; i < w.fields.length; i++) {
    const f = w.fields[i]!;
    const v = f.neverKnown ? null : fieldValue(type, f, e);
    if (v === null) values[i] = null;
    else if (f.kind === 'time') values[i] = clampInt(unixSeconds(v as Date));
    else if (f.kind === 'json') values[i] = jsonText(v);
    else values[i] = v;
  }
  return new w.Record(...values);
}

/**
 * Encodes records into blocks, deflates each on the pool, and keeps the finished blocks in order. `add` returns a
 * promise only when it must wait for a block to finish (an array of events then costs no microtask a record).
 */
class BlockWriter {
  private buf = Buffer.allocUnsafe(BLOCK_BYTES);
  private pos = 0;
  private count = 0;
  private readonly inFlight: Promise<Buffer[]>[] = [];
  private readonly out: Buffer[];

  constructor(private readonly w: AvroWriter) {
    this.out = [w.header];
  }

  add(record: object): Promise<void> | void {
    const end = this.w.type.encode(record, this.buf, this.pos);
    if (end >= 0) {
      this.pos = end;
      this.count++;
      return;
    }
    // It does not fit (avsc gives minus the bytes missing): the block ends before it, and it starts the next one,
    // alone if it is larger than a block.
    const size = this.buf.length - end - this.pos;
    const wait = this.count > 0 ? this.flush() : undefined;
    this.buf = Buffer.allocUnsafe(Math.max(BLOCK_BYTES, size));
    this.pos = this.w.type.encode(record, this.buf, 0);
    this.count = 1;
    return wait;
  }

  /** Sends the current block to deflate; waits for the oldest when too many are in flight. */
  private flush(): Promise<void> | undefined {
    const data = this.buf.subarray(0, this.pos);
    const count = this.count;
    this.buf = Buffer.allocUnsafe(BLOCK_BYTES);
    this.pos = 0;
    this.count = 0;
    const block = deflate(data, { level: DEFLATE_LEVEL }).then((z) => [
      LONG.toBuffer(count),
      LONG.toBuffer(z.length),
      z,
      this.w.syncMarker,
    ]);
    // Awaited in order below; a failure meanwhile must not count as unhandled.
    block.catch(() => undefined);
    this.inFlight.push(block);
    if (this.inFlight.length <= BLOCKS_IN_FLIGHT) return undefined;
    return this.inFlight.shift()!.then((b) => void this.out.push(...b));
  }

  async finish(): Promise<Buffer> {
    if (this.count > 0) await this.flush();
    for (const block of await Promise.all(this.inFlight.splice(0))) this.out.push(...block);
    return Buffer.concat(this.out);
  }
}

/** The events (all of `type`) as one Avro object container file (a header alone when there are none). */
export async function encodeAvro(type: EventType, events: EventSource): Promise<Buffer> {
  const w = writerFor(type);
  const blocks = new BlockWriter(w);
  await forEachEvent(events, (e) => blocks.add(avroRecord(type, w, e)));
  return blocks.finish();
}
