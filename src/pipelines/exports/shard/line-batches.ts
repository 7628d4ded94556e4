import { Transform, type TransformCallback } from 'node:stream';
import { COPY_BINARY_HEADER, COPY_BINARY_SIGNATURE } from '../../../platform/db/copy-binary.js';

/** A run of whole NDJSON lines (each ending in '\n'). `endsPart` is set when the run closes a part. */
export interface LineBatch {
  data: Buffer;
  lines: number;
  endsPart: boolean;
}

const BATCH_BYTES = 256 * 1024;
const NEWLINE = 0x0a;

/**
 * Collects lines into large batches (writing one line at a time to a compressor is three times slower), and cuts a
 * batch exactly where a part of `partLines` lines ends, so the consumer never has to split a batch.
 */
abstract class LineBatcher extends Transform {
  private out = Buffer.allocUnsafe(BATCH_BYTES);
  private used = 0;
  private batchLines = 0;
  private total = 0;

  constructor(private readonly partLines: number) {
    super({ readableObjectMode: true, readableHighWaterMark: 4 });
  }

  /** Appends source[start, end) and a newline as one line. */
  protected line(source: Buffer, start: number, end: number): void {
    const len = end - start + 1;
    if (this.used + len > this.out.length) {
      this.flush(false);
      if (len > this.out.length) this.out = Buffer.allocUnsafe(len);
    }
    source.copy(this.out, this.used, start, end);
    this.out[this.used + len - 1] = NEWLINE;
    this.used += len;
    this.batchLines++;
    this.total++;
    if (this.total % this.partLines === 0) this.flush(true);
  }

  private flush(endsPart: boolean): void {
    if (this.batchLines === 0) return;
    // The batch keeps the buffer; the next lines go to a fresh one (no copy of the batch).
    const batch: LineBatch = { data: this.out.subarray(0, this.used), lines: this.batchLines, endsPart };
    this.out = Buffer.allocUnsafe(BATCH_BYTES);
    this.used = 0;
    this.batchLines = 0;
    this.push(batch);
  }

  protected finish(): void {
    this.flush(false);
  }
}

/**
 * Parses `COPY (SELECT <one text column>) TO STDOUT (FORMAT binary)`: a 19-byte header, then per tuple an int16
 * field count, an int32 length and the bytes, then an int16 -1 trailer. Binary, because text COPY would escape
 * the backslashes inside the JSON.
 */
export class CopyBinaryLines extends LineBatcher {
  private pending: Buffer[] = [];
  private pendingBytes = 0;
  /** Bytes needed before parsing can make progress. */
  private need = COPY_BINARY_HEADER.length;
  private headerDone = false;
  private ended = false;

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    this.pending.push(chunk);
    this.pendingBytes += chunk.length;
    if (this.pendingBytes < this.need) return cb();
    const buf = this.pending.length === 1 ? this.pending[0]! : Buffer.concat(this.pending, this.pendingBytes);
    let pos = 0;
    try {
      if (!this.headerDone) {
        if (!buf.subarray(0, COPY_BINARY_SIGNATURE.length).equals(COPY_BINARY_SIGNATURE))
          throw new Error('not a binary COPY stream');
        pos = COPY_BINARY_HEADER.length + buf.readUInt32BE(15);
        this.headerDone = true;
      }
      this.need = 2;
      while (!this.ended) {
        if (buf.length - pos < 2) {
          this.need = 2;
          break;
        }
        const fields = buf.readInt16BE(pos);
        if (fields === -1) {
          this.ended = true;
          pos += 2;
          break;
        }
        if (fields !== 1) throw new Error(`export query must yield one column, got ${fields}`);
        if (buf.length - pos < 6) {
          this.need = 6;
          break;
        }
        const len = buf.readInt32BE(pos + 2);
        if (len < 0) throw new Error('export query yielded a NULL line');
        if (buf.length - pos < 6 + len) {
          this.need = 6 + len;
          break;
        }
        this.line(buf, pos + 6, pos + 6 + len);
        pos += 6 + len;
      }
    } catch (err) {
      return cb(err as Error);
    }
    const rest = buf.subarray(pos);
    // Copy a small remainder so the 64 KB chunk it came from can be freed.
    this.pending = rest.length === 0 ? [] : [rest.length < 8192 ? Buffer.from(rest) : rest];
    this.pendingBytes = rest.length;
    cb();
  }

  override _flush(cb: TransformCallback): void {
    if (!this.ended) return cb(new Error('binary COPY stream ended without its trailer'));
    this.finish();
    cb();
  }
}

/** Splits an NDJSON byte stream into line batches (for re-cutting shard tails into parts). */
export class NdjsonLines extends LineBatcher {
  private carry: Buffer = Buffer.alloc(0);

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    const buf = this.carry.length ? Buffer.concat([this.carry, chunk]) : chunk;
    let start = 0;
    for (let nl = buf.indexOf(NEWLINE, start); nl !== -1; nl = buf.indexOf(NEWLINE, start)) {
      if (nl > start) this.line(buf, start, nl);
      start = nl + 1;
    }
    this.carry = Buffer.from(buf.subarray(start));
    cb();
  }

  override _flush(cb: TransformCallback): void {
    if (this.carry.length > 0) this.line(this.carry, 0, this.carry.length);
    this.finish();
    cb();
  }
}
