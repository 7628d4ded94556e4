import type { Readable } from 'node:stream';

/** One stored object as listed. */
export interface StoredObject {
  key: string;
  size: number;
  /**
   * What changes when the object's content is replaced: the store's ETag (S3, GCS), or the size and modification time
   * of the file (the local store). Cloud Data Ingestion takes a file once per key and etag.
   */
  etag: string;
}

export interface PutOptions {
  contentType?: string;
  /** Known length, when the body is a stream and the store needs it. */
  contentLength?: number;
}

/**
 * The one interface over the built-in local store, S3 (and S3-compatible stores) and GCS. Keys are full object
 * keys inside the store's bucket. Writes stream with backpressure; a failed write leaves no object behind.
 */
export interface ObjectStore {
  readonly kind: 'local' | 's3' | 'gcs';
  readonly bucket: string;
  /** Uploads a body (stream or bytes) to key, replacing any object there. */
  put(key: string, body: Readable | Buffer, options?: PutOptions): Promise<void>;
  /** Reads an object as a stream; rejects with ObjectNotFoundError when missing. */
  get(key: string): Promise<Readable>;
  /** Byte size of an object, or null when it does not exist. */
  head(key: string): Promise<number | null>;
  list(prefix: string): Promise<StoredObject[]>;
  delete(keys: string[]): Promise<void>;
}

export class ObjectNotFoundError extends Error {
  constructor(readonly key: string) {
    super(`object not found: ${key}`);
    this.name = 'ObjectNotFoundError';
  }
}
