import { MAX_IDENTIFIER_CHARS, isPlainObject } from '../../profiles/validation/validate-rules.js';
import { validateAttributes } from '../../profiles/validation/validate.js';
import type { TrackAttributes } from '../../profiles/tracked-types.js';
import { describeUnstorable, textProblem } from '../../platform/lib/storable.js';
import type { UserRef } from '../../profiles/lookup.js';

/**
 * A Cloud Data Ingestion row, as the public API lays out its warehouse tables (docs/cdi.md): `UPDATED_AT`, one
 * identifier (`EXTERNAL_ID`, `ALIAS_NAME` with `ALIAS_LABEL`, `SERVICE_ID` or `BRAZE_ID`, `EMAIL`, `PHONE`),
 * `PAYLOAD` (an attributes object as /users/track takes it, as JSON text or an object) and, ours, an optional
 * `DELETED`. Column names in any letter case. A row becomes what /users/track's validation makes of the attributes
 * object `{identifier, ...PAYLOAD}` (so the same rules refuse the same values), or a delete.
 */

/** The columns a source may have, lower-cased; any other column is ignored. */
export const CDI_COLUMNS = [
  'updated_at',
  'external_id',
  'alias_name',
  'alias_label',
  'service_id',
  'braze_id',
  'email',
  'phone',
  'payload',
  'deleted',
] as const;
export type CdiColumn = (typeof CDI_COLUMNS)[number];

/** A source row by lower-cased column name; values as the source gave them (text, JSON, booleans, times). */
export type SourceRow = Partial<Record<CdiColumn, unknown>>;

/** Maps a source's own column names to ours (case-insensitively); the first of two spellings wins. */
export function columnMap(names: string[]): Map<CdiColumn, string> {
  const map = new Map<CdiColumn, string>();
  for (const name of names) {
    const lower = name.toLowerCase() as CdiColumn;
    if ((CDI_COLUMNS as readonly string[]).includes(lower) && !map.has(lower)) map.set(lower, name);
  }
  return map;
}

/** A row as keyed by any letter case, brought to our lower-case columns. */
export function normaliseRow(raw: Record<string, unknown>): SourceRow {
  const row: SourceRow = {};
  for (const [name, value] of Object.entries(raw)) {
    const lower = name.toLowerCase();
    if ((CDI_COLUMNS as readonly string[]).includes(lower) && !(lower in row)) row[lower as CdiColumn] = value;
  }
  return row;
}

export type RowItem =
  | { kind: 'attributes'; attributes: TrackAttributes }
  /** A user named by a phone number: resolved to a profile before the attributes can be applied. */
  | { kind: 'phone'; phone: string; payload: Record<string, unknown>; at: string }
  | { kind: 'delete'; target: UserRef }
  /** A phone number no profile has: nothing to update (as an email no profile has); counted as synced. */
  | { kind: 'unmatched' }
  | { kind: 'refused'; reason: string };

const text = (v: unknown): string | undefined =>
  v === null || v === undefined
    ? undefined
    : typeof v === 'string'
      ? v
      : typeof v === 'number' || typeof v === 'bigint'
        ? String(v)
        : undefined;

function truthy(v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  if (typeof v === 'number') return v !== 0;
  if (typeof v === 'string') return ['true', 't', '1', 'yes', 'y'].includes(v.trim().toLowerCase());
  return false;
}

/**
 * UTC to the millisecond or microsecond, as a table source prints UPDATED_AT: such a time is its own canonical form to
 * the millisecond. Days past the 28th are left to Date, which moves an impossible one (February 30th) on into the next
 * month rather than refusing it.
 */
