/** Escaping for PostgreSQL's COPY text format, the format every generated line is written in. */

const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };
const NEEDS_ESCAPE = /[\\\n\r\t]/;
/** COPY text format: backslash, newline, carriage return and tab are escaped; null is \N. */
export function copyText(v: string | null | undefined): string {
  if (v === null || v === undefined) return '\\N';
  return NEEDS_ESCAPE.test(v) ? v.replace(/[\\\n\r\t]/g, (c) => COPY_ESCAPES[c]!) : v;
}
/** JSON text inside COPY text: JSON never holds a raw tab or newline (they are \t, \n), so only backslashes double. */
export function copyJson(json: string): string {
  return json.includes('\\') ? json.replaceAll('\\', '\\\\') : json;
}
