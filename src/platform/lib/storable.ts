/**
 * What PostgreSQL would refuse to store, found while a request can still be refused. PostgreSQL's text cannot hold
 * U+0000, and its jsonb refuses the `\u0000` escape and an unpaired UTF-16 surrogate (`\ud800` with no low half):
 * a value accepted with one of them fails later, where nobody is left to tell (an ingestion batch retried forever).
 * Nesting is bounded too: JSON.stringify, zod and other recursive code overflow the stack on a value a few thousand
 * levels deep, and JSON.parse happily builds one. Everything here is iterative for the same reason.
 */

/**
 * The deepest nesting of arrays and objects a request body may have, the body itself being level 1. The spec's only
 * nesting bound is a catalog item's value, 50 levels, which sits 3 levels below the body root
 * (`{"items": [{"field": ...}]}`); ingestion holds property and custom attribute values to the same 50 levels (at
 * most 54 in a /users/track body). 64 leaves room for both, and is far below what any recursive code can take.
 */
export const MAX_BODY_DEPTH = 64;

/**
 * Values (a catalog item's field, an event property, a custom attribute) nest at most 50 levels, a value that is an
 * array or object being level 1: the spec's one nesting bound, that of catalog item values (its Limits table), held
 * for properties and custom attributes too, as the spec gives none for these.
 */
export const MAX_VALUE_NESTING = 50;

/** Why a value cannot be stored as it is. */
export type UnstorableKind = 'nul' | 'surrogate' | 'too_deep' | 'not_finite';

export interface Unstorable {
  kind: UnstorableKind;
  /** Where in the checked value: `properties.tags[2]`, `''` for the value itself; keys printable (see `printable`). */
  path: string;
  /** The problem is in the object key that ends the path, not in its value. */
  inKey: boolean;
  /** The offending UTF-16 code unit of a `surrogate` problem. */
  unit?: number;
}

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
const SUSPECT = /[\u0000\ud800-\udfff]/;

/** Whether a string holds a NUL or any surrogate, paired or not: one cheap test, nearly always false. */
function suspect(s: string): boolean {
  // A loop beats a regular expression's call on the short strings that make up most of a request.
  if (s.length > 32) return SUSPECT.test(s);
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c === 0 || (c >= 0xd800 && c <= 0xdfff)) return true;
  }
  return false;
}

/** Why a string cannot be stored (its first NUL, else its first unpaired surrogate), or null when it can. */
export function textProblem(s: string): { kind: 'nul' | 'surrogate'; unit?: number } | null {
  if (!suspect(s)) return null;
  if (s.includes('\u0000')) return { kind: 'nul' };
  const lone = LONE_SURROGATE.exec(s);
  return lone ? { kind: 'surrogate', unit: lone[0].charCodeAt(0) } : null;
}

/** True when a string can be stored as it is in PostgreSQL text and jsonb. */
export const isStorableText = (s: string): boolean => textProblem(s) === null;

const UNPRINTABLE = new RegExp(`\\u0000|${LONE_SURROGATE.source}`, 'g');