const CANONICAL_UTC =
  /^\d{4}-(?:0[1-9]|1[0-2])-(?:0[1-9]|1\d|2[0-8])T(?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d\.\d{3}(?:\d{3})?Z$/;

/** The row's time as the canonical ISO form the apply compares (last write wins by it), or a refusal. */
export function rowTime(value: unknown, fallback: string): string | { refused: string } {
  if (value === null || value === undefined || value === '') return fallback;
  // Every row of a table source: without a Date and its printing, a tenth of what validating the row costs.
  if (typeof value === 'string' && CANONICAL_UTC.test(value))
    return value.length === 24 ? value : `${value.slice(0, 23)}Z`;
  const date = value instanceof Date ? value : new Date(typeof value === 'number' ? value : String(value));
  if (Number.isNaN(date.getTime())) return { refused: 'UPDATED_AT is not a time' };
  return date.toISOString();
}

/** How far ahead of this service's clock a row's UPDATED_AT may be (clocks drift); beyond, the row is refused. */
export const MAX_AHEAD_MS = 5 * 60_000;

/** The latest UPDATED_AT a row may have now, as rowTime prints times. */
export const latestRowTime = (now = Date.now()): string => new Date(now + MAX_AHEAD_MS).toISOString();

/** Why a row stamped `at` is refused: it is too far ahead (see MAX_AHEAD_MS). */
export const aheadReason = (at: string) =>
  `UPDATED_AT ${at} is more than ${MAX_AHEAD_MS / 60_000} minutes ahead of this service's clock`;

/**
 * Whether a time rowTime printed is later than `latest` (a time of this millennium, as latestRowTime prints it): both
 * are ISO strings of 24 characters for years 0 to 9999, ordered as text; beyond, Date prints a signed six-digit year.
 */
export function isAfter(at: string, latest: string): boolean {
  if (at.length === 24) return at > latest;
  return at.startsWith('+');
}

/** The largest PAYLOAD, in bytes of its JSON text (as the source gives it, or as JSON.stringify writes an object). */
export const MAX_PAYLOAD_BYTES = 1024 * 1024;
/** What a refused row keeps of its payload in the rejects: the first kilobyte. */
export const KEPT_PAYLOAD_BYTES = 1024;
const TOO_LARGE = 'PAYLOAD is larger than 1 MB';

/**
 * A PAYLOAD a source found larger than MAX_PAYLOAD_BYTES before reading it whole (./table-source.ts asks PostgreSQL
 * its size; ./file-source.ts counts a line's bytes): the row is refused, and only the payload's first kilobyte is
 * held, which is what its reject shows.
 */
export class PayloadTooLarge {
  constructor(readonly head: string) {}
  toJSON(): string {
    return this.head;
  }
}

/** The first `max` bytes of a string's UTF-8, never cutting a character (nor a surrogate pair) in two. */
export function headOf(s: string, max = KEPT_PAYLOAD_BYTES): string {
  let cut = s.length > max ? s.slice(0, max) : s;
  if (cut.length < s.length && /[\ud800-\udbff]$/.test(cut)) cut = cut.slice(0, -1);
  const bytes = Buffer.from(cut, 'utf8');
  if (bytes.length <= max) return cut;
  let end = max;
  // Back to the first byte of the character that straddles the limit.
  while (end > 0 && (bytes[end]! & 0xc0) === 0x80) end--;
  return bytes.subarray(0, end).toString('utf8');
}

/**
 * A refused row as its reject shows it: verbatim, but its payload kept to its first kilobyte (of its JSON text for an
 * object), so the rejects hold no more of a row than needed to find it.
 */
export function rejectedRow(row: SourceRow): SourceRow {
  const payload = row.payload;
  if (payload === null || payload === undefined || typeof payload === 'number' || typeof payload === 'boolean')
    return row;
  if (payload instanceof PayloadTooLarge) return { ...row, payload: payload.head };
  const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
  if (text === undefined) return row;
  return text.length <= KEPT_PAYLOAD_BYTES / 3 || Buffer.byteLength(text) <= KEPT_PAYLOAD_BYTES
    ? row
    : { ...row, payload: headOf(text) };
}

function payloadOf(value: unknown): Record<string, unknown> | string {
  if (value === null || value === undefined) return {};
  if (value instanceof PayloadTooLarge) return TOO_LARGE;
  let parsed = value;
  if (typeof value === 'string') {
    if (value.length > MAX_PAYLOAD_BYTES / 3 && Buffer.byteLength(value) > MAX_PAYLOAD_BYTES) return TOO_LARGE;
    try {
      parsed = JSON.parse(value);
    } catch {
      return 'PAYLOAD is not JSON';
    }
  }
  if (!isPlainObject(parsed)) return 'PAYLOAD must be a JSON object of attributes';
  return parsed;
}

const IDENTIFIER_KEYS = ['external_id', 'user_alias', 'service_id', 'braze_id'];

/** The identifier columns, as a refusal names them. */
const IDENTIFIER_COLUMNS = [
  'external_id',
  'alias_name',
  'alias_label',
  'service_id',
  'braze_id',
  'email',
  'phone',
] as const;

/**
 * Why an identifier the row gives cannot be used, whatever the row does with it (attributes, a phone lookup, a
 * delete): /users/track's rules for an identifier, said of the column. A value PostgreSQL cannot store would fail the
 * lookup or the write of the whole batch, again on every retry, instead of this one row.
 */
function identifierProblem(row: SourceRow): string | null {
  for (const column of IDENTIFIER_COLUMNS) {
    const value = text(row[column]);
    if (value === undefined) continue;
    const name = column.toUpperCase();
    if (value === '') return `'${name}' must not be empty`;
    const problem = textProblem(value);
    if (problem) return describeUnstorable({ ...problem, path: name, inKey: false }, 0);
    // UTF-16 units, as /users/track's rule for an identifier counts them.
    if (value.length > MAX_IDENTIFIER_CHARS) return `'${name}' may be at most ${MAX_IDENTIFIER_CHARS} characters`;
  }
  return null;
}

/**
 * What a row does. `fallbackTime` stands for a missing UPDATED_AT (a bucket file has none: the time the file was first
 * read); an UPDATED_AT after `latest` refuses the row (latestRowTime). An identifier is taken from its column, never
 * from PAYLOAD (which must not hold one, as the public API says).
 */
export function rowItem(row: SourceRow, fallbackTime: string, latest: string): RowItem {
  const at = rowTime(row.updated_at, fallbackTime);
  if (typeof at !== 'string') return { kind: 'refused', reason: at.refused };
  if (isAfter(at, latest)) return { kind: 'refused', reason: aheadReason(at) };
  const externalId = text(row.external_id);
  const aliasName = text(row.alias_name);
  const aliasLabel = text(row.alias_label);
  const serviceId = text(row.service_id) ?? text(row.braze_id);
  const email = text(row.email);
  const phone = text(row.phone);
  if ((aliasName === undefined) !== (aliasLabel === undefined))
    return { kind: 'refused', reason: 'ALIAS_NAME and ALIAS_LABEL go together: give both or neither' };
  const named = [
    externalId !== undefined,
    aliasName !== undefined,
    serviceId !== undefined,
    email !== undefined || phone !== undefined,
  ].filter(Boolean).length;
  if (named === 0)
    return {
      kind: 'refused',
      reason: 'the row names no user: give EXTERNAL_ID, ALIAS_NAME and ALIAS_LABEL, SERVICE_ID, EMAIL or PHONE',
    };
  if (named > 1)
    return {
      kind: 'refused',
      reason:
        'the row names its user more than once: give one of EXTERNAL_ID, ALIAS_NAME and ALIAS_LABEL, SERVICE_ID, EMAIL or PHONE',
    };
  const badIdentifier = identifierProblem(row);
  if (badIdentifier !== null) return { kind: 'refused', reason: badIdentifier };

  if (truthy(row.deleted)) {
    const target: UserRef =
      externalId !== undefined
        ? { kind: 'external_id', value: externalId }
        : aliasName !== undefined
          ? { kind: 'user_alias', label: aliasLabel!, name: aliasName }
          : serviceId !== undefined
            ? { kind: 'service_id', value: serviceId }
            : email !== undefined
              ? { kind: 'email', value: email, prioritization: ['most_recently_updated'] }
              : { kind: 'phone', value: phone!, prioritization: ['most_recently_updated'] };
    return { kind: 'delete', target };
  }

  const payload = payloadOf(row.payload);
  if (typeof payload === 'string') return { kind: 'refused', reason: payload };
  const smuggled = IDENTIFIER_KEYS.find((k) => k in payload);
  if (smuggled)
    return {
      kind: 'refused',
      reason: `PAYLOAD must not hold an identifier ('${smuggled}'): name the user in its column`,
    };
  // EMAIL before PHONE when both are given, as the public API does.
  if (email === undefined && phone !== undefined) return { kind: 'phone', phone, payload, at };
  const identifier =
    externalId !== undefined
      ? { external_id: externalId }
      : aliasName !== undefined
        ? { user_alias: { alias_name: aliasName, alias_label: aliasLabel } }
        : serviceId !== undefined
          ? { service_id: serviceId }
          : { email };
  return attributesItem({ ...payload, ...identifier }, at);
}

/** The attributes object through /users/track's own validation. */
export function attributesItem(object: Record<string, unknown>, at: string): RowItem {
  const r = validateAttributes(object, at);
  return r.ok ? { kind: 'attributes', attributes: r.value } : { kind: 'refused', reason: r.type };
}
