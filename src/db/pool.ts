import pg from 'pg';
import type { Config } from '../config.js';

export type Pool = pg.Pool;
export type PoolClient = pg.PoolClient;

// Return bigint columns (counts, ids) as JS numbers: ours stay far below 2^53.
pg.types.setTypeParser(20, (v) => Number(v));
// Keep `date` columns as 'YYYY-MM-DD' strings rather than local-midnight Date objects.
pg.types.setTypeParser(1082, (v) => v);

/** A pool whose every connection works inside the configured schema. */
export function createPool(config: Pick<Config, 'DATABASE_URL' | 'DATABASE_SCHEMA' | 'DATABASE_POOL_SIZE'>, max?: number): Pool {
  const pool = new pg.Pool({
    connectionString: config.DATABASE_URL,
    max: max ?? config.DATABASE_POOL_SIZE,
    options: `-c search_path=${config.DATABASE_SCHEMA},public -c timezone=UTC`,
    application_name: 'ces',
  });
  // An idle client losing its connection must not crash the process; the pool replaces it.
  pool.on('error', () => {});
  return pool;
}

/** Runs fn in one transaction; rolls back on any error. */
export async function withTransaction<T>(pool: Pool, fn: (client: PoolClient) => Promise<T>): Promise<T> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    await client.query('COMMIT');
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    client.release();
  }
}
