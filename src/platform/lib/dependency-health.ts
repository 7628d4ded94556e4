import type { Logger } from '../logger.js';

/** The servers every process needs. */
export type Dependency = 'postgresql' | 'redis';

/** How each dependency is named in log lines and in 503 bodies. */
export const DEPENDENCY_NAMES: Record<Dependency, string> = { postgresql: 'PostgreSQL', redis: 'Redis' };

/** Seconds a client is asked to wait (Retry-After) when a dependency is away. */
export const OUTAGE_RETRY_AFTER_SECONDS = 5;

/** While a dependency stays away, at most one reminder line per this long. */
const REMINDER_MS = 60_000;

/** Marks an error object with the dependency whose connection produced it (see `tagDependency`). */
const TAG = Symbol.for('ces.dependency');

/**
 * Marks an error emitted by one of our PostgreSQL or Redis connections. pg hands the same error object to its
 * connection's 'error' event and to the queries it fails, so the listener that reports the outage also lets
 * `failedDependency` recognise a bare socket error (read ECONNRESET names no address) in the caller.
 */
export function tagDependency(err: unknown, dependency: Dependency): void {
  if (err !== null && typeof err === 'object') (err as Record<symbol, unknown>)[TAG] = dependency;
}

/** Where each dependency listens: the port (TCP) or socket path a connection error names. */
export interface DependencyTargets {
  DATABASE_URL: string;
  REDIS_URL: string;
}

interface Endpoint {
  port: number;
  /** Unix socket path prefix (PostgreSQL's `host=/dir` form), when not TCP. */
  socketDir?: string;
}

function endpointOf(url: string, defaultPort: number): Endpoint | undefined {
  try {
    const u = new URL(url);
    const port = u.port ? Number(u.port) : Number(u.searchParams.get('port') ?? defaultPort);
    const host = u.searchParams.get('host') ?? decodeURIComponent(u.hostname);
    return host.startsWith('/') ? { port, socketDir: host } : { port };
  } catch {
    return undefined;
  }
}

/** SQLSTATEs of a server going away or refusing connections: admin/crash shutdown, starting up, too many clients. */
const PG_UNAVAILABLE_CODES = new Set(['57P01', '57P02', '57P03', '53300']);
/** pg and pg-pool's own messages for a lost or unobtainable connection. */
const PG_CONNECTION_MESSAGES = [
  'Connection terminated',
  'timeout exceeded when trying to connect',
  'Client has encountered a connection error and is not queryable',
  'Client was closed and is not queryable',
];
/** ioredis and BullMQ's messages for a command that could not reach Redis. */
const REDIS_CONNECTION_MESSAGES = [
  'Connection is closed.',
  "Stream isn't writeable and enableOfflineQueue options is false",
  // A Redis Cluster none of whose nodes answers, or whose slots cannot be learnt.
  'None of startup nodes is available',
  'Failed to refresh slots cache',
  "Cluster isn't ready and enableOfflineQueue options is false",
  'CLUSTERDOWN',
];
/** Socket errors of a connection that could not be made or was lost. */
const SOCKET_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'EPIPE',
  'ENOTFOUND',
  'EAI_AGAIN',
  'ENOENT',
]);

/** Whether `err` is a bare socket error (a lost or refused connection, which may name no address). */
export function isSocketError(err: unknown): boolean {
  const code = (err as { code?: unknown } | null)?.code;
  return typeof code === 'string' && SOCKET_CODES.has(code);
}

interface ErrorLike {
  name?: unknown;
  message?: unknown;
  code?: unknown;
  port?: unknown;
  address?: unknown;
  syscall?: unknown;
  cause?: unknown;
  errors?: unknown;
  [TAG]?: Dependency;
}

/**
 * Which dependency a failure shows to be away, or undefined when it is not a connection failure (a bad query, a
 * refused bucket request). Looks through `cause` chains (AppError, pg-pool's timeout) and AggregateErrors (a host
 * name resolving to several addresses).
 */
