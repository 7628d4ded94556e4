import type { Identity, TrackObjects } from '../../../profiles/tracked-types.js';

/**
 * Ingestion partitions. A workspace's objects are split by a hash of the user identifier they name, and each
 * partition applies on its own PostgreSQL backend, in its own transactions: one backend rewriting profiles is one
 * core, and the apply was the pipeline's bottleneck. Objects naming the same identifier always share a partition,
 * so concurrent batches of one workspace touch disjoint profiles, except for a user named by two identifier types
 * (external_id in one object, email in another). For that case the apply is safe, not merely rare: counts and
 * aggregates merge in SQL from the row as it stands when the update takes its lock, and attributes carry their
 * time into the UPDATE, which keeps a newer stored value (src/profiles/tracked-objects.ts).
 */

/** FNV-1a (32 bits) over the identifier's UTF-16 code units: cheap, and stable across processes and versions. */
function fnv1a(text: string, hash = 0x811c9dc5): number {
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}

/** The partition (0..partitions-1) of the user an identifier names. Emails are already lower-cased. */
export function partitionOf(identity: Identity, partitions: number): number {
  if (partitions <= 1) return 0;
  const hash =
    identity.type === 'user_alias'
      ? fnv1a(identity.name, fnv1a(`a${identity.label}\u0000`))
      : fnv1a(identity.value, fnv1a(identity.type));
  return hash % partitions;
}

/** One request's objects split by partition; partitions with nothing are left out, and order within each is kept. */
export function splitByPartition(objects: TrackObjects, partitions: number): { part: number; objects: TrackObjects }[] {
  if (partitions <= 1) return [{ part: 0, objects }];
  const parts = new Map<number, TrackObjects>();
  const of = (identity: Identity) => {
    const part = partitionOf(identity, partitions);
    let p = parts.get(part);
    if (!p) parts.set(part, (p = { events: [], purchases: [], attributes: [] }));
    return p;
  };
  for (const e of objects.events) of(e.identity).events.push(e);
  for (const p of objects.purchases) of(p.identity).purchases.push(p);
  for (const a of objects.attributes) of(a.identity).attributes.push(a);
  if (parts.size === 0) return [{ part: 0, objects }];
  return [...parts].sort(([a], [b]) => a - b).map(([part, o]) => ({ part, objects: o }));
}
