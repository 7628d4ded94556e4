import { describe, expect, it } from 'vitest';
import { rowTime } from '../../src/pipelines/cdi/rows.js';

/*
 * rowTime takes a canonical UTC time (as a table source prints UPDATED_AT) without going through Date; whatever the
 * path, the result must be what Date makes of the value, to the millisecond.
 */

const viaDate = (v: string) => {
  const d = new Date(v);
  return Number.isNaN(d.getTime()) ? { refused: 'UPDATED_AT is not a time' } : d.toISOString();
};
const pad = (n: number, w: number) => String(n).padStart(w, '0');

describe('rowTime', () => {
  it('gives what Date gives for every day of every month, leap years, both precisions, and the edges of a day', () => {
    let checked = 0;
    for (const year of [0, 1, 1900, 2000, 2024, 2026, 9999])
      for (let month = 1; month <= 12; month++)
        for (let day = 1; day <= 31; day++)
          for (const [clock, fraction] of [
            ['00:00:00', '000'],
            ['23:59:59', '999999'],
            ['12:34:56', '789012'],
            ['07:08:09', '010'],
          ] as const) {
            const value = `${pad(year, 4)}-${pad(month, 2)}-${pad(day, 2)}T${clock}.${fraction}Z`;
            expect(rowTime(value, 'fallback'), value).toEqual(viaDate(value));
            checked++;
          }
    expect(checked).toBe(7 * 12 * 31 * 4);
  });

  it('leaves every other form to Date: offsets, no fraction, other precisions, impossible times, junk', () => {
    for (const value of [
      '2026-01-01T00:00:00Z',
      '2026-01-01T00:00:00.1Z',
      '2026-01-01T00:00:00.12345Z',
      '2026-01-01T00:00:00.1234567Z',
      '2026-01-01T02:00:00.000000+02:00',
      '2026-01-01 00:00:00.000000Z',
      '2026-01-01',
      '2026-13-01T00:00:00.000000Z',
      '2026-01-01T24:00:00.000000Z',
      '2026-01-01T23:60:00.000000Z',
      '2026-02-30T00:00:00.000000Z',
      '+002026-01-01T00:00:00.000Z',
      'yesterday',
    ])
      expect(rowTime(value, 'fallback'), value).toEqual(viaDate(value));
    expect(rowTime('', 'fallback')).toBe('fallback');
    expect(rowTime(null, 'fallback')).toBe('fallback');
    expect(rowTime(new Date(Date.UTC(2026, 0, 2)), 'fallback')).toBe('2026-01-02T00:00:00.000Z');
  });
});
