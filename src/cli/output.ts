/**
 * `ces ... | head`: once the reader of a command's output has gone, a write to it fails with EPIPE, which Node raises
 * as an unhandled 'error' event: a stack trace, and the command's work abandoned half done (a load rolled back, a sync
 * left to the reconciler). Instead, what the command would still print is dropped: it finishes its work and exits,
 * quietly, with the code that work earns.
 */
export function quietOnBrokenPipe(stream: NodeJS.WriteStream): void {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
    // Nobody reads this stream any more: later writes go nowhere rather than failing again.
    stream.write = ((...args: unknown[]) => {
      const done = args.find((a): a is () => void => typeof a === 'function');
      if (done) process.nextTick(done);
      return true;
    }) as typeof stream.write;
  });
}
