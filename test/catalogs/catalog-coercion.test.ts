import { describe, expect, it } from 'vitest';
import { coerceValue, toTime } from '../../src/features/catalogs/coerce.js';
import type { CatalogFieldType } from '../../src/features/catalogs/fields.js';

const converts = (type: CatalogFieldType, input: unknown, expected: unknown) => {
  const result = coerceValue(type, input);
  expect(result, `${type} ${JSON.stringify(input)}`).toEqual({ ok: true, value: expected });
};
const refuses = (type: CatalogFieldType, input: unknown) => {
  const result = coerceValue(type, input);
  expect(result.ok, `${type} ${JSON.stringify(input)}`).toBe(false);
  if (!result.ok) expect(result.reason.length).toBeGreaterThan(5);
};

describe('catalog type coercion (the rules of docs/catalogs.md)', () => {
  it('string: strings as they are, numbers and booleans as their text; nothing else', () => {
    converts('string', 'Café ☕', 'Café ☕');
    converts('string', '', '');
    converts('string', 42, '42');
    converts('string', -1.5, '-1.5');
    converts('string', true, 'true');
    converts('string', false, 'false');
    refuses('string', { a: 1 });
    refuses('string', ['a']);
    refuses('string', 'nul\u0000inside');
    refuses('string', 'lone \ud800 surrogate');
  });

  it('number: numbers, and strings holding one decimal number; nothing else', () => {
    converts('number', 3, 3);
    converts('number', -0.25, -0.25);
    converts('number', '12', 12);
    converts('number', ' 12.50 ', 12.5);
    converts('number', '-1e3', -1000);
    converts('number', '.5', 0.5);
    for (const bad of ['', ' ', 'abc', '12abc', '0x10', 'NaN', 'Infinity', '1e400', '1,5', true, false, [1], { n: 1 }])
      refuses('number', bad);
  });

  it('boolean: booleans, and the strings "true" and "false" in any case; not numbers', () => {
    converts('boolean', true, true);
    converts('boolean', false, false);
    converts('boolean', 'TRUE', true);
    converts('boolean', ' false ', false);
    for (const bad of [1, 0, 'yes', 'no', '1', '', [true], { b: true }]) refuses('boolean', bad);
  });

  it('time: ISO 8601 dates and date-times, normalised to UTC with milliseconds; not epochs', () => {
    converts('time', '2021-09-03T09:03:19.967+00:00', '2021-09-03T09:03:19.967Z');
    converts('time', '2021-09-03T11:03:19+02:00', '2021-09-03T09:03:19.000Z');
    converts('time', '2021-09-03T09:03:19.1234567Z', '2021-09-03T09:03:19.123Z');
    converts('time', '2021-09-03 09:03', '2021-09-03T09:03:00.000Z');
    converts('time', '2021-09-03', '2021-09-03T00:00:00.000Z');
    converts('time', '2024-02-29T23:30:00-0130', '2024-03-01T01:00:00.000Z');
    for (const bad of [
      '2021-02-30',
      '2023-02-29',
      '2021-13-01',
      '2021-09-03T24:00:00Z',
      '2021-09-03T09:60',
      '03/09/2021',
      'yesterday',
      '',
      1630659799,
      true,
      {},
      [],
    ]) {
      refuses('time', bad);
    }
    expect(toTime('2021-09-03T09:03:19+25:00').ok).toBe(false);
  });

  it('object: JSON objects only (not arrays, not JSON text)', () => {
    converts('object', { a: { b: [1, 2] } }, { a: { b: [1, 2] } });
    converts('object', {}, {});
    for (const bad of [[], '{"a":1}', 1, true]) refuses('object', bad);
  });

  it('array: arrays of strings; number and boolean elements become strings; no nested values', () => {
    converts('array', ['a', 'b'], ['a', 'b']);
    converts('array', [], []);
    converts('array', ['a', 1, true], ['a', '1', 'true']);
    for (const bad of ['a,b', { 0: 'a' }, [['a']], [{ a: 1 }], [null], 3]) refuses('array', bad);
  });

  it('null is kept for every type', () => {
    for (const type of ['string', 'number', 'boolean', 'time', 'object', 'array'] as const) converts(type, null, null);
  });
});
