import { createReadStream, createWriteStream } from 'node:fs';
import { mkdir, readdir, realpath, rename, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { randomBytes } from 'node:crypto';
import { ObjectNotFoundError, type ObjectStore, type StoredObject } from './object-store.js';

/** Whose part of the built-in store a LocalStore sees: one workspace of one company. */
export interface LocalNamespace {
  companyId: string;
  workspaceId: string;
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;
export const MAX_LOCAL_KEY_LENGTH = 1024;

/** Why a key cannot name an object of the local store, or null when it can. */
export function localKeyProblem(key: string): string | null {
  if (key.length === 0) return 'key must not be empty';
  if (key.length > MAX_LOCAL_KEY_LENGTH) return `key may be at most ${MAX_LOCAL_KEY_LENGTH} characters`;
  if (key.includes('\0')) return 'key must not contain a NUL character';
  if (key.includes('\\')) return 'key must use / as its separator, not \\';
  if (key.startsWith('/')) return 'key must be relative (no leading /)';
  // '', '.' and '..' segments would make two spellings of one object, or leave the namespace.
  if (key.split('/').some((s) => s === '' || s === '.' || s === '..'))
    return "key must not contain empty, '.' or '..' segments";
  return null;
}

/** The error a key outside the rules gets; callers that take keys from requests check `localKeyProblem` first. */
export class InvalidObjectKeyError extends Error {
  constructor(
    readonly key: string,
    reason: string,
  ) {
    super(`invalid object key: ${reason}`);
    this.name = 'InvalidObjectKeyError';
  }
}

/** The directory of a workspace's objects in the built-in store (where files to import are put, exports are found). */
export function localWorkspaceDir(root: string, ns: LocalNamespace): string {
  return LocalStore.forWorkspace(root, ns).base;
}

const within = (dir: string, full: string) => full === dir || full.startsWith(dir + path.sep);

/**
 * The built-in local bucket: objects are files under `root/local/<namespace>/<key>`. Writes go to a temporary file
 * that is renamed into place, so a reader never sees half an object and a crash leaves none.
 *
 * A store opened for a workspace (`LocalStore.forWorkspace`) sees only `root/local/<company id>/<workspace id>/`:
 * every key is checked (relative, no `..`, `.` or empty segment, no NUL) and resolved inside that directory, and a
 * path that leaves it through a symbolic link is treated as missing. Keys another tenant uses simply do not exist
 * there. `LocalStore.sharedRoot` sees the whole bucket: it serves only exports recorded before stores had
 * namespaces, with keys read from their database rows, never from a request.
 */
export class LocalStore implements ObjectStore {
  readonly kind = 'local' as const;
  readonly bucket = 'local';
  /** Absolute directory every key of this store resolves inside. */
  readonly base: string;

  private constructor(root: string, namespace: string) {
    this.base = path.resolve(root, this.bucket, namespace);
  }

  static forWorkspace(root: string, ns: LocalNamespace): LocalStore {
    // Ids come from our own rows, but they become path segments: never trust a shape.
    if (!UUID.test(ns.companyId) || !UUID.test(ns.workspaceId))
      throw new Error('local store namespace ids must be UUIDs');
    return new LocalStore(root, path.join(ns.companyId, ns.workspaceId));
  }

  /** The whole bucket, for objects written before namespaces (keys from the database only). */
  static sharedRoot(root: string): LocalStore {
    return new LocalStore(root, '');
  }

  /** The file a key names, checked lexically (no file system access). Throws InvalidObjectKeyError. */
  pathOf(key: string): string {
    const problem = localKeyProblem(key);
    if (problem) throw new InvalidObjectKeyError(key, problem);
    const full = path.resolve(this.base, key);
    if (!within(this.base, full) || full === this.base) throw new InvalidObjectKeyError(key, 'key leaves the store');
    return full;
  }

  /**
   * The key's file, or null when the object cannot be there for this store: missing (for reads), or reached through a
   * symbolic link that leads outside the namespace. For a write, the nearest existing directory on the way is
   * checked, before anything is created.
   */
  private async confined(key: string, forWrite = false): Promise<string | null> {
    const full = this.pathOf(key);
    const realBase = await realpath(this.base).catch(() => null);
    // Nothing stored yet: no link can exist below, and there is nothing to read.
    if (realBase === null) return forWrite ? full : null;
    for (let probe = forWrite ? path.dirname(full) : full; ; probe = path.dirname(probe)) {
      try {
        return within(realBase, await realpath(probe)) ? full : null;
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'ENOENT' || !forWrite || probe === path.dirname(probe)) return null;
      }
    }
  }

  async put(key: string, body: Readable | Buffer): Promise<void> {
    const target = await this.confined(key, true);
    if (target === null) throw new InvalidObjectKeyError(key, 'key leaves the store');
    await mkdir(path.dirname(target), { recursive: true });
    const tmp = `${target}.${randomBytes(6).toString('hex')}.partial`;
    try {
      await pipeline(Buffer.isBuffer(body) ? Readable.from([body]) : body, createWriteStream(tmp, { flags: 'wx' }));
      await rename(tmp, target);
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  async get(key: string): Promise<Readable> {
    const file = await this.confined(key);
    if (
      file === null ||
      !(await stat(file).then(
        (s) => s.isFile(),
        () => false,
      ))
    )
      throw new ObjectNotFoundError(key);
    return createReadStream(file);
  }

  async head(key: string): Promise<number | null> {
    const file = await this.confined(key);
    if (file === null) return null;
    try {
      const s = await stat(file);
      return s.isFile() ? s.size : null;
    } catch {
      return null;
    }
  }

  async list(prefix: string): Promise<StoredObject[]> {
    const out: StoredObject[] = [];
    // Directory entries that are symbolic links are neither files nor directories here, so listing never follows one.
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
          const key = path.relative(this.base, full).split(path.sep).join('/');
          if (key.startsWith(prefix)) {
            const st = await stat(full);
            out.push({ key, size: st.size, etag: `${st.size}-${Math.trunc(st.mtimeMs)}` });
          }
        }
      }
    };
    // Start from the deepest directory the prefix names, not the whole bucket.
    const dirPart = prefix.includes('/') ? prefix.slice(0, prefix.lastIndexOf('/')) : '';
    if (dirPart !== '' && localKeyProblem(dirPart) !== null) return [];
    const start = dirPart === '' ? this.base : this.pathOf(dirPart);
    // The walk never follows a link, but its starting directory could be reached through one.
    const [realBase, realStart] = await Promise.all([
      realpath(this.base).catch(() => null),
      realpath(start).catch(() => null),
    ]);
    if (realBase === null || realStart === null || !within(realBase, realStart)) return [];
    await walk(start);
    return out.sort((a, b) => (a.key < b.key ? -1 : a.key > b.key ? 1 : 0));
  }

  async delete(keys: string[]): Promise<void> {
    await Promise.all(
      keys.map(async (k) => {
        const file = await this.confined(k, true);
        if (file !== null) await rm(file, { force: true });
      }),
    );
  }
}
