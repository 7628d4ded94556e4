import { ZipArchive } from 'archiver';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { PassThrough, pipeline, Transform, type Readable, type TransformCallback } from 'node:stream';
import { createGunzip, createInflateRaw } from 'node:zlib';
import type { Config } from '../../../platform/config.js';
import type { Pool } from '../../../platform/db/pool.js';
import { AppError, notFound } from '../../../platform/errors.js';
import type { LocalNamespace } from '../../../platform/storage/local-store.js';
import type { ObjectStore } from '../../../platform/storage/object-store.js';
import { storeFor } from '../../../platform/storage/stores.js';
import { MANIFEST_FILE } from '../key-layout.js';
import { exportByObjectPrefix } from '../export-rows.js';

const OBJECT_PREFIX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d{1,12}$/;

function sign(secret: string, objectPrefix: string): string {
  return createHmac('sha256', secret).update(`segment-export-download\0${objectPrefix}`).digest('hex');
}

/**
 * The download address of an export to the built-in store. It is signed, not stored: any API process with the same
 * DOWNLOAD_URL_SECRET serves it. Its lifetime runs from the moment the export is ready (kept in
 * exports.url_expires_at).
 */
export function downloadUrl(
  config: Pick<Config, 'DOWNLOAD_URL_SECRET'>,
  baseUrl: string,
  objectPrefix: string,
): string {
  return `${baseUrl}/downloads/segment-export/${objectPrefix}.zip?signature=${sign(config.DOWNLOAD_URL_SECRET, objectPrefix)}`;
}

/** Throws the refusal a bad or foreign link gets: the same 404 as an unknown export, so links cannot be probed. */
export function verifyDownloadSignature(
  config: Pick<Config, 'DOWNLOAD_URL_SECRET'>,
  objectPrefix: string,
  signature: string | undefined,
): void {
  const invalid = () => notFound('No such export download: the link is unknown or its signature is invalid');
  if (!OBJECT_PREFIX.test(objectPrefix) || !signature || !/^[0-9a-f]{64}$/.test(signature)) throw invalid();
  const expected = Buffer.from(sign(config.DOWNLOAD_URL_SECRET, objectPrefix), 'hex');
  if (!timingSafeEqual(expected, Buffer.from(signature, 'hex'))) throw invalid();
}

export interface DownloadableExport {
  objectPrefix: string;
  keyPrefix: string;
  /** Part keys in order. */
  parts: string[];
  /** The workspace whose part of the local store holds the files. */
  namespace: LocalNamespace;
  /** Recorded before the local store had namespaces: keys are relative to its shared root. */
  sharedRoot: boolean;
}

/** The export behind a verified link, once it is ready and until its link expires (404 before, 410 after). */
export async function readyDownload(pool: Pool, objectPrefix: string, now = new Date()): Promise<DownloadableExport> {
  const exp = await exportByObjectPrefix(pool, objectPrefix);
  if (!exp || exp.destination !== 'local')
    throw notFound('No such export download: the link is unknown or its signature is invalid');
  if (exp.status === 'failed')
    throw notFound('This export failed, so there is nothing to download; request a new export');
  if (exp.status !== 'ready' || !exp.key_prefix) {
    throw notFound(`This export is not ready yet (status: ${exp.status}); the link works once it is ready`);
  }
  if (exp.url_expires_at && exp.url_expires_at.getTime() <= now.getTime()) {
    throw new AppError(
      'gone',
      `This download link expired at ${exp.url_expires_at.toISOString()}; request a new export`,
    );
  }
  const parts = await pool.query<{ object_key: string }>(
    `SELECT object_key FROM export_parts WHERE export_id = $1 ORDER BY shard, part_index`,
    [exp.id],
  );
  return {
    objectPrefix,
    keyPrefix: exp.key_prefix,
    parts: parts.rows.map((r) => r.object_key),
    namespace: { companyId: exp.company_id, workspaceId: exp.workspace_id },
    sharedRoot: exp.local_shared_root,
  };
}

