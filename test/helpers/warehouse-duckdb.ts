// The runnable examples of a documentation section (fenced blocks marked `<!-- duckdb-example: NAME -->`), and an
// in-memory DuckDB "warehouse" to run them in, as a reader would.
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';

const run = promisify(execFile);

export interface DocExample {
  name: string;
  lang: string;
  code: string;
}

/** What the examples write for the export's directory. */
export const EXPORT_PLACEHOLDER = '<export>';

/**
 * The marked blocks of the markdown section that starts with the line `heading` (up to the next heading of the same
 * level), in order. A marker must be followed by its fenced block on the next line.
 */
export function docExamples(markdown: string, heading: string): DocExample[] {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  if (start === -1) throw new Error(`no line ${JSON.stringify(heading)} in the document`);
  const level = /^#+ /.exec(heading)![0];
  const endAt = lines.findIndex((l, i) => i > start && l.startsWith(level));
  const section = lines.slice(start, endAt === -1 ? undefined : endAt).join('\n');
  const examples: DocExample[] = [];
  for (const m of section.matchAll(/<!-- duckdb-example: ([\w-]+) -->\n```(\w+)\n([\s\S]*?)\n```\n/g)) {
    examples.push({ name: m[1]!, lang: m[2]!, code: m[3]! });
  }
  const markers = section.match(/<!-- duckdb-example: [\w-]+ -->/g)?.length ?? 0;
  if (markers !== examples.length)
    throw new Error(
      `${markers} duckdb-example markers but ${examples.length} marked blocks: a marker without its block`,
    );
  return examples;
}

/** The example's code with the placeholder replaced by a real directory (one that needs no quoting), if it has one. */
export function forExport(example: DocExample, dir?: string): string {
  if (!example.code.includes(EXPORT_PLACEHOLDER)) return example.code;
  if (dir === undefined) throw new Error(`example ${example.name} names an export: give its directory`);
  // `=`: the hive layout's directories (segment_id=…); the examples quote every path.
  if (!/^[\w./=-]+$/.test(dir)) throw new Error(`directory ${dir} would need quoting in the examples`);
  return example.code.replaceAll(EXPORT_PLACEHOLDER, dir);
}

/** Runs a shell example with bash (errexit, pipefail) in cwd. */
export async function runShell(code: string, cwd: string): Promise<{ stdout: string; stderr: string }> {
  return run('bash', ['-e', '-o', 'pipefail', '-c', code], { cwd, maxBuffer: 64 * 1024 * 1024 });
}

export interface Warehouse {
  /** Runs one or more statements; the rows of the last one. */
  query(sql: string): Promise<Record<string, unknown>[]>;
  /** Column name to DuckDB type of a table, in order. */
  columns(table: string): Promise<Record<string, string>>;
  close(): void;
}

/**
 * An in-memory DuckDB with nothing fetched from the network, whose relative file paths are looked up in workDir (as
 * a reader's DuckDB would look them up in the directory it runs in), in a session time zone other than UTC: the
 * examples must not depend on it.
 */
export async function openWarehouse(workDir: string): Promise<Warehouse> {
  const instance = await DuckDBInstance.create(':memory:', {
    threads: '2',
    autoinstall_known_extensions: 'false',
    autoload_known_extensions: 'false',
  });
  let conn: DuckDBConnection;
  try {
    conn = await instance.connect();
    await conn.run(`SET file_search_path = '${workDir.replaceAll("'", "''")}'; SET TimeZone = 'Asia/Kolkata'`);
  } catch (err) {
    instance.closeSync();
    throw err;
  }
  const query = async (sql: string) => (await conn.runAndReadAll(sql)).getRowObjectsJS() as Record<string, unknown>[];
  return {
    query,
    async columns(table) {
      const rows = await query(
        `SELECT column_name, data_type FROM information_schema.columns WHERE table_name = '${table.replaceAll("'", "''")}' ORDER BY ordinal_position`,
      );
      return Object.fromEntries(rows.map((r) => [String(r.column_name), String(r.data_type)]));
    },
    close() {
      conn.closeSync();
      instance.closeSync();
    },
  };
}
