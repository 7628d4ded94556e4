import type { Duplex } from 'node:stream';
import type { EventType, LoggedEvent } from '../../../profiles/event-log-types.js';
import type { JsonText } from './json-text.js';

/**
 * An event as the encoders read it: a LoggedEvent whose `properties` may come as the object's JSON text (a delivery
 * reads them so from the log: ./json-text.ts). When it entered the log is no field of the files.
 */
export type SourceEvent<T extends EventType = EventType> = Omit<LoggedEvent<T>, 'acceptedAt' | 'properties'> & {
  properties: Record<string, unknown> | JsonText | null;
};

/** The events of one file: an array, or rows read as they come (a cursor), so that a file need not be held twice. */
export type EventSource = Iterable<SourceEvent> | AsyncIterable<SourceEvent>;

/** Calls fn for each event in order, awaiting it only when it returns a promise (an array costs no microtask a row). */
export async function forEachEvent(events: EventSource, fn: (e: SourceEvent) => Promise<void> | void): Promise<void> {
  if (Symbol.asyncIterator in events) {
    for await (const e of events) await fn(e);
    return;
  }
  for (const e of events) {
    const wait = fn(e);
    if (wait) await wait;
  }
}

/** Writes into a transform, waiting while it is full; throws its first error. */
export type Write = (chunk: unknown) => Promise<void> | void;

/**
 * Feeds a transform (a compressor, an encoder) through `feed`, then ends it and resolves with everything it output.
 * Only the output is held: it is the file, bounded by max_events_per_file. The transform's first error (or feed's)
 * rejects, and the transform is destroyed.
 */
export function collect(transform: Duplex, feed: (write: Write) => Promise<void>): Promise<Buffer> {
  const chunks: Buffer[] = [];
  let failure: Error | null = null;
  let wake: (() => void) | null = null;
  const done = new Promise<void>((resolve, reject) => {
    transform.on('data', (chunk: Buffer) => chunks.push(chunk));
    transform.on('end', resolve);
    // Kept for the transform's life: a destroyed stream may emit again, and an error without a listener would throw.
    transform.on('error', (err) => {
      failure ??= err;
      reject(failure);
      wake?.();
    });
  });
  // Awaited below; until then a rejection must not count as unhandled.
  done.catch(() => undefined);
  transform.on('drain', () => wake?.());
  const write: Write = (chunk) => {
    if (failure) throw failure;
    if (transform.write(chunk)) return;
    return new Promise<void>((resolve, reject) => {
      wake = () => {
        wake = null;
        if (failure) reject(failure);
        else resolve();
      };
    });
  };
  return (async () => {
    try {
      await feed(write);
    } catch (err) {
      transform.destroy();
      throw err;
    }
    transform.end();
    await done;
    return Buffer.concat(chunks);
  })();
}
