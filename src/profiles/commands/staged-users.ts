/**
 * Who a staged payload names: each tracked object's identity, and every user reference of a row of user-data commands
 * (src/pipelines/ingest/apply/command-rows.ts). Read loosely: a payload set aside as a dead letter may be anything, an
 * operator may have edited it, and reading it must never throw. Erasure compares what it finds with the erased user's
 * identifiers exactly (src/profiles/commands/erase-dead-letters.ts); dead letters record the values for an index lookup
 * (./dead-letters.ts).
 */

/** A user a payload names, as an identity: `type` external_id, service_id, email, phone, device_id or user_alias. */
export interface NamedUser {
  type: string;
  value?: string;
  label?: string;
  name?: string;
}

export type StagedPayload =
  | { kind: 'objects'; value: Record<string, unknown> }
  | { kind: 'commands'; value: { commands: unknown[] } & Record<string, unknown> }
  | { kind: 'unreadable' };

export const OBJECT_KINDS = ['events', 'purchases', 'attributes'] as const;

const isObject = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/** A payload as parsed JSON, by what it holds. */
export function parseStaged(payload: string): StagedPayload {
  let value: unknown;
  try {
    value = JSON.parse(payload);
  } catch {
    return { kind: 'unreadable' };
  }
  if (!isObject(value)) return { kind: 'unreadable' };
  if (Array.isArray(value.commands)) return { kind: 'commands', value: value as { commands: unknown[] } };
  return { kind: 'objects', value };
}

/** The user a tracked object names (its identity), if any. */
export function objectUsers(o: unknown): NamedUser[] {
  const identity = isObject(o) ? o.identity : undefined;
  if (!isObject(identity) || typeof identity.type !== 'string') return [];
  return [{ type: identity.type, value: str(identity.value), label: str(identity.label), name: str(identity.name) }];
}

/** A command's reference ({kind, value} or {kind: 'user_alias', label, name}) as a named user. */
function refUser(ref: unknown): NamedUser[] {
  if (!isObject(ref) || typeof ref.kind !== 'string') return [];
  return [{ type: ref.kind, value: str(ref.value), label: str(ref.label), name: str(ref.name) }];
}

const externalId = (v: unknown): NamedUser[] => (typeof v === 'string' ? [{ type: 'external_id', value: v }] : []);

/** Every user a user-data command names. */
export function commandUsers(c: unknown): NamedUser[] {
  if (!isObject(c)) return [];
  const renames = Array.isArray(c.renames) ? c.renames : [];
  const removed = Array.isArray(c.externalIds) ? c.externalIds : [];
  return [
    ...refUser(c.target),
    ...refUser(c.merge),
    ...refUser(c.keep),
    ...externalId(c.externalId),
    ...(typeof c.label === 'string' && typeof c.name === 'string'
      ? [{ type: 'user_alias', label: c.label, name: c.name }]
      : []),
    ...renames.flatMap((r) => (isObject(r) ? [...externalId(r.current), ...externalId(r.next)] : [])),
    ...removed.flatMap(externalId),
  ];
}

/** Every user a parsed payload names. */
export function stagedUsers(parsed: StagedPayload): NamedUser[] {
  if (parsed.kind === 'commands') return parsed.value.commands.flatMap(commandUsers);
  if (parsed.kind === 'unreadable') return [];
  return OBJECT_KINDS.flatMap((k) => (Array.isArray(parsed.value[k]) ? parsed.value[k].flatMap(objectUsers) : []));
}

/** Whether a value can be sent to PostgreSQL as JSON text at all (no NUL, no lone surrogate): no stored user has one. */
const storable = (v: string) =>
  !/\u0000|[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/.test(v);

/** The JSON strings of a text that is not JSON, unescaped where they can be: what it may name. */
function quotedStrings(text: string): string[] {
  return [...text.matchAll(/"((?:[^"\\]|\\.)*)"/g)].map((m) => {
    try {
      return JSON.parse(`"${m[1]}"`) as string;
    } catch {
      return m[1]!;
    }
  });
}

/**
 * The values a payload names a user by, for a dead letter's `names` (hashed by PostgreSQL, looked up by an erasure):
 * each named user's value, or alias name; for a payload that is not JSON, every JSON string in its text (the erasure
 * then checks it as text).
 */
export function stagedNames(payload: string): string[] {
  const parsed = parseStaged(payload);
  const values =
    parsed.kind === 'unreadable'
      ? quotedStrings(payload)
      : stagedUsers(parsed).flatMap((u) => [u.value, u.type === 'user_alias' ? u.name : undefined]);
  return [...new Set(values.filter((v): v is string => typeof v === 'string' && storable(v)))];
}

/** The `names` of letters: hashes, by PostgreSQL (migration 0290), of each letter's JSON array `d.names`. */
export const NAMES_FROM_JSON = `(SELECT coalesce(array_agg(DISTINCT identifier_hash(n)), '{}') FROM jsonb_array_elements_text(d.names::jsonb) AS n)`;
