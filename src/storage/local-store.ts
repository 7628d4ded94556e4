import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import { ObjectNotFoundError, type ObjectStore, type StoredObject } from './object-store.js';

/**
 * The built-in local bucket: objects are files under `root/<bucket>/<key>`. Writes go to a temporary file that
 * is renamed into place, so a reader never sees half an object and a crash leaves none.
 */
export class LocalStore implements ObjectStore {
  readonly kind = 'local' as const;

  constructor(
    private readonly root: string,
    readonly bucket = 'local',
  ) {}

  pathOf(key: string): string {
    const base = path.resolve(this.root, this.bucket);
    const full = path.resolve(base, key);
    if (!full.startsWith(base + path.sep)) throw new Error(`object key escapes the bucket: ${key}`);
    return full;
  }

  async put(key: string, body: Readable | Buffer): Promise<void> {
    const target = this.pathOf(key);
    await mkdir(path.dirname(target), { recursive: true });
    const tmp = `${target}.${randomBytes(6).toString('hex')}.partial`;
    try {
      await pipeline(Buffer.isBuffer(body) ? Readable.from([body]) : body, createWriteStream(tmp));
      await rename(tmp, target);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  async get(key: string): Promise<Readable> {
    const file = this.pathOf(key);
    if ((await this.head(key)) === null) throw new ObjectNotFoundError(key);
    return createReadStream(file);
  }

  async head(key: string): Promise<number | null> {
    try {
      const s = await stat(this.pathOf(key));
      return s.isFile() ? s.size : null;
    } catch {
      return null;
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    const base = path.resolve(this.root, this.bucket);
    const out: StoredObject[] = [];
    const walk = async (dir: string): Promise<void> => {
      let entries;
      try {
        entries = await readdir(dir, { withFileTypes: true });
      } catch {
        return;
      }
      for (const e of entries) {
        const full = path.join(dir, e.name);
        if (e.isDirectory()) await walk(full);
        else if (e.isFile() && !e.name.endsWith('.partial')) {
          const key = path.relative(base, full).split(path.sep).join('/');
          if (key.startsWith(prefix)) out.push({ key, size: (await stat(full)).size });
        }
      }
    };
    // Start from the deepest directory the prefix names, not the whole bucket.
    const dirPart = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
    await walk(path.join(base, dirPart));
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: string[]): Promise<void> {
    await Promise.all(keys.map((k) => rm(this.pathOf(k), { force: true })));
  }
}
