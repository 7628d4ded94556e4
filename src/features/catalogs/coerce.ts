import type { CatalogFieldType } from './fields.js';

export type Coerced = { ok: true; value: unknown } | { ok: false; reason: string };

const NUMBER_TEXT = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?$/;
// Date, or date and time with an optional fraction and an optional offset (none means UTC).
const TIME_TEXT =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}:?\d{2})?)?$/i;
// PostgreSQL's jsonb cannot hold NUL or an unpaired surrogate: refuse them here rather than fail after accepting.
const UNSTORABLE = /\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/** True when a string can be stored as it is (no NUL, no unpaired surrogate). */
export const isStorableText = (s: string): boolean => !UNSTORABLE.test(s);

const ok = (value: unknown): Coerced => ({ ok: true, value });
const fail = (reason: string): Coerced => ({ ok: false, reason });

function kindOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

function toText(value: unknown): Coerced {
  if (typeof value === 'string')
    return isStorableText(value) ? ok(value) : fail('text contains NUL or an unpaired surrogate');
  if (typeof value === 'number') return ok(String(value));
  if (typeof value === 'boolean') return ok(value ? 'true' : 'false');
  return fail(`a ${kindOf(value)} is not a string`);
}

function toNumber(value: unknown): Coerced {
  if (typeof value === 'number') return ok(value);
  if (typeof value === 'string') {
    const text = value.trim();
    if (NUMBER_TEXT.test(text)) {
      const n = Number(text);
      if (Number.isFinite(n)) return ok(n);
    }
    return fail('text is not a decimal number');
  }
  return fail(`a ${kindOf(value)} is not a number`);
}

function toBoolean(value: unknown): Coerced {
  if (typeof value === 'boolean') return ok(value);
  if (typeof value === 'string') {
    const text = value.trim().toLowerCase();
    if (text === 'true') return ok(true);
    if (text === 'false') return ok(false);
    return fail('text is not "true" or "false"');
  }
  return fail(`a ${kindOf(value)} is not a boolean`);
}

/** ISO 8601 text to `YYYY-MM-DDTHH:MM:SS.mmmZ` (UTC, milliseconds), so stored times compare as strings. */
export function toTime(value: unknown): Coerced {
  if (typeof value !== 'string') return fail(`a ${kindOf(value)} is not an ISO 8601 time`);
  const m = TIME_TEXT.exec(value.trim());
  if (!m) return fail('text is not an ISO 8601 date or date-time');
  const [, y, mo, d, h = '0', mi = '0', s = '0', frac = '', zone] = m;
  const year = Number(y);
  const month = Number(mo);
  const day = Number(d);
  const hour = Number(h);
  const minute = Number(mi);
  const second = Number(s);
  if (month < 1 || month > 12 || hour > 23 || minute > 59 || second > 59) return fail('date or time out of range');
  const ms = Number(frac.padEnd(3, '0').slice(0, 3));
  const base = new Date(0);
  base.setUTCFullYear(year, month - 1, day);
  base.setUTCHours(hour, minute, second, ms);
  // setUTCFullYear rolls 2021-02-30 over to March: a rolled date is not a date.
  if (base.getUTCFullYear() !== year || base.getUTCMonth() !== month - 1 || base.getUTCDate() !== day) {
    return fail('no such calendar date');
  }
  let offsetMinutes = 0;
  if (zone && zone.toUpperCase() !== 'Z') {
    const digits = zone.slice(1).replace(':', '');
    const oh = Number(digits.slice(0, 2));
    const om = Number(digits.slice(2, 4));
    if (oh > 23 || om > 59) return fail('offset out of range');
    offsetMinutes = (zone.startsWith('-') ? -1 : 1) * (oh * 60 + om);
  }
  const t = base.getTime() - offsetMinutes * 60_000;
  const date = new Date(t);
  if (Number.isNaN(t) || date.getUTCFullYear() < 0 || date.getUTCFullYear() > 9999) return fail('time out of range');
  return ok(date.toISOString());
}

function toObject(value: unknown): Coerced {
  if (value !== null && typeof value === 'object' && !Array.isArray(value)) return ok(value);
  return fail(`a ${kindOf(value)} is not an object`);
}

function toArray(value: unknown): Coerced {
  if (!Array.isArray(value)) return fail(`a ${kindOf(value)} is not an array`);
  const out: string[] = [];
  for (let i = 0; i < value.length; i++) {
    const element: unknown = value[i];
    if (typeof element === 'object' || element === undefined)
      return fail(`element ${i} is a ${kindOf(element)}; arrays hold strings`);
    const text = toText(element);
    if (!text.ok) return fail(`element ${i}: ${text.reason}`);
    out.push(text.value as string);
  }
  return ok(out);
}

/**
 * Converts a value sent for a field to the field's type, or says why it cannot. `null` is kept for every type (the
 * field is present without a value). Object values are checked for keys and depth elsewhere, not here.
 */
export function coerceValue(type: CatalogFieldType, value: unknown): Coerced {
  if (value === null) return ok(null);
  switch (type) {
    case 'string':
      return toText(value);
    case 'number':
      return toNumber(value);
    case 'boolean':
      return toBoolean(value);
    case 'time':
      return toTime(value);
    case 'object':
      return toObject(value);
    case 'array':
      return toArray(value);
  }
}
