/**
 * Times as the event object takes them: ISO 8601, or the spec's `yyyy-MM-dd'T'HH:mm:ss:SSSZ` (milliseconds after a
 * colon, an RFC 822 zone such as `-0700`). Parsed by hand because `Date.parse` accepts far more than either format
 * and reads a zone-less time in the process's local zone.
 */

// ISO 8601 extended format: a date, optionally a time (minutes, seconds, a fraction), optionally a zone.
const ISO = /^(\d{4})-(\d{2})-(\d{2})(?:T(\d{2}):(\d{2})(?::(\d{2})(?:[.,](\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?)?$/;
// The spec's own format: `2013-07-23T12:34:56:789-0700` (Z here is the RFC 822 zone; a literal Z is taken too).
const SPEC = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2}):(\d{3})(Z|[+-]\d{4})$/;

function zoneMinutes(zone: string | undefined): number {
  if (!zone || zone === 'Z') return 0;
  const sign = zone[0] === '-' ? -1 : 1;
  const digits = zone.slice(1).replace(':', '');
  const hours = Number(digits.slice(0, 2));
  const minutes = digits.length > 2 ? Number(digits.slice(2, 4)) : 0;
  if (hours > 23 || minutes > 59) return Number.NaN;
  return sign * (hours * 60 + minutes);
}

function build(m: RegExpExecArray, fraction: string | undefined, zone: string | undefined): number | null {
  const [y, mo, d] = [Number(m[1]), Number(m[2]), Number(m[3])];
  const [h, mi, s] = [Number(m[4] ?? 0), Number(m[5] ?? 0), Number(m[6] ?? 0)];
  if (mo < 1 || mo > 12 || d < 1 || d > new Date(Date.UTC(y, mo, 0)).getUTCDate()) return null;
  if (h > 23 || mi > 59 || s > 59) return null;
  const offset = zoneMinutes(zone);
  if (Number.isNaN(offset)) return null;
  const ms = fraction ? Math.floor(Number(`0.${fraction}`) * 1000) : 0;
  const utc = Date.UTC(y, mo - 1, d, h, mi, s, ms);
  // Date.UTC maps years 0-99 onto 1900-1999; correct it rather than shift the instant.
  const date = new Date(utc);
  if (y < 100) date.setUTCFullYear(y);
  const t = date.getTime() - offset * 60_000;
  return Number.isFinite(t) ? t : null;
}

/** Epoch milliseconds of an event time, or null when the text is in neither accepted format. */
export function parseEventTime(text: string): number | null {
  if (text.length > 40) return null;
  let m = ISO.exec(text);
  if (m) return build(m, m[7], m[8]);
  m = SPEC.exec(text);
  if (m) return build(m, m[7], m[8]);
  return null;
}

// What JavaScript's toISOString writes, and what most clients send: already canonical when it names a real time.
const CANONICAL = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})\.\d{3}Z$/;
const DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

/** The canonical form of an event time (see toIso), or null when the text is in neither accepted format. */
export function canonicalEventTime(text: string): string | null {
  const m = CANONICAL.exec(text);
  if (m) {
    const [y, mo, d, h, mi, s] = [Number(m[1]), Number(m[2]), Number(m[3]), Number(m[4]), Number(m[5]), Number(m[6])];
    const leap = y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0);
    if (
      mo >= 1 &&
      mo <= 12 &&
      d >= 1 &&
      d <= (mo === 2 && !leap ? 28 : DAYS[mo - 1]!) &&
      h <= 23 &&
      mi <= 59 &&
      s <= 59
    )
      return text;
    return null;
  }
  const ms = parseEventTime(text);
  return ms === null ? null : toIso(ms);
}

/** True when a string property value is a date in either accepted format (the spec treats those as dates). */
export function isDateString(text: string): boolean {
  // Cheap pre-check: every accepted form starts with YYYY-MM-DD.
  if (text.length < 10 || text.length > 40 || text.charCodeAt(4) !== 45 || text.charCodeAt(7) !== 45) return false;
  return parseEventTime(text) !== null;
}

/** The canonical stored form: `YYYY-MM-DDTHH:MM:SS.mmmZ`, which compares correctly as a string. */
export function toIso(ms: number): string {
  return new Date(ms).toISOString();
}
