import { ZipArchive } from 'archiver';
import { createHash } from 'node:crypto';
import { once } from 'node:events';
import { createReadStream, createWriteStream } from 'node:fs';
import { open, rm, type FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { PassThrough, Transform, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { createGzip } from 'node:zlib';
import type { ObjectStore } from '../../../platform/storage/object-store.js';
import type { LineBatch } from './line-batches.js';
import { partFileName, type ExportLayout, type OutputFormat, type PartKind } from '../key-layout.js';
import type { ParquetColumns } from './parquet-schema.js';
import { makeSpoolDir } from './spool.js';

export const PART_LINES = 5_000;
/** Parts compressing and uploading while the next one is being read. */
const PARTS_IN_FLIGHT = 2;
const READ_CHUNK = 256 * 1024;

export interface UploadedPart {
  kind: PartKind;
  shard: number;
  partIndex: number;
  key: string;
  users: number;
  bytes: number;
  sha256: string;
}

export interface PartWriterOptions {
  store: ObjectStore;
  /** Key prefix of the export's files (no trailing slash). */
  keyPrefix: string;
  format: OutputFormat;
  /** The typed columns of a Parquet part (format parquet only). */
  parquetColumns: ParquetColumns | null;
  level: number;
  /** Key for the deterministic part names. */
  nameSecret: string;
  /** The key layout: the spec's random-looking names, or hive's numbered `part-<NNNNN>`. */
  layout?: ExportLayout;
  exportId: string;
  shard: number;
  kind: PartKind;
  /** Called once a part is in the store (records it); awaited before the part counts as done. */
  onPart: (part: UploadedPart) => Promise<void>;
  /**
   * What becomes of the last lines (fewer than a part): `tail` hands them back uncompressed for the finishing job
   * to merge; `upload` makes them the export's last, short part.
   */
  rest: 'tail' | 'upload';
  /**
   * Cut parts by compressed size instead of by lines (part_target_mb, gzip and zip): a part ends at the first batch
   * after its compressed bytes reach this many. Parts are then compressed while they are read; the rest is uploaded.
   */
  partBytes?: number;
}

export interface PartWriterResult {
  parts: number;
  users: number;
  /** For `rest: 'tail'`: the remaining lines, gzip-compressed NDJSON, or null when none remain. */
  tail: { users: number; data: Buffer } | null;
}

/**
 * Finished parts uploading while the next is read: at most PARTS_IN_FLIGHT at once. Each upload is recorded
 * (`onPart`) and its spool file removed whatever happens; the first failure is kept and thrown to the reader.
 */
class UploadQueue {
  private readonly inFlight: Promise<void>[] = [];
  private failure: unknown;

  constructor(private readonly onPart: PartWriterOptions['onPart']) {}

  /** Queues an upload; waits while too many are in flight. */
  async add(upload: Promise<UploadedPart>, spoolFile: string): Promise<void> {
    this.inFlight.push(
      upload
        .then((part) => this.onPart(part))
        .finally(() => rm(spoolFile, { force: true }))
        .catch((err: unknown) => {
          this.failure ??= err;
        }),
    );
    if (this.inFlight.length >= PARTS_IN_FLIGHT) await this.inFlight.shift();
    this.throwIfFailed();
  }

  throwIfFailed(): void {
    if (this.failure) throw this.failure;
  }

  /** Waits for every upload; `settle` only waits (for the cleanup after another error). */
  async finish(settle = false): Promise<void> {
    await Promise.all(this.inFlight);
    if (!settle) this.throwIfFailed();
  }
}

/**
 * Spools each part's NDJSON to a temporary file (bounded memory whatever the profile size), then compresses and
 * uploads it while the next part is read. Parts hold exactly PART_LINES lines because the batches are cut there.
 */
export async function writeParts(
  batches: AsyncIterable<LineBatch>,
  opts: PartWriterOptions,
): Promise<PartWriterResult> {
  if (opts.partBytes) return writePartsBySize(batches, opts, opts.partBytes);
  const dir = await makeSpoolDir();
  const uploads = new UploadQueue(opts.onPart);
  let partIndex = 0;
  let users = 0;
  let file: FileHandle | undefined;
  let filePath = '';
  let lines = 0;

  const startPart = async () => {
    filePath = path.join(dir, `part-${partIndex}.ndjson`);
    file = await open(filePath, 'w');
    lines = 0;
  };
  const shipPart = async () => {
    await file!.close();
    file = undefined;
    users += lines;
    await uploads.add(uploadPart(opts, filePath, partIndex++, lines), filePath);
  };

  try {
    await startPart();
    for await (const batch of batches) {
      uploads.throwIfFailed();
      await file!.write(batch.data);
      lines += batch.lines;
      if (batch.endsPart) {
        await shipPart();
        await startPart();
      }
    }
    let tail: PartWriterResult['tail'] = null;
    if (lines > 0 && opts.rest === 'upload') {
      await shipPart();
    } else {
      await file!.close();
      file = undefined;
      if (lines > 0) {
        tail = { users: lines, data: await gzipFile(filePath) };
        users += lines;
      }
    }
    await uploads.finish();
    return { parts: partIndex, users, tail };
  } finally {
    await file?.close().catch(() => {});
    await uploads.finish(true);
    await rm(dir, { recursive: true, force: true });
  }
}

async function gzipFile(file: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  await pipeline(
    createReadStream(file, { highWaterMark: READ_CHUNK }),
    createGzip({ level: 1 }),
    async (source: AsyncIterable<Buffer>) => {
      for await (const c of source) chunks.push(c);
    },
  );
  return Buffer.concat(chunks);
}

const CONTENT_TYPES: Record<OutputFormat, string> = {
  zip: 'application/zip',
  gzip: 'application/gzip',
  parquet: 'application/vnd.apache.parquet',
};

/** The name of the one entry of a zip part (and the NDJSON name of a part in the download ZIP). */
const entryName = (partName: string) => partName.replace(/\.(zip|gz)$/, '.json');

/** Streams `encoded` to the store under `key`, hashing and counting what is stored. */
async function putMetered(
  store: ObjectStore,
  key: string,
  encoded: Readable,
  contentType: string,
): Promise<{ bytes: number; sha256: string }> {
  const hash = createHash('sha256');
  let bytes = 0;
  const meter = new Transform({
    transform(chunk: Buffer, _enc, cb) {
      hash.update(chunk);
      bytes += chunk.length;
      cb(null, chunk);
    },
  });
  const producing = pipeline(encoded, meter);
  try {
    await Promise.all([producing, store.put(key, meter, { contentType })]);
  } catch (err) {
    encoded.destroy();
    meter.destroy();
    await producing.catch(() => {});
    throw err;
  }
  return { bytes, sha256: hash.digest('hex') };
}

/** Turns one spooled part into the output format and streams it to the store, hashing what is stored. */
async function uploadPart(
  opts: PartWriterOptions,
  rawPath: string,
  partIndex: number,
  users: number,
): Promise<UploadedPart> {
  const name = partFileName(opts.nameSecret, opts.exportId, opts.shard, partIndex, opts.format, opts.kind, opts.layout);
  const key = `${opts.keyPrefix}/${name}`;
  // Parquet is written whole to a file beside the spooled part (its footer comes last), then streamed like the others.
  const format = opts.format;
  const parquetPath = `${rawPath}.parquet`;
  try {
    let encoded: Readable;
    if (format === 'parquet') {
      // Loaded on first use: only processes that write Parquet load DuckDB's native library.
      const { writeParquetFile } = await import('./parquet-writer.js');
      const { rows } = await writeParquetFile(rawPath, parquetPath, opts.parquetColumns ?? []);
      if (rows !== users)
        throw new Error(`the Parquet file of part ${partIndex} holds ${rows} rows where ${users} lines were read`);
      encoded = createReadStream(parquetPath, { highWaterMark: READ_CHUNK });
    } else {
      encoded = compress(createReadStream(rawPath, { highWaterMark: READ_CHUNK }), format, opts.level, entryName(name));
    }
    const stored = await putMetered(opts.store, key, encoded, CONTENT_TYPES[format]);
    return { kind: opts.kind, shard: opts.shard, partIndex, key, users, ...stored };
  } finally {
    if (format === 'parquet') await rm(parquetPath, { force: true });
  }
}

/** A part being compressed into its spool file as its lines are read (writePartsBySize). */
interface SizedPart {
  index: number;
  name: string;
  file: string;
  input: PassThrough;
  /** Settles when the compressed file is complete. */
  written: Promise<void>;
  compressedBytes: () => number;
  lines: number;
}

/**
 * part_target_mb: each part is compressed into a spool file while its lines are read, and ends at the first batch (at
 * most 256 KiB of NDJSON) after the compressed bytes reach `partBytes`; with what the compressor still holds, a part
 * lands a few hundred KiB above the target (2-3% at 16 MiB in test/exports/export-part-size.test.ts). Finished parts
 * upload while the next is read; the shard's last part is short.
 */
async function writePartsBySize(
  batches: AsyncIterable<LineBatch>,
  opts: PartWriterOptions,
  partBytes: number,
): Promise<PartWriterResult> {
  if (opts.format === 'parquet') throw new Error('parts cut by size are gzip or zip');
  const format = opts.format;
  const dir = await makeSpoolDir();
  const uploads = new UploadQueue(opts.onPart);
  let parts = 0;
  let users = 0;
  let current: SizedPart | undefined;

  const start = (): SizedPart => {
    const index = parts++;
    const name = partFileName(opts.nameSecret, opts.exportId, opts.shard, index, format, opts.kind, opts.layout);
    const file = path.join(dir, `part-${index}`);
    const input = new PassThrough({ highWaterMark: READ_CHUNK });
    let bytes = 0;
    const counter = new Transform({
      transform(chunk: Buffer, _enc, cb) {
        bytes += chunk.length;
        cb(null, chunk);
      },
    });
    const written = pipeline(compress(input, format, opts.level, entryName(name)), counter, createWriteStream(file));
    written.catch(() => {}); // awaited where it matters; a failure also surfaces as the input's error
    return { index, name, file, input, written, compressedBytes: () => bytes, lines: 0 };
  };
  const ship = async (part: SizedPart) => {
    part.input.end();
    await part.written;
    users += part.lines;
    const key = `${opts.keyPrefix}/${part.name}`;
    const stored = putMetered(
      opts.store,
      key,
      createReadStream(part.file, { highWaterMark: READ_CHUNK }),
      CONTENT_TYPES[format],
    );
    await uploads.add(
      stored.then((s) => ({ kind: opts.kind, shard: opts.shard, partIndex: part.index, key, users: part.lines, ...s })),
      part.file,
    );
  };

  try {
    for await (const batch of batches) {
      uploads.throwIfFailed();
      const part = (current ??= start());
      if (!part.input.write(batch.data)) await Promise.race([once(part.input, 'drain'), part.written]);
      part.lines += batch.lines;
      if (part.compressedBytes() >= partBytes) {
        current = undefined;
        await ship(part);
      }
    }
    if (current) {
      const last = current;
      current = undefined;
      await ship(last);
    }
    await uploads.finish();
    return { parts, users, tail: null };
  } finally {
    current?.input.destroy();
    await current?.written.catch(() => {});
    await uploads.finish(true);
    await rm(dir, { recursive: true, force: true });
  }
}

/** The compressed form of an NDJSON stream: a .gz, or a .zip of one entry (archiver). */
export function compress(source: Readable, format: 'zip' | 'gzip', level: number, entryName: string): Readable {
  if (format === 'gzip') {
    const gz = createGzip({ level, chunkSize: 64 * 1024 });
    source.on('error', (err) => gz.destroy(err));
    return source.pipe(gz);
  }
  const zip = new ZipArchive({ zlib: { level } });
  const out = new PassThrough();
  zip.on('error', (err: Error) => out.destroy(err));
  zip.on('warning', (err: Error) => out.destroy(err));
  source.on('error', (err) => out.destroy(err));
  zip.pipe(out);
  zip.append(source, { name: entryName });
  void zip.finalize().catch((err: Error) => out.destroy(err));
  return out;
}
