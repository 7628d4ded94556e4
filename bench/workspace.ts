import { migrate } from '../src/platform/db/migrate.js';
import type { Pool } from '../src/platform/db/pool.js';

/**
 * What a benchmark starts from: `schema` dropped and migrated anew, holding one company and one workspace (`name`).
 * Returns the workspace's id.
 */
export async function freshWorkspace(pool: Pool, schema: string, name = 'bench'): Promise<string> {
  await pool.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
  await migrate(pool, schema);
  const company = (await pool.query<{ id: string }>(`INSERT INTO companies (name) VALUES ('bench') RETURNING id`))
    .rows[0]!.id;
  const { rows } = await pool.query<{ id: string }>(
    `INSERT INTO workspaces (company_id, name) VALUES ($1, $2) RETURNING id`,
    [company, name],
  );
  return rows[0]!.id;
}
