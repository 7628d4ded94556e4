import { z } from 'zod';

/** The value types a live activity's content_state attributes may declare (as in the workspace file). */
export const CONTENT_STATE_TYPES = ['string', 'number', 'boolean', 'object', 'array'] as const;
export type ContentStateType = (typeof CONTENT_STATE_TYPES)[number];

export const MAX_CONTENT_STATE_ATTRIBUTES = 100;

export const ContentStateShape = z
  .record(
    z.string().min(1, 'attribute names must not be empty').max(255, 'attribute names are at most 255 characters'),
    z.enum(CONTENT_STATE_TYPES, { error: `attribute types are one of ${CONTENT_STATE_TYPES.join(', ')}` }),
    { error: 'content_state_shape must be an object of attribute name to type' },
  )
  .refine(
    (s) => Object.keys(s).length <= MAX_CONTENT_STATE_ATTRIBUTES,
    `content_state_shape declares at most ${MAX_CONTENT_STATE_ATTRIBUTES} attributes`,
  );
export type ContentStateShape = z.infer<typeof ContentStateShape>;

function typeOf(value: unknown): ContentStateType | 'null' | 'other' {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  switch (typeof value) {
    case 'string':
      return 'string';
    case 'number':
      return Number.isFinite(value) ? 'number' : 'other';
    case 'boolean':
      return 'boolean';
    case 'object':
      return 'object';
    default:
      return 'other';
  }
}

/**
 * Why `state` does not have the declared shape, or null when it does. ActivityKit decodes the whole ContentState
 * on the device, so every declared attribute must be present with its type and nothing else may be sent.
 */
export function shapeMismatch(shape: ContentStateShape, state: Record<string, unknown>): string | null {
  const problems: string[] = [];
  for (const [name, type] of Object.entries(shape)) {
    if (!(name in state)) problems.push(`missing ${name} (${type})`);
    else if (typeOf(state[name]) !== type)
      problems.push(`${name} must be ${type === 'array' || type === 'object' ? 'an' : 'a'} ${type}`);
  }
  for (const name of Object.keys(state)) if (!(name in shape)) problems.push(`${name} is not declared`);
  if (problems.length === 0) return null;
  const shown = problems.slice(0, 5).join('; ');
  return `content_state does not match the declared shape of the activity: ${shown}${problems.length > 5 ? `; and ${problems.length - 5} more` : ''}`;
}