export function failedDependency(err: unknown, targets: DependencyTargets): Dependency | undefined {
  const pg = endpointOf(targets.DATABASE_URL, 5432);
  const redis = endpointOf(targets.REDIS_URL, 6379);
  const seen = new Set<unknown>();
  const visit = (e: unknown): Dependency | undefined => {
    if (e === null || typeof e !== 'object' || seen.has(e) || seen.size > 8) return undefined;
    seen.add(e);
    const x = e as ErrorLike;
    if (x[TAG]) return x[TAG];
    const message = typeof x.message === 'string' ? x.message : '';
    const code = typeof x.code === 'string' ? x.code : '';
    if (
      x.name === 'MaxRetriesPerRequestError' ||
      x.name === 'ClusterAllFailedError' ||
      REDIS_CONNECTION_MESSAGES.some((m) => message.startsWith(m))
    )
      return 'redis';
    // A Redis loading its dataset after a restart answers every command with LOADING.
    if (x.name === 'ReplyError' && message.startsWith('LOADING')) return 'redis';
    if (/^[0-9A-Z]{5}$/.test(code) && (PG_UNAVAILABLE_CODES.has(code) || code.startsWith('08'))) return 'postgresql';
    if (PG_CONNECTION_MESSAGES.some((m) => message.startsWith(m))) return 'postgresql';
    if (SOCKET_CODES.has(code)) {
      const port = typeof x.port === 'number' ? x.port : undefined;
      const address = typeof x.address === 'string' ? x.address : '';
      if (pg?.socketDir && address.startsWith(pg.socketDir)) return 'postgresql';
      if (port !== undefined && port === redis?.port) return 'redis';
      if (port !== undefined && port === pg?.port) return 'postgresql';
    }
    if (Array.isArray(x.errors)) {
      for (const inner of x.errors) {
        const found = visit(inner);
        if (found) return found;
      }
    }
    return visit(x.cause);
  };
  return visit(err);
}

/** A failure's message without its stack (AggregateErrors have an empty message: their code says it). */
function reasonOf(err: unknown): string | undefined {
  if (err === undefined) return undefined;
  const x = err as ErrorLike;
  const message = typeof x.message === 'string' && x.message !== '' ? x.message : undefined;
  return message ?? (typeof x.code === 'string' ? x.code : String(err));
}

interface Outage {
  since: number;
  lastLogged: number;
}

/**
 * What this process knows of its dependencies: connection listeners and failed calls report here, and an outage is
 * logged once when it starts, at most once a minute while it lasts, and once when the dependency is back (no stacks:
 * the cause's message only). The HTTP error handler and the workers use `classify` to tell an outage (503, retry)
 * from a fault.
 */
export class DependencyHealth {
  private readonly outages = new Map<Dependency, Outage>();

  constructor(
    private readonly log: Logger,
    private readonly targets: DependencyTargets,
    private readonly reminderMs = REMINDER_MS,
  ) {}

  /** Which dependency `err` shows to be away, if any. */
  classify(err: unknown): Dependency | undefined {
    return failedDependency(err, this.targets);
  }

  /** A connection to `dependency` failed or was lost. */
  down(dependency: Dependency, err?: unknown): void {
    const now = Date.now();
    const outage = this.outages.get(dependency);
    if (!outage) {
      this.outages.set(dependency, { since: now, lastLogged: now });
      this.log.warn({ dependency, reason: reasonOf(err) }, `${DEPENDENCY_NAMES[dependency]} is unavailable`);
    } else if (now - outage.lastLogged >= this.reminderMs) {
      outage.lastLogged = now;
      const downSeconds = Math.round((now - outage.since) / 1000);
      this.log.warn(
        { dependency, reason: reasonOf(err), downSeconds },
        `${DEPENDENCY_NAMES[dependency]} is still unavailable`,
      );
    }
  }

  /** A connection to `dependency` was made. */
  up(dependency: Dependency): void {
    const outage = this.outages.get(dependency);
    if (!outage) return;
    this.outages.delete(dependency);
    const downSeconds = Math.round((Date.now() - outage.since) / 1000);
    this.log.info({ dependency, downSeconds }, `${DEPENDENCY_NAMES[dependency]} is available again`);
  }

  /** Reports `err` as an outage when it is one; returns the dependency it showed to be away. */
  report(err: unknown): Dependency | undefined {
    const dependency = this.classify(err);
    if (dependency) this.down(dependency, err);
    return dependency;
  }

  isDown(dependency: Dependency): boolean {
    return this.outages.has(dependency);
  }
}

/** A connection string fit for messages: its password (and any `password` parameter) masked. */
export function maskUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    if (u.searchParams.has('password')) u.searchParams.set('password', '***');
    return u.toString().replace(/%2A%2A%2A/g, '***');
  } catch {
    return '(unparsable URL)';
  }
}
