import pg from 'pg';
import type { Config } from '../config.js';
import { tagDependency, type DependencyHealth } from '../lib/dependency-health.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

// Return bigint columns (counts, ids) as JS numbers: ours stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));
// Keep `date` columns as 'YYYY-MM-DD' strings rather than local-midnight Date objects.
pg.types.setTypeParser(1082, (v) => v);

export type PoolConfig = Pick<Config, 'DATABASE_URL' | 'DATABASE_SCHEMA' | 'DATABASE_POOL_SIZE'> &
  Partial<Pick<Config, 'DATABASE_CONNECT_TIMEOUT_MS'>>;

/** A SQLSTATE: an answer of the server, which `failedDependency` reads by its code, rather than a lost socket. */
const SQLSTATE = /^[0-9A-Z]{5}$/;

/**
 * A client whose failure to connect is marked as PostgreSQL's. pg hands a socket error of the handshake (a server
 * stopping resets it: `read ECONNRESET`, with no address to tell which server it was) to the connect callback, before
 * the pool's 'connect' listener below exists, so nothing else could say where it came from: unmarked, a request
 * waiting for a new connection during a stop answered 500 instead of 503.
 */
class MarkedClient extends pg.Client {
  override connect(): Promise<pg.Client>;
  override connect(callback: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): void;
  override connect(callback?: ((err: Error) => void) | ((err: null, c: pg.Client) => void)): Promise<pg.Client> | void {
    const mark = (err: unknown) => {
      const code = (err as { code?: unknown } | null)?.code;
      if (!(typeof code === 'string' && SQLSTATE.test(code))) tagDependency(err, 'postgresql');
    };
    if (callback) {
      super.connect((err: Error | null) => {
        if (err) mark(err);
        (callback as (err: Error | null, c?: pg.Client) => void)(err, this);
      });
      return;
    }
    return super.connect().catch((err: unknown) => {
      mark(err);
      throw err;
    });
  }
}

/**
 * A pool whose every connection works inside the configured schema. No lost connection crashes the process: every
 * client gets an 'error' listener as it connects, so one checked out (in a transaction, a COPY) when PostgreSQL goes
 * away only fails its queries; its holder releases it and the pool, finding it unusable, drops it. Outages and
 * returns are reported to `health`.
 */
export function createPool(config: PoolConfig, max?: number, health?: DependencyHealth): Pool {
  const pool = new pg.Pool({
    connectionString: config.DATABASE_URL,
    max: max ?? config.DATABASE_POOL_SIZE,
    // Bounds both opening a connection and waiting for a free one: with PostgreSQL unreachable a request fails
    // (503) instead of hanging, and a job attempt fails and is retried with backoff.
    connectionTimeoutMillis: config.DATABASE_CONNECT_TIMEOUT_MS || undefined,
    options: `-c search_path=${config.DATABASE_SCHEMA},public -c timezone=UTC`,
    application_name: 'ces',
    Client: MarkedClient,
  });
  pool.on('connect', (client) => {
    health?.up('postgresql');
    client.on('error', (err) => {
      tagDependency(err, 'postgresql');
      health?.down('postgresql', err);
    });
  });
  // The pool's own event for idle clients: the listener above has reported it already.
  pool.on('error', () => {});
  return pool;
}

/** Runs fn in one transaction; rolls back on any error. */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  // A connection that cannot even roll back (PostgreSQL went away) is released with that error: the pool discards it.
  let broken: Error | undefined;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    broken = await client.query('ROLLBACK').then(
      () => undefined,
      (rollbackErr: unknown) => (rollbackErr instanceof Error ? rollbackErr : new Error(String(rollbackErr))),
    );
    throw err;
  } finally {
    client.release(broken);
  }
}
