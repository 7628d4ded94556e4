import { readdir, readFile } from 'node:fs/promises';
import path from 'node:path';
import type { Logger } from '../logger.js';
import { packageRoot } from '../lib/package-root.js';
import type { Pool } from './pool.js';
import { lockNames, lockSession, unlockSession } from './advisory-locks.js';

export const migrationsDir = () => path.join(packageRoot(), 'src', 'platform', 'db', 'migrations');

/**
 * Applies pending forward-only migrations (numbered .sql files) in order, each in its own transaction.
 * An advisory lock lets several processes start at once: one migrates, the others wait and find nothing to do.
 */
export async function migrate(pool: Pool, schema: string, log?: Logger): Promise<string[]> {
  const files = (await readdir(migrationsDir())).filter((f) => /^\d{4}_.+\.sql$/.test(f)).sort();
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    // Lock first: two processes creating the same schema at once would collide even with IF NOT EXISTS.
    await lockSession(client, lockNames.migrate(schema));
    try {
      await client.query(`CREATE SCHEMA IF NOT EXISTS "${schema}"`);
      await client.query(`CREATE TABLE IF NOT EXISTS "${schema}".schema_migrations (
        version text PRIMARY KEY, applied_at timestamptz NOT NULL DEFAULT now())`);
      const done = new Set(
        (await client.query<{ version: string }>(`SELECT version FROM "${schema}".schema_migrations`)).rows.map(
          (r) => r.version,
        ),
      );
      for (const file of files) {
        if (done.has(file)) continue;
        const sql = await readFile(path.join(migrationsDir(), file), 'utf8');
        await client.query('BEGIN');
        try {
          await client.query(`SET LOCAL search_path = "${schema}", public`);
          await client.query(sql);
          await client.query(`INSERT INTO "${schema}".schema_migrations (version) VALUES ($1)`, [file]);
          await client.query('COMMIT');
        } catch (err) {
          await client.query('ROLLBACK');
          throw new Error(`migration ${file} failed: ${(err as Error).message}`, { cause: err });
        }
        applied.push(file);
        log?.info({ migration: file, schema }, 'migration applied');
      }
    } finally {
      await unlockSession(client, lockNames.migrate(schema));
    }
  } finally {
    client.release();
  }
  return applied;
}
