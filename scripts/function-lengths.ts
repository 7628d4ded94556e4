/**
 * Every function in src/ (declarations, methods, arrows and function expressions) longer than MAX_FUNCTION_LINES
 * lines, from its first line to its closing brace, as the TypeScript parser sees it. `npm test` runs it and fails when
 * one is listed (issue 33: a reader skims named steps, none over 80 lines). A function nested in another counts for
 * itself and inside its parent: a long callback makes its parent long too.
 *
 *   npx tsx scripts/function-lengths.ts [--all]   # --all: print every function over 40 lines, longest first
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import path from 'node:path';
import ts from 'typescript';

export const MAX_FUNCTION_LINES = 80;

export interface FunctionLength {
  file: string;
  name: string;
  line: number;
  lines: number;
}

function sourceFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((entry) => {
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) return sourceFiles(full);
    return full.endsWith('.ts') && !full.endsWith('.d.ts') ? [full] : [];
  });
}

function nameOf(node: ts.Node): string {
  const named = node as ts.FunctionDeclaration | ts.MethodDeclaration;
  if (named.name && ts.isIdentifier(named.name)) return named.name.text;
  const parent = node.parent;
  if (parent && ts.isVariableDeclaration(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isPropertyAssignment(parent) && ts.isIdentifier(parent.name)) return parent.name.text;
  if (parent && ts.isCallExpression(parent)) return `(callback of ${parent.expression.getText().slice(0, 40)})`;
  return '(anonymous)';
}

export function functionLengths(root: string, dir = 'src'): FunctionLength[] {
  const found: FunctionLength[] = [];
  for (const file of sourceFiles(path.join(root, dir))) {
    const source = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
    const visit = (node: ts.Node) => {
      if (ts.isFunctionLike(node) && 'body' in node && node.body) {
        const start = source.getLineAndCharacterOfPosition(node.getStart(source)).line;
        const end = source.getLineAndCharacterOfPosition(node.getEnd()).line;
        found.push({ file: path.relative(root, file), name: nameOf(node), line: start + 1, lines: end - start + 1 });
      }
      ts.forEachChild(node, visit);
    };
    visit(source);
  }
  return found.sort((a, b) => b.lines - a.lines);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const root = path.resolve(import.meta.dirname, '..');
  const all = process.argv.includes('--all');
  const lengths = functionLengths(root);
  const shown = lengths.filter((f) => f.lines > (all ? 40 : MAX_FUNCTION_LINES));
  for (const f of shown) console.log(`${String(f.lines).padStart(4)} ${f.file}:${f.line} ${f.name}`);
  const over = lengths.filter((f) => f.lines > MAX_FUNCTION_LINES);
  if (over.length > 0) {
    console.error(`function-lengths: ${over.length} function(s) in src/ over ${MAX_FUNCTION_LINES} lines`);
    process.exit(1);
  }
  console.log(`function-lengths: no function in src/ over ${MAX_FUNCTION_LINES} lines (longest: ${lengths[0]?.lines})`);
}
