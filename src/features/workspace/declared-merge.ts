/**
 * A declared value over a stored one, so that what a file leaves out stays as it is: objects merge key by key (a key
 * the file gives replaces the stored one, recursively; a key it leaves out stays), anything else the file gives
 * (a list, a string, a boolean) replaces what is stored. Nothing given: the stored value.
 */
export function mergeDeclared(stored: unknown, given: unknown): unknown {
  if (given === undefined) return stored;
  if (!isPlainObject(stored) || !isPlainObject(given)) return given;
  const out: Record<string, unknown> = { ...stored };
  for (const [key, value] of Object.entries(given)) {
    if (value !== undefined) out[key] = mergeDeclared(stored[key], value);
  }
  return out;
}

function isPlainObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