/**
 * Removes the local file header of a single-entry zip as archiver writes it (signature, 30 fixed bytes, name, extra)
 * and passes the deflated entry data on; the inflater stops at the end of the deflate stream, so the data
 * descriptor and central directory after it are ignored.
 */
class ZipEntryData extends Transform {
  private head: Buffer | null = Buffer.alloc(0);

  override _transform(chunk: Buffer, _enc: BufferEncoding, cb: TransformCallback): void {
    if (this.head === null) return cb(null, chunk);
    const buf = Buffer.concat([this.head, chunk]);
    if (buf.length < 30) {
      this.head = buf;
      return cb();
    }
    if (buf.readUInt32LE(0) !== 0x04034b50) return cb(new Error('part is not a zip file'));
    if (buf.readUInt16LE(8) !== 8) return cb(new Error('zip part entry is not deflated'));
    const start = 30 + buf.readUInt16LE(26) + buf.readUInt16LE(28);
    if (buf.length < start) {
      this.head = buf;
      return cb();
    }
    this.head = null;
    cb(null, buf.subarray(start));
  }
}

/** The NDJSON inside one stored part, as a stream. */
function partNdjson(body: Readable, key: string): Readable {
  const inflate = key.endsWith('.gz') ? createGunzip() : createInflateRaw();
  const stages = key.endsWith('.gz') ? [body, inflate] : [body, new ZipEntryData(), inflate];
  // Errors anywhere destroy the chain; the consumer sees them on the returned stream.
  pipeline(stages as [Readable, ...Transform[]], () => {});
  return inflate;
}

/** The ZIP of a ready export (below), read from the workspace's part of the built-in store. */
export function exportDownload(config: Pick<Config, 'LOCAL_STORE_DIR'>, exp: DownloadableExport): Readable {
  return downloadZip(storeFor(config, null, exp.namespace, { sharedRoot: exp.sharedRoot }).store, exp);
}

/**
 * One ZIP of all the export's user files, streamed: each part's NDJSON as `<object_prefix>/<part name>.json`
 * (decompressed from the stored part and deflated again at level 1), or each Parquet part as it is stored
 * (`<part name>.parquet`, uncompressed entry), then the manifest. One part is read at a time.
 */
function downloadZip(store: ObjectStore, exp: DownloadableExport): Readable {
  const zip = new ZipArchive({ zlib: { level: 1 } });
  const out = new PassThrough();
  zip.on('error', (err: Error) => out.destroy(err));
  zip.pipe(out);
  let current: Readable | undefined;
  let aborted = false;
  // A client that goes away stops the reading too, rather than leaving it stalled on backpressure.
  out.once('close', () => {
    if (out.writableFinished) return;
    aborted = true;
    current?.destroy();
    zip.abort();
  });
  void (async () => {
    for (const key of exp.parts) {
      if (aborted) return;
      const stored = key.slice(key.lastIndexOf('/') + 1);
      // Parquet parts go in as they are (already compressed inside); NDJSON parts are unwrapped and deflated again.
      const parquet = stored.endsWith('.parquet');
      const lines = parquet ? await store.get(key) : partNdjson(await store.get(key), key);
      current = lines;
      const file = parquet ? stored : stored.replace(/\.(zip|gz)$/, '.json');
      zip.append(lines, { name: `${exp.objectPrefix}/${file}`, store: parquet });
      // archiver queues entries; waiting for each keeps only one object stream open.
      await new Promise<void>((resolve, reject) => {
        lines.once('end', resolve);
        lines.once('close', resolve);
        lines.once('error', reject);
      });
    }
    if (aborted) return;
    // The spec's "ZIP of all user files": a client reads every entry as users, so of the bucket's control files only
    // the manifest (there since the first release) goes in; schema.json and _SUCCESS stay in the bucket layout.
    zip.append(await store.get(`${exp.keyPrefix}/${MANIFEST_FILE}`), { name: `${exp.objectPrefix}/${MANIFEST_FILE}` });
    await zip.finalize();
  })().catch((err: unknown) => out.destroy(err as Error));
  return out;
}
