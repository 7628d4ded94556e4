import { describe, expect, it } from 'vitest';
import { jsonKeyProblem, parsedKeys, scanJsonText, TOO_DEEP } from '../../src/platform/lib/json-keys.js';

/**
 * The two-step key check of request bodies (src/platform/lib/json-keys.ts): the counts agree on every body JSON.parse
 * keeps whole, whatever its strings hold, and disagree (then the slow scan names the key) exactly when a key was
 * dropped.
 */

const agree = (text: string) => {
  const parsed = parsedKeys(JSON.parse(text));
  return !parsed.prototype && parsed.keys === scanJsonText(text, 64);
};

describe('the key counts', () => {
  it('agree on bodies whose strings hold colons, quotes, escapes and brackets', () => {
    for (const text of [
      '{}',
      '[]',
      '"a:b"',
      '{"a:b": "c:d", "e": [1, {"f": "}:{"}]}',
      '{"q\\"uote": "x\\\\", "k": "\\\\\\":"}',
      '{"events": [{"name": "a", "properties": {"url": "https://x.test:8080/a?b=c"}}, {"name": "b"}]}',
      '{"\\u0061": 1, "b": {"a": 2}}',
      '{"constructor": "Ford", "prototype": true, "x": {"constructor": {"make": "y"}}}',
    ]) {
      expect(agree(text), text).toBe(true);
      expect(jsonKeyProblem(text, 64), text).toBeNull();
    }
  });

  it('disagree when JSON.parse dropped a key, and the slow scan names it and its path', () => {
    const cases: Array<[string, string, string]> = [
      ['{"a": 1, "a": 2}', 'a', 'body'],
      ['{"events": [{"name": "x"}, {"name": "y", "time": 1, "name": "z"}]}', 'name', 'body.events[1]'],
      ['{"a": {"b": 1, "\\u0062": 2}}', 'b', 'body.a'],
      ['{"x y": [[{"k": 1, "k": 1}]]}', 'k', 'body["x y"][0][0]'],
    ];
    for (const [text, key, path] of cases) {
      expect(agree(text), text).toBe(false);
      expect(jsonKeyProblem(text, 64), text).toEqual({ kind: 'duplicate', key, path });
    }
  });

  it('flags prototype keys, however spelt', () => {
    for (const [text, key, path] of [
      ['{"__proto__": {"admin": true}}', '__proto__', 'body'],
      ['{"a": [{"\\u005f\\u005fproto__": 1}]}', '__proto__', 'body.a[0]'],
      ['{"c": {"constructor": {"prototype": {"x": 1}}}}', 'prototype', 'body.c.constructor'],
    ] as const) {
      expect(agree(text), text).toBe(false);
      expect(jsonKeyProblem(text, 64), text).toEqual({ kind: 'prototype', key, path });
    }
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('says too deep past the limit, counting only brackets outside strings', () => {
    expect(scanJsonText('[[[1]]]', 3)).toBe(0);
    expect(scanJsonText('[[[[1]]]]', 3)).toBe(TOO_DEEP);
    expect(scanJsonText('{"a": "[[[[[["}', 1)).toBe(1);
    expect(jsonKeyProblem('[[[[1]]]]', 3)).toEqual({ kind: 'too-deep' });
  });
});