/** A key or value as it may be shown in a message: NUL and lone surrogates escaped, at most 60 characters. */
export function printable(s: string): string {
  const shown = s.replace(UNPRINTABLE, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
  if (shown.length <= 60) return shown;
  // Never cut between the halves of a pair: the cut would leave the very thing escaped above.
  const high = shown.charCodeAt(56);
  return `${shown.slice(0, high >= 0xd800 && high <= 0xdbff ? 56 : 57)}...`;
}

export interface StorableOptions {
  /** Deepest nesting allowed, the checked value being level 1 when it is an array or object. */
  maxDepth: number;
  /** Refuse numbers JSON.parse made infinite (`1e999`): they would be written as null. */
  finiteNumbers?: boolean;
}

interface Frame {
  value: object;
  depth: number;
  parent: Frame | null;
  key: string | number | null;
}

function pathOf(frame: Frame | null, last: string | number | null): string {
  const keys: Array<string | number> = last === null ? [] : [last];
  for (let f = frame; f !== null && f.key !== null; f = f.parent) keys.push(f.key);
  let path = '';
  for (let i = keys.length - 1; i >= 0; i--) {
    const k = keys[i]!;
    path += typeof k === 'number' ? `[${k}]` : `${path === '' ? '' : '.'}${printable(k)}`;
    // A path down a deeply nested value would be as long as the value: the start says where.
    if (path.length > 120) return `${path.slice(0, 117)}...`;
  }
  return path;
}

/**
 * The first value in a parsed JSON value (a string or key with NUL or an unpaired surrogate, nesting deeper than
 * `maxDepth`, with `finiteNumbers` a non-finite number) that PostgreSQL would refuse, with its path; null when
 * there is none. Walks with its own stack, never deeper than `maxDepth`, whatever the value's depth.
 */
export function findUnstorable(value: unknown, options: StorableOptions): Unstorable | null {
  if (value === null || typeof value !== 'object') return scalarProblem(value, options, null, null);
  if (options.maxDepth < 1) return { kind: 'too_deep', path: '', inKey: false };
  const stack: Frame[] = [{ value, depth: 1, parent: null, key: null }];
  const visit = (frame: Frame, key: string | number, v: unknown): Unstorable | null => {
    if (v !== null && typeof v === 'object') {
      if (frame.depth >= options.maxDepth) return { kind: 'too_deep', path: pathOf(frame, key), inKey: false };
      stack.push({ value: v, depth: frame.depth + 1, parent: frame, key });
      return null;
    }
    // Most values pass the first, cheap test.
    if (typeof v === 'string' ? !suspect(v) : typeof v !== 'number' || Number.isFinite(v)) return null;
    return scalarProblem(v, options, frame, key);
  };
  while (stack.length > 0) {
    const frame = stack.pop()!;
    if (Array.isArray(frame.value)) {
      const list = frame.value as unknown[];
      for (let i = 0; i < list.length; i++) {
        const found = visit(frame, i, list[i]);
        if (found) return found;
      }
      continue;
    }
    const record = frame.value as Record<string, unknown>;
    // Parsed JSON: every enumerable key is an own one, and for-in spares the array Object.keys would build.
    for (const key in record) {
      if (suspect(key)) {
        const p = textProblem(key);
        if (p) return { kind: p.kind, path: pathOf(frame, key), inKey: true, unit: p.unit };
      }
      const found = visit(frame, key, record[key]);
      if (found) return found;
    }
  }
  return null;
}

function scalarProblem(
  v: unknown,
  options: StorableOptions,
  frame: Frame | null,
  key: string | number | null,
): Unstorable | null {
  if (typeof v === 'string') {
    const p = textProblem(v);
    return p ? { kind: p.kind, path: pathOf(frame, key), inKey: false, unit: p.unit } : null;
  }
  if (typeof v === 'number' && options.finiteNumbers && !Number.isFinite(v))
    return { kind: 'not_finite', path: pathOf(frame, key), inKey: false };
  return null;
}

/**
 * One sentence for a problem: "'properties.a' contains a NUL character (U+0000), which cannot be stored". `levels`
 * is the nesting limit to name for `too_deep` (the caller's, counted from where its rule counts).
 */
export function describeUnstorable(u: Unstorable, levels: number): string {
  const at = u.path === '' ? 'the value' : `'${u.path}'`;
  const subject = u.inKey ? `the key ${at}` : at;
  switch (u.kind) {
    case 'nul':
      return `${subject} contains a NUL character (U+0000), which cannot be stored`;
    case 'surrogate':
      return `${subject} contains an unpaired UTF-16 surrogate (U+${(u.unit ?? 0).toString(16).toUpperCase()}), which cannot be stored`;
    case 'too_deep':
      return `${at} nests arrays or objects more than ${levels} levels deep`;
    case 'not_finite':
      return `${at} is a number too large to store (beyond ±1.7976931348623157e308)`;
  }
}
