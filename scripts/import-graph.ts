/**
 * The house's two rules about imports, over src/ and jobs/, as the TypeScript parser reads them: every `import`,
 * `export ... from`, type-only import and dynamic `import()` counts, since a type-only arrow still makes a reader hold
 * both files in mind at once (eslint's import-x/no-cycle leaves those out).
 *
 * 1. No cycle between files.
 * 2. No arrow from a lower layer to a higher one. The layers, lowest first, are LAYERS below and nowhere else
 *    (docs/architecture.md shows them; test/platform/architecture-doc.test.ts keeps the two the same). A file belongs
 *    to the first layer whose paths hold it; a file may import from its own layer and the layers under it.
 *
 * `npm test` runs it (scripts/test.sh) and fails on any finding; test/platform/import-graph.test.ts shows that a probe
 * of each kind is found.
 *
 *   npx tsx scripts/import-graph.ts
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export interface Layer {
  name: string;
  /** Repo-relative paths: a folder ends with `/`, anything else is one file. */
  paths: string[];
  /** What the layer is for, as docs/architecture.md says it. */
  holds: string;
}

/** The layers of the house, lowest first. */
export const LAYERS: Layer[] = [
  {
    name: 'platform: basics',
    paths: ['src/platform/config.ts', 'src/platform/errors.ts', 'src/platform/logger.ts', 'src/platform/metrics.ts'],
    holds: 'settings, the one error type, logging, metrics',
  },
  { name: 'platform: helpers', paths: ['src/platform/lib/'], holds: 'small helpers that know no table or service' },
  {
    name: 'platform: connections',
    paths: ['src/platform/db/', 'src/platform/redis.ts', 'src/platform/redis-scripts/'],
    holds: 'PostgreSQL (pool, migrations, advisory locks), Redis and its Lua scripts',
  },
  {
    name: 'platform: services',
    paths: ['src/platform/storage/', 'src/platform/queues/', 'src/platform/idempotency/', 'src/platform/auth/'],
    holds: 'object stores, queues, Idempotency-Key records, principals and rate limits',
  },
  {
    name: 'platform: context',
    paths: ['src/platform/context.ts', 'src/platform/job-definition.ts'],
    holds: "one process's connections, built once, and what a queue's processor takes of them",
  },
  { name: 'platform: HTTP', paths: ['src/platform/http/'], holds: 'the hooks every route shares' },
  {
    name: 'profiles',
    paths: ['src/profiles/'],
    holds: 'the people: the profile write protocol, identities, commands, segments',
  },
  { name: 'pipelines', paths: ['src/pipelines/'], holds: 'bulk data in and out: exports, ingestion, CDI' },
  { name: 'features', paths: ['src/features/'], holds: 'endpoint families over the profiles and pipelines' },
  {
    name: 'surface',
    paths: ['src/routes/', 'src/cli/', 'src/runtime/', 'src/app.ts', 'src/cli.ts', 'jobs/'],
    holds: 'what starts work: routes, commands, queue processors, processes',
  },
];

export interface Finding {
  kind: 'cycle' | 'upward';
  text: string;
}

/** Every .ts file under the given repo-relative folders, with its text. */
export function readSources(root: string, dirs = ['src', 'jobs']): Map<string, string> {
  const files = new Map<string, string>();
  const walk = (rel: string) => {
    for (const entry of readdirSync(path.join(root, rel))) {
      const child = `${rel}/${entry}`;
      if (statSync(path.join(root, child)).isDirectory()) walk(child);
      else if (child.endsWith('.ts') && !child.endsWith('.d.ts'))
        files.set(child, readFileSync(path.join(root, child), 'utf8'));
    }
  };
  for (const dir of dirs) walk(dir);
  return files;
}

/** file -> the files of the set it imports (relative specifiers only; `.js` names its `.ts`). */
export function importGraph(files: Map<string, string>): Map<string, string[]> {
  const graph = new Map<string, string[]>();
  for (const [file, text] of files) {
    const targets = ts
      .preProcessFile(text, true, true)
      .importedFiles.map((f) => f.fileName)
      .filter((spec) => spec.startsWith('.'))
      .map((spec) => path.posix.normalize(path.posix.join(path.posix.dirname(file), spec)).replace(/\.js$/, '.ts'))
      .filter((target) => files.has(target));
    graph.set(file, [...new Set(targets)]);
  }
  return graph;
}

export function layerOf(file: string, layers = LAYERS): number {
  return layers.findIndex((l) => l.paths.some((p) => (p.endsWith('/') ? file.startsWith(p) : file === p)));
}

/** Strongly connected components of more than one file (Tarjan), each sorted. */
function cycles(graph: Map<string, string[]>): string[][] {
  const index = new Map<string, number>();
  const low = new Map<string, number>();
  const stack: string[] = [];
  const onStack = new Set<string>();
  const found: string[][] = [];
  let next = 0;
  const visit = (v: string) => {
    index.set(v, next);
    low.set(v, next++);
    stack.push(v);
    onStack.add(v);
    for (const w of graph.get(v) ?? []) {
      if (!index.has(w)) {
        visit(w);
        low.set(v, Math.min(low.get(v)!, low.get(w)!));
      } else if (onStack.has(w)) low.set(v, Math.min(low.get(v)!, index.get(w)!));
    }
    if (low.get(v) !== index.get(v)) return;
    const component: string[] = [];
    let w: string;
    do {
      w = stack.pop()!;
      onStack.delete(w);
      component.push(w);
    } while (w !== v);
    if (component.length > 1) found.push(component.sort());
  };
  for (const v of [...graph.keys()].sort()) if (!index.has(v)) visit(v);
  return found;
}

/** What breaks the two rules in this set of files. */
export function checkImports(files: Map<string, string>, layers = LAYERS): Finding[] {
  const graph = importGraph(files);
  const findings: Finding[] = [];
  for (const [file, targets] of graph) {
    const from = layerOf(file, layers);
    if (from < 0) {
      findings.push({ kind: 'upward', text: `${file} is in no layer: add its folder to LAYERS` });
      continue;
    }
    for (const target of targets) {
      const to = layerOf(target, layers);
      if (to > from)
        findings.push({
          kind: 'upward',
          text: `${file} (${layers[from]!.name}) imports ${target} (${layers[to]!.name}), a higher layer`,
        });
    }
  }
  for (const component of cycles(graph))
    findings.push({
      kind: 'cycle',
      text: `import cycle (type-only and dynamic imports count): ${component.join(', ')}`,
    });
  return findings;
}

/** The rows of docs/architecture.md's layer table, as LAYERS says them (the doc's test compares). */
export function layersTableRows(layers = LAYERS): string[] {
  return layers.map((l) => `| ${l.name} | ${l.paths.map((p) => `\`${p}\``).join(', ')} | ${l.holds} |`);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const findings = checkImports(readSources(process.cwd()));
  for (const f of findings) console.error(`import-graph: ${f.text}`);
  if (findings.length > 0) process.exit(1);
  console.log('import-graph: no cycle, no import from a lower layer to a higher one');
}
