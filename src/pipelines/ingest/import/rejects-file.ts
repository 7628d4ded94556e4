import { once } from 'node:events';
import { PassThrough } from 'node:stream';
import type { ObjectStore } from '../../../platform/storage/object-store.js';
import { parsePayload } from '../apply/dead-letters.js';
import { refusedReason, rejectLine } from './file-records.js';

/** A dead letter of an earlier run of the import, as read from ingest_dead_letters. */
export interface EarlierRefusal {
  line: number;
  error_message: string;
  payload: string;
}

/**
 * An import's rejects file, streamed to the store while the import runs; a crash leaves no partial object (stores
 * write atomically), and a resumed run writes the whole file again (records before the position are re-validated,
 * not re-applied). Lines are buffered and written in chunks of 64 KiB.
 */
export class RejectsFile {
  private readonly stream = new PassThrough();
  private readonly uploaded: Promise<void>;
  private buffer = '';

  /**
   * Starts the upload, and begins the file with the records PostgreSQL refused in an earlier run: they lie behind
   * their partition's position, never applied again, so their lines come from ingest_dead_letters.
   */
  constructor(store: ObjectStore, key: string, earlier: EarlierRefusal[]) {
    // A store attaches its handlers only once its upload starts (the local store after creating the directory). An
    // import failing before that destroys this stream with its error, which with no listener became an uncaught
    // exception (seen once in CI: an unreadable JSON document refused within the first milliseconds). The failure is
    // the import's own throw, and the upload's is `uploaded`.
    this.stream.on('error', () => {});
    this.uploaded = store.put(key, this.stream, { contentType: 'application/x-ndjson' });
    this.uploaded.catch(() => {});
    for (const d of earlier) {
      const parsed = parsePayload(d.payload);
      this.add(d.line, refusedReason(d.error_message), 'objects' in parsed ? (parsed.objects.events[0] ?? null) : null);
    }
  }

  add(line: number, reason: string, object: unknown): void {
    this.buffer += rejectLine(line, reason, object);
  }

  /** Writes the buffered lines once they reach 64 KiB, or whatever there is when `force`d. */
  async flush(force: boolean): Promise<void> {
    if (this.buffer.length === 0 || (!force && this.buffer.length < 64 * 1024)) return;
    const chunk = this.buffer;
    this.buffer = '';
    if (!this.stream.write(chunk)) await once(this.stream, 'drain');
  }

  /** Writes the rest and waits for the upload to complete. */
  async finish(): Promise<void> {
    await this.flush(true);
    this.stream.end();
    await this.uploaded;
  }

  /** Abandons the upload: the store writes no object. */
  destroy(err: Error): void {
    this.stream.destroy(err);
  }
}
