/**
 * A JSON object's text as the files hold it, made from PostgreSQL's jsonb output without parsing it into objects:
 * reading `properties` as jsonb (`JSON.parse` in `pg`) only for the encoders to `JSON.stringify` it again cost about a
 * third of a delivery's busy time (bench:events, BENCHMARKS.md).
 */

/** A JSON object's text, written by the encoders as it is (./records.ts, jsonText). */
export class JsonText {
  constructor(readonly text: string) {}
}

const SPACE = 0x20;
const QUOTE = 0x22;
const PLUS = 0x2b;
const MINUS = 0x2d;
const DOT = 0x2e;
const ZERO = 0x30;
const NINE = 0x39;
const COLON = 0x3a;
const UPPER_E = 0x45;
const BACKSLASH = 0x5c;
const LOWER_E = 0x65;

const isDigit = (c: number) => c >= ZERO && c <= NINE;
const inNumber = (c: number) => isDigit(c) || c === DOT || c === MINUS || c === PLUS || c === LOWER_E || c === UPPER_E;
/** An integer JavaScript writes back as the same text: up to 15 digits, no leading zero, not `-0`. */
const PLAIN_INTEGER = /^(?:-?[1-9][0-9]{0,14}|0)$/;

/** A number's text as JSON.stringify writes the value JSON.parse reads from it (null when it is not finite). */
function numberText(token: string): string {
  if (PLAIN_INTEGER.test(token)) return token;
  const value = Number(token);
  return Number.isFinite(value) ? String(value) : 'null';
}

/** The text from `quote` (an opening quote) to its closing quote, inclusive: its index, or -1 when there is none. */
function stringEnd(text: string, quote: number): number {
  let end = quote + 1;
  for (;;) {
    end = text.indexOf('"', end);
    if (end < 0) return -1;
    let backslashes = 0;
    while (text.charCodeAt(end - 1 - backslashes) === BACKSLASH) backslashes++;
    if (backslashes % 2 === 0) return end;
    end++;
  }
}

/**
 * Exactly `JSON.stringify(JSON.parse(text))` for the text PostgreSQL writes of a jsonb value (`{"a": 1, "b": [1.50,
 * 2]}`), which is what the files held when `pg` parsed the column: the spaces jsonb puts after `:` and `,` dropped,
 * and each number written as JavaScript writes it (jsonb keeps `1.50` and writes `1e2` as `100`; JSON.stringify gives
 * `1.5`, and `null` for one too large for a double). Strings are kept as they are: jsonb escapes the characters
 * JSON.stringify escapes, the same way, and holds no lone surrogate. A key that begins with a digit is parsed and
 * written again instead: an object's integer keys come first in JavaScript, whatever their place in the text. Since
 * migration 0450 the log's `properties` are json holding the text JSON.stringify wrote, which this gives back as it
 * is; rows logged before keep jsonb's text.
 */
export function compactJsonb(text: string): string {
  let out = '';
  let copied = 0;
  let i = 0;
  while (i < text.length) {
    const c = text.charCodeAt(i);
    if (c === QUOTE) {
      const end = stringEnd(text, i);
      if (end < 0 || (text.charCodeAt(end + 1) === COLON && isDigit(text.charCodeAt(i + 1))))
        return JSON.stringify(JSON.parse(text));
      i = end + 1;
    } else if (c === SPACE) {
      out += text.slice(copied, i);
      copied = ++i;
    } else if (c === MINUS || isDigit(c)) {
      let end = i + 1;
      while (end < text.length && inNumber(text.charCodeAt(end))) end++;
      const token = text.slice(i, end);
      const written = numberText(token);
      if (written !== token) {
        out += text.slice(copied, i) + written;
        copied = end;
      }
      i = end;
    } else i++;
  }
  return copied === 0 ? text : out + text.slice(copied);
}
