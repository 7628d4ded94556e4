/**
 * What JSON.parse would hide or build anyway in the text of a request body: nesting deeper than the limit
 * (JSON.parse builds any depth, and code reading the value afterwards may recurse), a key given twice in one object
 * (JSON.parse keeps the last one: the data of the first would be dropped without a word), and the keys that name an
 * object's prototype in JavaScript (`__proto__`, and `prototype` inside a `constructor` object), which cannot be kept
 * as plain keys safely by code that copies objects.
 *
 * Checked in two steps, so that a good body costs little more than JSON.parse (BENCHMARKS.md, "Request bodies"):
 * `scanJsonText` counts the keys of the text as it checks its depth (every colon outside a string is one key), and
 * `parsedKeys` counts those of the parsed value; only when the counts differ, or a prototype key was parsed, does
 * `jsonKeyProblem` scan the text again, keeping every object's keys, to say which key and where.
 *
 * The scans trust nothing: on text that is not JSON they may stop anywhere or report nothing, and the parse says what
 * is wrong. Key problems are reported only for text JSON.parse accepts.
 */

export const TOO_DEEP = -1;

/** The number of keys in a JSON text, or TOO_DEEP when it nests arrays and objects deeper than `maxDepth`. */
export function scanJsonText(text: string, maxDepth: number): number {
  let depth = 0;
  let keys = 0;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      if (end === -1) return keys;
      i = end - 1;
    } else if (c === 0x3a /* : */) {
      keys++;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (++depth > maxDepth) return TOO_DEEP;
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      depth--;
    }
  }
  return keys;
}

/** The keys of a parsed JSON value, and whether one of them names a prototype (then the count is meaningless). */
export function parsedKeys(value: unknown): { keys: number; prototype: boolean } {
  const found = { keys: 0, prototype: false };
  const visit = (v: unknown): void => {
    if (v === null || typeof v !== 'object' || found.prototype) return;
    if (Array.isArray(v)) {
      for (const item of v) visit(item);
      return;
    }
    // JSON.parse makes plain objects with own data properties only: for-in sees exactly those.
    for (const key in v) {
      found.keys++;
      const inner = (v as Record<string, unknown>)[key];
      if (
        key === '__proto__' ||
        (key === 'constructor' && inner !== null && typeof inner === 'object' && Object.hasOwn(inner, 'prototype'))
      ) {
        found.prototype = true;
        return;
      }
      visit(inner);
    }
  };
  visit(value);
  return found;
}

export type JsonKeyProblem =
  | { kind: 'too-deep' }
  | { kind: 'duplicate'; key: string; path: string }
  | { kind: 'prototype'; key: string; path: string };

interface Frame {
  /** Keys seen so far (objects only). */
  keys: Set<string> | null;
  /** The key whose value is being read (objects), or the index of the element (arrays). */
  at: string | number;
  expectKey: boolean;
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;

/** Where a key is, as the error messages of the API say it: `body.events[0].name`. */
function pathOf(stack: Frame[], root: string): string {
  let path = root;
  for (const frame of stack.slice(0, -1)) {
    path +=
      typeof frame.at === 'number'
        ? `[${frame.at}]`
        : /^[A-Za-z_$][\w$]*$/.test(frame.at)
          ? `.${frame.at}`
          : `[${JSON.stringify(frame.at)}]`;
  }
  return path;
}

/** The index just past the closing quote of the string that opens at `start`, or -1 when it never closes. */
function stringEnd(text: string, start: number): number {
  let end = text.indexOf('"', start + 1);
  while (end !== -1) {
    let slashes = 0;
    while (text.charCodeAt(end - 1 - slashes) === BACKSLASH) slashes++;
    if (slashes % 2 === 0) return end + 1;
    end = text.indexOf('"', end + 1);
  }
  return -1;
}

/** The first key problem of a JSON text (or its depth), with the key's path, or null. `root` names the whole value. */
export function jsonKeyProblem(text: string, maxDepth: number, root = 'body'): JsonKeyProblem | null {
  const stack: Frame[] = [];
  let found: JsonKeyProblem | null = null;
  const n = text.length;
  for (let i = 0; i < n; i++) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      if (end === -1) return found;
      const frame = stack[stack.length - 1];
      if (frame?.expectKey && !found) {
        const raw = text.slice(i + 1, end - 1);
        let key = raw;
        if (raw.includes('\\')) {
          try {
            key = JSON.parse(text.slice(i, end)) as string;
          } catch {
            return found;
          }
        }
        const parent = stack[stack.length - 2];
        if (key === '__proto__' || (key === 'prototype' && parent?.at === 'constructor')) {
          found = { kind: 'prototype', key, path: pathOf(stack, root) };
        } else if (frame.keys!.has(key)) {
          found = { kind: 'duplicate', key, path: pathOf(stack, root) };
        }
        frame.keys!.add(key);
        frame.at = key;
        frame.expectKey = false;
      }
      i = end - 1;
    } else if (c === 0x7b /* { */ || c === 0x5b /* [ */) {
      if (stack.length >= maxDepth) return { kind: 'too-deep' };
      const object = c === 0x7b;
      stack.push({ keys: object ? new Set() : null, at: object ? '' : 0, expectKey: object });
    } else if (c === 0x7d /* } */ || c === 0x5d /* ] */) {
      stack.pop();
    } else if (c === 0x2c /* , */) {
      const frame = stack[stack.length - 1];
      if (frame === undefined) continue;
      if (frame.keys) frame.expectKey = true;
      else frame.at = (frame.at as number) + 1;
    }
  }
  return found;
}

/** The refusal's words for a key problem: the key, where it is, and why. */
export function describeKeyProblem(problem: Exclude<JsonKeyProblem, { kind: 'too-deep' }>): string {
  const key = JSON.stringify(problem.key);
  if (problem.kind === 'duplicate') {
    return `the key ${key} appears more than once in ${problem.path}; each key may appear once in an object (JSON parsers keep only one of them, so the data of the others would be lost)`;
  }
  return `the key ${key} in ${problem.path} is not accepted: it names an object's prototype in JavaScript, so it cannot be kept as a plain key; rename it`;
}
