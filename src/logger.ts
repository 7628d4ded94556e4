import { pino, type DestinationStream, type Logger } from 'pino';

export type { Logger };

/**
 * Query parameters that carry a credential: our signed download links (`signature`), and the usual names of tokens,
 * keys and presigned-URL signatures (S3, GCS) that a caller's URL (a callback endpoint, say) may hold.
 */
const CREDENTIAL_PARAMS = [
  'signature',
  'sig',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'api_key',
  'apikey',
  'key',
  'secret',
  'password',
  'x-amz-signature',
  'x-amz-credential',
  'x-amz-security-token',
  'x-goog-signature',
  'x-goog-credential',
];
const CREDENTIAL_PARAM = new RegExp(`([?&](?:${CREDENTIAL_PARAMS.join('|')})=)[^&#\\s"\\\\]*`, 'gi');
/** Our own API keys and SCIM tokens, wherever they turn up in a line (a body echoed in an error, say). */
const OWN_SECRET = /\bces_(key|scim)_[A-Za-z0-9_-]{4,}/g;
/** AWS access key ids, which S3 errors repeat (the secret key never is, but the pair is a credential). */
const AWS_ACCESS_KEY_ID = /\b(?:AKIA|ASIA)[A-Z0-9]{16}\b/g;

/** A URL (or path with query) with the value of every credential-bearing query parameter replaced. */
export function redactUrl(url: string): string {
  return url.replace(CREDENTIAL_PARAM, '$1[redacted]');
}

/** Removes credentials from a finished log line: the last net under the serializers and `redact` paths. */
export function redactLine(line: string): string {
  return line.replace(CREDENTIAL_PARAM, '$1[redacted]').replace(OWN_SECRET, 'ces_$1_[redacted]').replace(AWS_ACCESS_KEY_ID, '[redacted]');
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
}

/**
 * The one root logger of a process; request and job loggers are its children. `destination` is for tests that read
 * what a process logs.
 */
export function createLogger(level: string, bindings: Record<string, unknown> = {}, destination?: DestinationStream): Logger {
  const options = {
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
    serializers: {
      // Fastify's request line, with signed links' signatures (bearer credentials) cut out of the URL.
      req: (req: LoggedRequest) => ({
        method: req.method,
        url: req.url === undefined ? undefined : redactUrl(req.url),
        host: req.host,
        remoteAddress: req.ip,
        remotePort: req.socket?.remotePort,
      }),
    },
    hooks: { streamWrite: redactLine },
  };
  return destination ? pino(options, destination) : pino(options);
}
