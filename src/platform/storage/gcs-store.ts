import { Storage, type StorageOptions } from '@google-cloud/storage';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { z } from 'zod';
import type { GcsDestination } from './destination.js';
import { ObjectNotFoundError, type ObjectStore, type PutOptions, type StoredObject } from './object-store.js';

/** Google Cloud Storage (and its emulator, through `endpoint`). */
export class GcsStore implements ObjectStore {
  readonly kind = 'gcs' as const;
  readonly bucket: string;
  private readonly storage: Storage;

  constructor(destination: z.infer<typeof GcsDestination>) {
    this.bucket = destination.bucket;
    const options: StorageOptions = { projectId: destination.projectId };
    if (destination.endpoint) options.apiEndpoint = destination.endpoint.replace(/\/$/, '');
    if (destination.credentials) options.credentials = destination.credentials;
    this.storage = new Storage(options);
  }

  async put(key: string, body: Readable | Buffer, options: PutOptions = {}): Promise<void> {
    const file = this.storage.bucket(this.bucket).file(key);
    if (Buffer.isBuffer(body)) {
      await file.save(body, { resumable: false, contentType: options.contentType });
      return;
    }
    // One streamed request per object: parts are a few MB, and chunked resumable uploads buy nothing at that size.
    await pipeline(body, file.createWriteStream({ resumable: false, contentType: options.contentType }));
  }

  async get(key: string): Promise<Readable> {
    const file = this.storage.bucket(this.bucket).file(key);
    if ((await this.head(key)) === null) throw new ObjectNotFoundError(key);
    return file.createReadStream();
  }

  async head(key: string): Promise<number | null> {
    try {
      const [meta] = await this.storage.bucket(this.bucket).file(key).getMetadata();
      return Number(meta.size ?? 0);
    } catch (err) {
      if ((err as { code?: number }).code === 404) return null;
      throw err;
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    const [files] = await this.storage.bucket(this.bucket).getFiles({ prefix, autoPaginate: true });
    return files
      .map((f) => ({
        key: f.name,
        size: Number(f.metadata.size ?? 0),
        etag: String(f.metadata.etag ?? f.metadata.md5Hash ?? f.metadata.generation ?? ''),
      }))
      .sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: string[]): Promise<void> {
    const bucket = this.storage.bucket(this.bucket);
    for (let i = 0; i < keys.length; i += 20) {
      await Promise.all(keys.slice(i, i + 20).map((k) => bucket.file(k).delete({ ignoreNotFound: true })));
    }
  }
}
