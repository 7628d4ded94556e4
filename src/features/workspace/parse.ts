import { readFile } from 'node:fs/promises';
import { isNode, LineCounter, parseDocument, type Document } from 'yaml';
import type { z } from 'zod';
import { AppError } from '../../platform/errors.js';
import { WorkspaceFileSchema, type WorkspaceFile } from './schema.js';

export interface FileIssue {
  /** Where in the file, e.g. `workspaces[0].api_keys[1].permissions[2]`; empty for the whole file. */
  path: string;
  message: string;
  /** 1-based line of the offending value (or its nearest parent), when known. */
  line?: number;
}

/** A workspace file that cannot be applied; every issue names its place in the file. */
export class WorkspaceFileError extends AppError {
  constructor(readonly issues: FileIssue[]) {
    super('bad_request', `invalid workspace file:\n${issues.map(formatIssue).join('\n')}`);
    this.name = 'WorkspaceFileError';
  }
}

export function formatIssue(issue: FileIssue): string {
  const where = issue.path || '(file)';
  return `  ${where}${issue.line ? ` (line ${issue.line})` : ''}: ${issue.message}`;
}

/** `['workspaces', 0, 'options', 'meta-viewport-content']` -> `workspaces[0].options["meta-viewport-content"]`. */
export function formatPath(path: readonly PropertyKey[]): string {
  let out = '';
  for (const part of path) {
    if (typeof part === 'number') out += `[${part}]`;
    else if (typeof part === 'string' && /^[A-Za-z_][A-Za-z0-9_]*$/.test(part)) out += out ? `.${part}` : part;
    else out += `[${JSON.stringify(String(part))}]`;
  }
  return out;
}

/**
 * Parses and validates a workspace file's text (YAML 1.2, of which JSON is a subset). Throws WorkspaceFileError
 * listing every problem with its path and line.
 */
export function parseWorkspaceFile(text: string): WorkspaceFile {
  const lineCounter = new LineCounter();
  const doc = parseDocument(text, { lineCounter, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new WorkspaceFileError(
      doc.errors.map((e) => ({
        path: '',
        message: e.message.split('\n')[0]!,
        line: lineCounter.linePos(e.pos[0]).line || undefined,
      })),
    );
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: 1000 });
  } catch (err) {
    throw new WorkspaceFileError([{ path: '', message: (err as Error).message }]);
  }
  if (data === null || data === undefined) throw new WorkspaceFileError([{ path: '', message: 'the file is empty' }]);
  const parsed = WorkspaceFileSchema.safeParse(data);
  if (!parsed.success) throw new WorkspaceFileError(issuesOf(parsed.error.issues, data, doc, lineCounter));
  return parsed.data;
}

export async function readWorkspaceFile(file: string): Promise<WorkspaceFile> {
  return parseWorkspaceFile(await readFile(file, 'utf8'));
}

function issuesOf(issues: readonly z.core.$ZodIssue[], data: unknown, doc: Document, lines: LineCounter): FileIssue[] {
  return flatten(issues, [], data).map((issue) => {
    const path = issue.path as PropertyKey[];
    let message = issue.message;
    if (issue.code === 'unrecognized_keys')
      message = `unknown key${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `"${k}"`).join(', ')}`;
    // The path of an unknown key is its parent's: point at the key itself.
    const target = issue.code === 'unrecognized_keys' ? [...path, issue.keys[0]!] : path;
    return { path: formatPath(target), message, line: lineOf(doc, lines, target) };
  });
}

/**
 * A union (segment filters, destinations) fails as a bare "Invalid input"; report instead the issues of the
 * alternative the author evidently meant: the one whose complaints are about keys present in the file (not about
 * keys of another alternative that are missing), and among those the one with the fewest complaints.
 */
function flatten(issues: readonly z.core.$ZodIssue[], base: PropertyKey[], data: unknown): z.core.$ZodIssue[] {
  return issues.flatMap((issue) => {
    const path = [...base, ...issue.path];
    if (issue.code !== 'invalid_union' || issue.errors.length === 0) return [{ ...issue, path }];
    const scored = issue.errors.map((branch) => {
      const flat = flatten(branch, path, data);
      const missing = flat.filter((i) => !hasPath(data, i.path)).length;
      return { flat, missing, count: flat.length, depth: Math.max(...flat.map((i) => i.path.length)) };
    });
    // Ties go to the alternative that got furthest into the value (an array's element beats "expected a string").
    scored.sort((a, b) => a.missing - b.missing || a.count - b.count || b.depth - a.depth);
    return scored[0]!.flat;
  });
}

function hasPath(data: unknown, path: readonly PropertyKey[]): boolean {
  let node = data;
  for (const key of path) {
    if (node === null || typeof node !== 'object' || !(key in node)) return false;
    node = (node as Record<PropertyKey, unknown>)[key];
  }
  return true;
}

/** The line of the node at `path`, or of its nearest existing ancestor (a missing key reports its parent). */
function lineOf(doc: Document, lines: LineCounter, path: readonly PropertyKey[]): number | undefined {
  for (let n = path.length; n >= 0; n--) {
    const node = doc.getIn(path.slice(0, n) as (string | number)[], true);
    if (isNode(node) && node.range) return lines.linePos(node.range[0]).line || undefined;
  }
  return undefined;
}
