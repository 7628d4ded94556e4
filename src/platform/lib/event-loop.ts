/** Lets timers, I/O and other requests run before a long synchronous loop goes on (every few hundred items). */
export const yieldToEventLoop = () => new Promise<void>((resolve) => setImmediate(resolve));
