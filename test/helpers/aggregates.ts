/** One stored custom_events or purchases entry. */
export interface AggregateEntry {
  name: string;
  first: string;
  last: string;
  count: number;
}

/**
 * A profile's stored custom_events or purchases (an object keyed by name since migration 0100) as its entries sorted
 * by name; undefined stays undefined (no such profile). Checks that every key is its entry's name.
 */
export function entries(stored: Record<string, AggregateEntry> | undefined): AggregateEntry[] | undefined {
  if (stored === undefined) return undefined;
  if (Array.isArray(stored) || typeof stored !== 'object' || stored === null)
    throw new Error(`not keyed by name: ${JSON.stringify(stored)}`);
  for (const [key, entry] of Object.entries(stored))
    if (entry.name !== key) throw new Error(`key ${key} holds the entry of ${entry.name}`);
  return Object.values(stored).sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
}
