/**
 * Who a staged payload names: each tracked object's identity, and every user reference of a row of user-data commands
 * (src/ingest/apply/commands.ts). Read loosely: a payload set aside as a dead letter may be anything, an operator may
 * have edited it, and reading it must never throw. Erasure compares what it finds with the erased user's identifiers
 * exactly (src/profiles/erase-dead-letters.ts); dead letters record the values for an index lookup
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
