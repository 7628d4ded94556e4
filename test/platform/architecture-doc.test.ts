import { existsSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { layersTableRows } from '../../scripts/import-graph.js';
import { repoRoot } from '../helpers/cli.js';

const DOC = 'docs/architecture.md';
const doc = readFileSync(path.join(repoRoot, DOC), 'utf8');

/** Folders whose paths the doc names in backticks (`src/pipelines/exports/holds.ts`), and the top-level files it may name. */
const PATH_PREFIX = /^(?:src|jobs|test|docs|scripts|bench|tools|workspace)\//;
const TOP_LEVEL_FILES = new Set([
  'README.md',
  'BENCHMARKS.md',
  'package.json',
  'package-lock.json',
  'eslint.config.js',
  'tsconfig.json',
  'tsconfig.build.json',
  'vitest.config.ts',
  'docker-compose.yml',
  '.prettierrc.json',
]);
/** A pattern rather than a path (`src/platform/queues/<queue>.ts`): only the folder before its first placeholder must exist. */
const PLACEHOLDER = /[<>*{}[\]]/;
/** A function, as the doc writes one: `runShard()`. */
const FUNCTION = /^([A-Za-z_$][\w$]*)\(\)$/;
/** The walks, and functions each must name: the entry points a newcomer follows (they stay when helpers are cut). */
const WALKS = [
  {
    heading: /^## Walk 1\b.*track/i,
    entries: ['acceptTrack', 'stageObjects', 'drainThrough', 'applyIsolating', 'applyObjects', 'writeProfilesLogged'],
  },
  { heading: /^## Walk 2\b.*CDI row/i, entries: ['runSync', 'syncTable', 'rowItem', 'commitLanes', 'applyObjects'] },
  {
    heading: /^## Walk 3\b.*users\/delete/i,
    entries: ['acceptDelete', 'stageCommands', 'applyNextCommand', 'applyCommands', 'deleteProfiles'],
  },
  { heading: /^## Walk 4\b.*segment export/i, entries: ['createExport', 'runShard', 'writeParts', 'finishExport'] },
  {
    heading: /^## Walk 5\b.*changes_since/i,
    entries: ['resolveExportBase', 'chooseIncrementalMethod', 'forgetExportBases'],
  },
];
/** The walks that must go down the layers without coming back to a folder they left (issue 41). */
const DESCENDING_WALKS = 3;

/** A paragraph, list item, heading or table row of the doc (fenced code left out), with its first line's number. */
interface Block {
  line: number;
  text: string;
}

function blocksOf(markdown: string): Block[] {
  const blocks: Block[] = [];
  let current: Block | null = null;
  let fenced = false;
  markdown.split('\n').forEach((text, i) => {
    if (/^\s*```/.test(text)) {
      fenced = !fenced;
      current = null;
      return;
    }
    if (fenced || text.trim() === '') {
      current = null;
      return;
    }
    const starts = current === null || /^(?:#|\|)/.test(text) || /^\s*(?:[-*+]|\d+[.)])\s/.test(text);
    if (starts) blocks.push((current = { line: i + 1, text }));
    else current!.text += `\n${text}`;
    if (text.startsWith('#') || text.startsWith('|')) current = null;
  });
  return blocks;
}

const codeSpans = (text: string) => [...text.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);

/** A block's code spans, each with the number of the line it is on. */
const codeSpansOf = (block: Block) =>
  [...block.text.matchAll(/`([^`]+)`/g)].map((m) => ({
    span: m[1]!,
    line: block.line + (block.text.slice(0, m.index).match(/\n/g)?.length ?? 0),
  }));

/** The repo path a code span names (without its `#anchor`), or null when it names none. */
function repoPathOf(span: string): { path: string; anchor?: string } | null {
  const [p, anchor] = span.split('#', 2) as [string, string | undefined];
  if (!PATH_PREFIX.test(p) && !TOP_LEVEL_FILES.has(p)) return null;
  return anchor === undefined ? { path: p } : { path: p, anchor };
}

const onDisk = (p: string) => path.join(repoRoot, p);
const isFile = (p: string) => existsSync(onDisk(p)) && statSync(onDisk(p)).isFile();

/** Why a named path is wrong, or null: it must exist (a folder when it ends in '/'), and an anchor must be a heading. */
function pathProblem(p: string, anchor: string | undefined): string | null {
  const at = p.search(PLACEHOLDER);
  if (at >= 0) {
    const folder = p.slice(0, p.lastIndexOf('/', at) + 1);
    return existsSync(onDisk(folder)) ? null : `the folder ${folder} of the pattern ${p} does not exist`;
  }
  if (!existsSync(onDisk(p))) return `${p} does not exist`;
  if (p.endsWith('/') && !statSync(onDisk(p)).isDirectory()) return `${p} is not a folder`;
  if (anchor !== undefined && !headingSlugs(readFileSync(onDisk(p), 'utf8')).has(anchor))
    return `${p} has no heading #${anchor}`;
  return null;
}

/** GitHub's anchors of a Markdown file's headings: lower case, punctuation dropped, each space a hyphen. */
function headingSlugs(markdown: string): Set<string> {
  return new Set(
    [...markdown.matchAll(/^#{1,6} +(.+?) *$/gm)].map((m) =>
      m[1]!
        .replace(/`/g, '')
        .toLowerCase()
        .replace(/[^\p{L}\p{N} _-]/gu, '')
        .replace(/ /g, '-'),
    ),
  );
}

/** Whether TypeScript source declares `name` as a function, a const/let/var (a plugin, a job) or a class. */
function declares(source: string, name: string): boolean {
  const n = name.replace(/\$/g, '\\$');
  return new RegExp(`\\bfunction\\*?\\s+${n}\\s*[<(]|\\b(?:const|let|var)\\s+${n}\\s*[:=]|\\bclass\\s+${n}\\b`).test(
    source,
  );
}

/** The text of the level-2 section whose heading matches, up to the next level-2 heading. */
function section(heading: RegExp): string | undefined {
  const lines = doc.split('\n');
  const start = lines.findIndex((l) => heading.test(l));
  if (start < 0) return undefined;
  const end = lines.findIndex((l, i) => i > start && l.startsWith('## '));
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

const blocks = blocksOf(doc);
const named = blocks.flatMap((b) =>
  codeSpansOf(b).flatMap(({ span, line }) => {
    const p = repoPathOf(span);
    return p ? [{ ...p, line }] : [];
  }),
);

describe(`${DOC} stays true`, () => {
  it('names only paths that exist', () => {
    const problems = named.flatMap(({ path: p, anchor, line }) => {
      const problem = pathProblem(p, anchor);
      return problem ? [`${DOC}:${line}: ${problem}`] : [];
    });
    expect(problems).toEqual([]);
  });

  it('names enough paths for that to mean something', () => {
    expect(new Set(named.map((n) => n.path)).size).toBeGreaterThanOrEqual(25);
    for (const walk of WALKS) {
      const files = new Set(
        codeSpans(section(walk.heading) ?? '').flatMap((s) => {
          const p = repoPathOf(s);
          return p && !p.path.endsWith('/') ? [p.path] : [];
        }),
      );
      expect(files.size, `files named by the section ${walk.heading}`).toBeGreaterThanOrEqual(8);
    }
  });

  it('has the layers, the three walks and where to look next', () => {
    expect(doc).toMatch(/^## Layers\b/m);
    for (const walk of WALKS) expect(section(walk.heading), `a section headed ${walk.heading}`).toBeDefined();
    expect(doc).toMatch(/^## Where to look next/m);
    expect(doc).toMatch(/^## How the tests are organised/m);
  });

  it('follows each walk through its entry functions', () => {
    for (const walk of WALKS) {
      const spans = new Set(codeSpans(section(walk.heading) ?? ''));
      for (const name of walk.entries) expect(spans.has(`${name}()`), `${name}() in ${walk.heading}`).toBe(true);
    }
  });

  it('goes down the layers in the first walks: no step comes back to a folder the walk has left', () => {
    for (const walk of WALKS.slice(0, DESCENDING_WALKS)) {
      const steps = blocks.filter((b) => /^\d+\.\s/.test(b.text) && (section(walk.heading) ?? '').includes(b.text));
      expect(steps.length, String(walk.heading)).toBeGreaterThanOrEqual(5);
      // The folder of a step is that of the first file it names; a queue job (jobs/) starts the worker's leg.
      const folders = steps.map((b) => {
        const first = codeSpans(b.text)
          .map(repoPathOf)
          .find((p) => p && /\.ts$/.test(p.path));
        return path.dirname(first!.path);
      });
      let left = new Set<string>();
      folders.forEach((folder, i) => {
        if (folder === 'jobs') left = new Set();
        expect(left.has(folder), `${walk.heading} step ${i + 1} comes back to ${folder}`).toBe(false);
        if (i > 0 && folders[i - 1] !== folder) left.add(folders[i - 1]!);
      });
    }
  });

  it('names each function beside a file that declares it', () => {
    const problems: string[] = [];
    let checked = 0;
    for (const block of blocks) {
      const spans = codeSpansOf(block);
      const files = spans.flatMap(({ span }) => {
        const p = repoPathOf(span);
        return p && /\.[cm]?[jt]s$/.test(p.path) && isFile(p.path) ? [p.path] : [];
      });
      for (const { span, line } of spans) {
        const name = FUNCTION.exec(span)?.[1];
        if (!name) continue;
        checked++;
        if (!files.some((f) => declares(readFileSync(onDisk(f), 'utf8'), name)))
          problems.push(
            `${DOC}:${line}: ${name}() is declared in none of the files its paragraph names: ${files.join(', ') || 'none'}`,
          );
      }
    }
    expect(problems).toEqual([]);
    expect(checked).toBeGreaterThanOrEqual(25);
  });

  it('names every trigger of the schema with what it writes', () => {
    const schema = readFileSync(path.join(repoRoot, 'src/platform/db/schema.sql'), 'utf8');
    const triggers = [...schema.matchAll(/^CREATE TRIGGER (\w+) /gm)].map((m) => m[1]!);
    expect(triggers.length).toBeGreaterThanOrEqual(5);
    const section = doc.slice(doc.indexOf('### Triggers'), doc.indexOf('### The folders of `src/`'));
    const rows = section.split('\n').filter((l) => l.startsWith('| `'));
    expect(rows.map((r) => /^\| `(\w+)`/.exec(r)![1]).sort()).toEqual(triggers.sort());
    // Each row says what its trigger writes and where it is defined.
    for (const r of rows) expect(r).toMatch(/\| `src\/platform\/db\/migrations\/\d{4}_\w+\.sql` \|$/);
  });

  it('shows the layers as scripts/import-graph.ts writes them down', () => {
    const table =
      /<!-- layers -->\n\| Layer \| Paths \| Holds \|\n\| --- \| --- \| --- \|\n([\s\S]*?)\n<!-- \/layers -->/.exec(
        doc,
      );
    expect(table?.[1]?.split('\n')).toEqual(layersTableRows());
  });

  it('is wrapped at 120 columns (a table row, which cannot wrap, aside)', () => {
    const long = doc
      .split('\n')
      .flatMap((l, i) => (l.length > 120 && !l.startsWith('|') ? [`${DOC}:${i + 1}: ${l.length} columns`] : []));
    expect(long).toEqual([]);
  });
});
