import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Pool } from '../../src/platform/db/pool.js';
import { repoRoot } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';

/**
 * docs/privacy.md names every table of the migrated schema that can hold text or JSON, in one of its two lists
 * ("Every table, and what it holds"): the tables that can hold personal data, with what and how an erasure treats
 * each, and the tables that hold none. A migration that adds such a table fails this test until the page says which
 * it is; a table the page names that no longer exists fails it too.
 */

const env = useTestEnv();

const SECTION = '## Every table, and what it holds';
const PERSONAL = '### Tables that can hold personal data';
const NONE = '### Tables that hold none';

/** The table names of a list: the backticked name that opens each row of its table. */
function listed(page: string, heading: string): string[] {
  const start = page.indexOf(heading);
  if (start < 0) throw new Error(`docs/privacy.md has no "${heading}"`);
  const body = page.slice(start + heading.length).split(/\n#{2,3} /)[0]!;
  return [...body.matchAll(/^\|\s*`([a-z_][a-z0-9_]*)`\s*\|/gm)].map((m) => m[1]!);
}

/** Tables of the schema with a column of text (text, varchar, char), JSON (json, jsonb), or an array of those. */
async function textTables(pool: Pool, schema: string): Promise<string[]> {
  const { rows } = await pool.query<{ table: string }>(
    `SELECT DISTINCT c.relname AS table
       FROM pg_class c
       JOIN pg_namespace n ON n.oid = c.relnamespace
       JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
       JOIN pg_type t ON t.oid = a.atttypid
       LEFT JOIN pg_type e ON e.oid = t.typelem AND t.typcategory = 'A'
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition
        AND (coalesce(e.typcategory, t.typcategory) = 'S' OR coalesce(e.typname, t.typname) IN ('json', 'jsonb'))
      ORDER BY 1`,
    [schema],
  );
  return rows.map((r) => r.table);
}

async function allTables(pool: Pool, schema: string): Promise<string[]> {
  const { rows } = await pool.query<{ table: string }>(
    `SELECT c.relname AS table FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
      WHERE n.nspname = $1 AND c.relkind IN ('r', 'p') AND NOT c.relispartition ORDER BY 1`,
    [schema],
  );
  return rows.map((r) => r.table);
}

/** What is wrong between the page and the schema: empty when the page is truthful. */
async function problems(page: string): Promise<string[]> {
  if (!page.includes(SECTION)) return [`docs/privacy.md has no "${SECTION}" section`];
  const personal = listed(page, PERSONAL);
  const none = listed(page, NONE);
  const schema = env.config.DATABASE_SCHEMA;
  const tables = new Set(await allTables(env.ctx.pool, schema));
  const named = new Set([...personal, ...none]);
  return [
    ...(await textTables(env.ctx.pool, schema))
      .filter((t) => !named.has(t))
      .map((t) => `table ${t} has a text or JSON column and docs/privacy.md does not say what personal data it holds`),
    ...personal
      .filter((t) => none.includes(t))
      .map((t) => `table ${t} is listed both as holding personal data and none`),
    ...[...named].filter((t) => !tables.has(t)).map((t) => `docs/privacy.md names table ${t}, which does not exist`),
  ];
}

describe('docs/privacy.md, every table', () => {
  it('names every table that can hold text or JSON, as holding personal data or none, and only tables that exist', async () => {
    const page = await readFile(path.join(repoRoot, 'docs/privacy.md'), 'utf8');
    expect(await problems(page)).toEqual([]);
    // The lists are read for real: both hold rows.
    expect(listed(page, PERSONAL)).toContain('profiles');
    expect(listed(page, NONE)).toContain('schema_migrations');
  });

  it('fails for a table a migration adds with a text or JSON column, until the page names it', async () => {
    const page = await readFile(path.join(repoRoot, 'docs/privacy.md'), 'utf8');
    await env.ctx.pool.query(`CREATE TABLE privacy_probe (id bigint, note jsonb)`);
    await env.ctx.pool.query(`CREATE TABLE privacy_probe_numbers (id bigint, n integer)`);
    await env.ctx.pool.query(`CREATE TABLE privacy_probe_tags (id bigint, tags varchar(20)[])`);
    try {
      expect(await problems(page)).toEqual([
        'table privacy_probe has a text or JSON column and docs/privacy.md does not say what personal data it holds',
        'table privacy_probe_tags has a text or JSON column and docs/privacy.md does not say what personal data it holds',
      ]);
      const named = page.replace(
        `${NONE}\n`,
        `${NONE}\n\n| \`privacy_probe\` | a probe |\n| \`privacy_probe_tags\` | a probe |\n`,
      );
      expect(await problems(named)).toEqual([]);
    } finally {
      await env.ctx.pool.query(`DROP TABLE privacy_probe, privacy_probe_numbers, privacy_probe_tags`);
    }
  });
});
