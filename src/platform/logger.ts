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

/** Removes credentials and email addresses from a finished log line: the last net under the serializers and `redact` paths. */
export function redactLine(line: string): string {
  return redactEmailAddresses(
    line
      .replace(CREDENTIAL_PARAM, '$1[redacted]')
      .replace(OWN_SECRET, 'ces_$1_[redacted]')
      .replace(AWS_ACCESS_KEY_ID, '[redacted]'),
  );
}

/** An email address anywhere in a line: the last net under the request serializer and the refusal reasons. */
const EMAIL_ADDRESS =
  /[A-Za-z0-9._%+-]+(?:@|%40)[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?)+/g;

/** `line` with every email address replaced. */
export function redactEmailAddresses(line: string): string {
  return line.replace(EMAIL_ADDRESS, '[email]');
}

interface LoggedRequest {
  method?: string;
  url?: string;
  host?: string;
  ip?: string;
  socket?: { remotePort?: number };
  /** Fastify's request: the route it matched, as registered (`/users/:id`), and the parsed query. */
  routeOptions?: { url?: string };
  query?: unknown;
}

/**
 * What a log line says of a request's URL: the route as registered, never the values in it (an email address in
 * `?email=`, a SCIM filter, an id in the path are personal data, docs/security.md), and the names of its query
 * parameters. A path no route matched is logged with any segment that could hold such a value masked.
 */
export function loggedUrl(req: LoggedRequest): { url: string | undefined; query?: string[] } {
  const route = req.routeOptions?.url;
  const [path = '', search] = (req.url ?? '').split('?', 2);
  const url =
    route ??
    (req.url === undefined
      ? undefined
      : path
          .split('/')
          .map((segment) => (/^[A-Za-z0-9._~-]{0,64}$/.test(segment) ? segment : ':value'))
          .join('/'));
  const names =
    req.query !== null && typeof req.query === 'object'
      ? Object.keys(req.query)
      : search
        ? [...new URLSearchParams(search).keys()]
        : [];
  return names.length > 0 ? { url, query: [...new Set(names)] } : { url };
}

/**
 * The logger of a one-shot command (`ces cdi sync`, `ces export`, `ces migrate`...): its lines go to stderr, so that
 * stdout holds only what the command prints for the person or the script reading it. A reader of stderr that has
 * gone (`2>&1 | head`) makes the lines go nowhere, never the command fail.
 */
export function createCommandLogger(level: string): Logger {
  const destination = pino.destination({ fd: 2, sync: true });
  destination.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code !== 'EPIPE') throw err;
  });
  return createLogger(level, {}, destination);
}

/**
 * The one root logger of a process; request and job loggers are its children. `destination` is for tests that read
 * what a process logs.
 */
export function createLogger(
  level: string,
  bindings: Record<string, unknown> = {},
  destination?: DestinationStream,
): Logger {
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
      // Fastify's request line: the route and the names of the query parameters, never their values (personal data,
      // and the signatures of signed links, which are bearer credentials).
      req: (req: LoggedRequest) => ({
        method: req.method,
        ...loggedUrl(req),
        host: req.host,
        remoteAddress: req.ip,
        remotePort: req.socket?.remotePort,
      }),
    },
    hooks: { streamWrite: redactLine },
  };
  return destination ? pino(options, destination) : pino(options);
}
