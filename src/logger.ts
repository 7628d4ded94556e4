import { pino, type Logger } from 'pino';

export type { Logger };

/** The one root logger of a process; request and job loggers are its children. */
export function createLogger(level: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({
    level,
    base: { pid: process.pid, ...bindings },
    // Secrets must never reach a log line, even by accident in a logged object.
    redact: {
      paths: [
        'req.headers.authorization',
        'headers.authorization',
        '*.secretAccessKey',
        '*.credentials',
        '*.private_key',
        '*.password',
        'destination.credentials',
      ],
      censor: '[redacted]',
    },
  });
}
