import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { afterAll, expect, test } from 'vitest';
import { createPool } from '../../src/platform/db/pool.js';
import { migrate } from '../../src/platform/db/migrate.js';
import { schemaSnapshot } from '../../src/platform/db/schema-snapshot.js';

const schema = `ces_test_snapshot_${process.pid}_${Date.now()}`;
const pool = createPool({
  DATABASE_URL: process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test',
  DATABASE_SCHEMA: schema,
  DATABASE_POOL_SIZE: 2,
});

afterAll(async () => {
  await pool.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
  await pool.end();
});

test('src/platform/db/schema.sql is the schema the migrations build (npm run schema:snapshot rewrites it)', async () => {
  await migrate(pool, schema);
  const built = await schemaSnapshot(pool, schema);
  const file = await readFile(path.resolve(import.meta.dirname, '../../src/platform/db/schema.sql'), 'utf8');
  // A table the newcomer would look for is there, with a column a late migration added.
  expect(file).toMatch(/^CREATE TABLE exports \(\n[^;]*\n  created_xmin xid8/m);
  expect(built, 'src/platform/db/schema.sql is stale: run `npm run schema:snapshot` and commit it').toBe(file);
});
