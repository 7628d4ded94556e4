import { readFileSync } from 'node:fs';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createTestEnv, type TestEnv } from '../helpers/context.js';
import { repoRoot } from '../helpers/cli.js';

/** docs/api.md's "Braze's endpoints, counted": the count, Braze's endpoints with their state here, and ours. */
const section = (() => {
  const doc = readFileSync(path.join(repoRoot, 'docs/api.md'), 'utf8');
  const start = doc.indexOf("## Braze's endpoints, counted");
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end === -1 ? undefined : end);
})();

const STATES = ['served', 'served with differences', 'not served'] as const;
interface BrazeRow {
  method: string;
  path: string;
  state: string;
  note: string;
}

function tableCells(line: string): string[] {
  return line
    .slice(1, -1)
    .split(' | ')
    .map((c) => c.trim());
}

const brazeRows: BrazeRow[] = section
  .split('\n')
  .filter((l) => /^\| [^|]+ \| [A-Z]+ \| `\//.test(l))
  .map((l) => {
    const [, method, p, state, note] = tableCells(l);
    return { method: method!, path: p!.replaceAll('`', ''), state: state!, note: note ?? '' };
  });

/** Our own rows: "| GET, PUT | `/path` | what for |", one row per path, several methods. */
const ourRoutes: string[] = section
  .split('\n')
  .filter((l) => /^\| [A-Z, ]+ \| `\//.test(l))
  .flatMap((l) => {
    const [methods, p] = tableCells(l);
    return methods!.split(', ').map((m) => `${m} ${shape(p!.replaceAll('`', ''))}`);
  });

/** A path by its shape: Braze's `{name}` and Fastify's `:name` both become `{}`. */
function shape(p: string): string {
  return p.replace(/\{[^}]+\}|:[A-Za-z_]+/g, '{}');
}

/** A concrete path to request: every parameter filled in. */
function concrete(p: string): string {
  return p.replace(/\{[^}]+\}/g, 'x1');
}

describe("docs/api.md: Braze's endpoints, counted", () => {
  let env: TestEnv;
  let served: Set<string>;
  beforeAll(async () => {
    env = await createTestEnv();
    served = new Set(
      env.app.routeCatalog
        .filter(
          (r) =>
            r.method !== 'HEAD' && (r.config.permission || r.config.auth === 'scim' || r.url.startsWith('/downloads')),
        )
        .map((r) => `${r.method} ${shape(r.url)}`),
    );
  });
  afterAll(async () => {
    await env.close();
  });

  it('states each row in one of the three words, with a reason or a link where it must', () => {
    expect(brazeRows.length).toBeGreaterThan(90);
    for (const row of brazeRows) {
      const where = `${row.method} ${row.path}`;
      expect(STATES, where).toContain(row.state);
      if (row.state === 'served with differences') expect(row.note, `${where}: say where`).toMatch(/\]\([^)]+\)/);
      if (row.state === 'not served') expect(row.note, `${where}: say why`).not.toBe('');
    }
    const keys = brazeRows.map((r) => `${r.method} ${shape(r.path)}`);
    expect(
      keys.filter((k, i) => keys.indexOf(k) !== i),
      'rows given twice',
    ).toEqual([]);
  });

  it('opens with the count the rows make', () => {
    const servedRows = brazeRows.filter((r) => r.state !== 'not served');
    const differing = brazeRows.filter((r) => r.state === 'served with differences');
    expect(section).toContain(
      `**Served: ${servedRows.length} of ${brazeRows.length}** (${differing.length} of them with differences; ` +
        `${brazeRows.length - servedRows.length} not served).`,
    );
  });

  it('marks served exactly the Braze routes the service has', () => {
    for (const row of brazeRows) {
      const key = `${row.method} ${shape(row.path)}`;
      expect(served.has(key), `${key} is marked ${row.state}`).toBe(row.state !== 'not served');
    }
  });

  it('names every route the service has, in the Braze table or in ours', () => {
    const named = new Set([...brazeRows.map((r) => `${r.method} ${shape(r.path)}`), ...ourRoutes]);
    for (const route of served) expect(named.has(route), `${route} is in neither table`).toBe(true);
    for (const route of ourRoutes) expect(served.has(route), `${route} is listed as ours but not served`).toBe(true);
  });

  it('answers every served row (401 without a key) and 404s every row not served', async () => {
    for (const row of brazeRows) {
      const res = await env.app.inject({ method: row.method as 'GET', url: concrete(row.path) });
      const where = `${row.method} ${row.path} (${row.state})`;
      if (row.state === 'not served') expect(res.statusCode, where).toBe(404);
      else expect(res.statusCode, where).toBe(401);
    }
  });
});
