import { ZipArchive } from 'archiver';
import { createHmac, timingSafeEqual } from 'node:crypto';
import { PassThrough, type Readable } from 'node:stream';
import type { Config } from '../config.js';
import type { Pool } from '../db/pool.js';
import { AppError, notFound } from '../errors.js';
import type { ObjectStore } from '../storage/object-store.js';
import { MANIFEST_FILE } from './names.js';

const OBJECT_PREFIX = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}-\d{1,12}$/;

function sign(secret: string, objectPrefix: string): string {
  return createHmac('sha256', secret).update(`segment-export-download\0${objectPrefix}`).digest('hex');
}

/**
 * The download address of an export to the built-in store. It is signed, not stored: any API process with the same
 * DOWNLOAD_URL_SECRET serves it. Its lifetime runs from the moment the export is ready (kept in exports.url_expires_at).
 */
export function downloadUrl(config: Pick<Config, 'DOWNLOAD_URL_SECRET'>, baseUrl: string, objectPrefix: string): string {
  return `${baseUrl}/downloads/segment-export/${objectPrefix}.zip?signature=${sign(config.DOWNLOAD_URL_SECRET, objectPrefix)}`;
}

/** Throws the refusal a bad or foreign link gets: the same 404 as an unknown export, so links cannot be probed. */
export function verifyDownloadSignature(config: Pick<Config, 'DOWNLOAD_URL_SECRET'>, objectPrefix: string, signature: string | undefined): void {
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
}

/** The export behind a verified link, once it is ready and until its link expires (404 before, 410 after). */
export async function readyDownload(pool: Pool, objectPrefix: string, now = new Date()): Promise<DownloadableExport> {
  const { rows } = await pool.query<{ id: string; status: string; key_prefix: string | null; destination: string; url_expires_at: Date | null }>(
    `SELECT id, status, key_prefix, destination, url_expires_at FROM exports WHERE object_prefix = $1`,
    [objectPrefix],
  );
  const exp = rows[0];
  if (!exp || exp.destination !== 'local') throw notFound('No such export download: the link is unknown or its signature is invalid');
  if (exp.status === 'failed') throw notFound('This export failed, so there is nothing to download; request a new export');
  if (exp.status !== 'ready' || !exp.key_prefix) {
    throw notFound(`This export is not ready yet (status: ${exp.status}); the link works once it is ready`);
  }
  if (exp.url_expires_at && exp.url_expires_at.getTime() <= now.getTime()) {
    throw new AppError('gone', `This download link expired at ${exp.url_expires_at.toISOString()}; request a new export`);
  }
  const parts = await pool.query<{ object_key: string }>(`SELECT object_key FROM export_parts WHERE export_id = $1 ORDER BY shard, part_index`, [exp.id]);
  return { objectPrefix, keyPrefix: exp.key_prefix, parts: parts.rows.map((r) => r.object_key) };
}

/**
 * One ZIP of all the export's files, streamed: each part file as stored (already compressed, so stored without
 * recompression) and the manifest. Reads one object at a time.
 */
export function downloadZip(store: ObjectStore, exp: DownloadableExport): Readable {
  const zip = new ZipArchive({ zlib: { level: 1 } });
  const out = new PassThrough();
  zip.on('error', (err: Error) => out.destroy(err));
  zip.pipe(out);
  void (async () => {
    for (const key of exp.parts) {
      const body = await store.get(key);
      zip.append(body, { name: `${exp.objectPrefix}/${key.slice(key.lastIndexOf('/') + 1)}`, store: true });
      // archiver queues entries; waiting for each keeps only one object stream open.
      await new Promise<void>((resolve, reject) => {
        body.once('end', resolve);
        body.once('error', reject);
      });
    }
    zip.append(await store.get(`${exp.keyPrefix}/${MANIFEST_FILE}`), { name: `${exp.objectPrefix}/${MANIFEST_FILE}` });
    await zip.finalize();
  })().catch((err: unknown) => out.destroy(err as Error));
  return out;
}
