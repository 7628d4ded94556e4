/**
 * Rewrites src/platform/db/schema.sql from the migrations (`npm run schema:snapshot`): migrates a scratch schema of
 * DATABASE_URL's database (default: the test database), reads it back (src/platform/db/schema-snapshot.ts), drops it.
 */
import { writeFile } from 'node:fs/promises';
import path from 'node:path';
import { createPool } from '../src/platform/db/pool.js';
import { migrate } from '../src/platform/db/migrate.js';
import { schemaSnapshot } from '../src/platform/db/schema-snapshot.js';

const url = process.env.DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const schema = `ces_snapshot_${process.pid}`;
const pool = createPool({ DATABASE_URL: url, DATABASE_SCHEMA: schema, DATABASE_POOL_SIZE: 2 });
try {
  await migrate(pool, schema);
  const file = path.resolve(import.meta.dirname, '../src/platform/db/schema.sql');
  await writeFile(file, await schemaSnapshot(pool, schema));
  console.log(`schema:snapshot: wrote ${path.relative(process.cwd(), file)}`);
} finally {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`).catch(() => {});
  await pool.end();
}
