/**
 * Strict parsing of the dates and times clients send. `new Date(text)` accepts too much (and reads a zone-less time
 * in the process's local zone), so we parse by hand: what is accepted is exactly what is documented.
 */

export interface ParsedTime {
  /** The instant. */
  date: Date;
  /** False when only `YYYY-MM-DD` was given. */
  hasTime: boolean;
}

// YYYY-MM-DD, then optionally THH:mm[:ss[.fff]] (also `:fff`, the spec's event time format), then an optional zone:
// Z, ±HH, ±HHMM, ±HH:MM or ±H:MM (the public API's own examples write `-5:00`). A space in place of `+` is a `+`
// decoded from an unencoded query string.
const DATE_TIME =
  /^(\d{4})-(\d{2})-(\d{2})(?:[T ](\d{2}):(\d{2})(?::(\d{2})(?:[.:](\d{1,9}))?)?(Z|[+\- ]\d{1,2}(?::?\d{2})?)?)?$/i;
const DATE_ONLY = /^(\d{4})-(\d{2})-(\d{2})$/;

function validDate(y: number, m: number, d: number): boolean {
  // Date.UTC maps years 0-99 to 1900-1999; no date we store is that old.
  if (y < 1000 || m < 1 || m > 12 || d < 1) return false;
  return d <= new Date(Date.UTC(y, m, 0)).getUTCDate();
}

/** A calendar date `YYYY-MM-DD` as midnight UTC, or null when malformed or not a real date. */
export function parseUtcDate(text: string): Date | null {
  const m = DATE_ONLY.exec(text);
  if (!m) return null;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (!validDate(y, mo, d)) return null;
  return new Date(Date.UTC(y, mo - 1, d));
}

/** An ISO 8601 date or date-time; a time without a zone is UTC. Null when malformed or out of range. */
export function parseIsoTime(text: string): ParsedTime | null {
  const m = DATE_TIME.exec(text);
  if (!m) return null;
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  if (!validDate(y, mo, d)) return null;
  if (m[4] === undefined) return { date: new Date(Date.UTC(y, mo - 1, d)), hasTime: false };
  const h = Number(m[4]);
  const mi = Number(m[5]);
  const s = m[6] === undefined ? 0 : Number(m[6]);
  const ms = m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000);
  if (h > 23 || mi > 59 || s > 59) return null;
  let offsetMinutes = 0;
  const zone = m[8];
  if (zone !== undefined && zone.toUpperCase() !== 'Z') {
    const z = /^([+\- ])(\d{1,2})(?::?(\d{2}))?$/.exec(zone);
    if (!z) return null;
    const oh = Number(z[2]);
    const om = z[3] === undefined ? 0 : Number(z[3]);
    if (oh > 14 || om > 59) return null;
    offsetMinutes = (z[1] === '-' ? -1 : 1) * (oh * 60 + om);
  }
  const utc = Date.UTC(y, mo - 1, d, h, mi, s, ms) - offsetMinutes * 60_000;
  return { date: new Date(utc), hasTime: true };
}

/** `YYYY-MM-DD` of an instant, in UTC. */
export function utcDay(date: Date): string {
  return date.toISOString().slice(0, 10);
}

export const DAY_MS = 86_400_000;
