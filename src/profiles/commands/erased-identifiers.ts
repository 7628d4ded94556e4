/** What named an erased person (src/profiles/commands/erase.ts), as each copy's erasure matches it. */

export type IdentifierKind = 'external_id' | 'service_id' | 'email' | 'phone' | 'user_alias';

/** One identifier of an erased user, and until when a copy naming it is theirs. */
export interface ErasedIdentifier {
  kind: IdentifierKind;
  /** The value; an alias's name; an address lower-cased. */
  value: string;
  /** An alias's label. */
  label: string | null;
  /**
   * 'infinity' for the profile's own identifiers; for one a merge folded in, the merge's time (PostgreSQL's text):
   * the identifier was freed then, and a copy written since names whoever took it.
   */
  until: string;
  /** `until` in milliseconds since the epoch (Infinity for the profile's own). */
  untilMs: number;
}

/** The identifiers of some kinds as two parallel arrays, values and their bounds, for `unnest($n, $n+1)`. */
export function boundedValues(ids: ErasedIdentifier[], kinds?: IdentifierKind[]): [string[], string[]] {
  const chosen = kinds ? ids.filter((i) => kinds.includes(i.kind)) : ids;
  return [chosen.map((i) => i.value), chosen.map((i) => i.until)];
}

/** The identifiers as four parallel arrays (kind, value, alias label, bound), for `unnest($n, ..., $n+3)`. */
export function identifierColumns(ids: ErasedIdentifier[]): [string[], string[], (string | null)[], string[]] {
  return [ids.map((i) => i.kind), ids.map((i) => i.value), ids.map((i) => i.label), ids.map((i) => i.until)];
}
