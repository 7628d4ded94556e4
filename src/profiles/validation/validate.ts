import type { ObjectError, TrackArray, TrackObjects } from '../tracked-types.js';
import { FATAL_NOTHING_VALID, MAX_OBJECTS_PER_ARRAY, isPlainObject, type Result } from './validate-rules.js';
import { z } from 'zod';
import { EventShape, PurchaseShape, validateEvent, validatePurchase } from './validate-events.js';
import { AttributesShape, validateAttributes } from './validate-attributes.js';

export {
  MAX_NESTED_PROPERTIES_BYTES,
  MAX_OBJECTS_PER_ARRAY,
  MAX_STRING_CHARS,
  FATAL_NOTHING_VALID,
} from './validate-rules.js';
export { eventShapeOf, validateEvent, validatePurchase } from './validate-events.js';
export { validateAttributes } from './validate-attributes.js';

/**
 * Validation of a /users/track body, and of its event, purchase and attributes objects to the letter of the spec's
 * Event object and its property rules (./validate-events.ts, ./validate-attributes.ts, over the shared rules of
 * ./validate-rules.ts). zod checks the shape; the rules zod cannot say (exactly one identifier, property names and
 * values, the 50 KB rule) are explicit. Every refusal is one readable sentence: it becomes an error's `type`.
 */

/**
 * The shape of a /users/track body, built from the schemas that validate its objects, for the API reference. The
 * route takes the body as it is and validates object by object (validateTrackBody): a refused object is listed in
 * `errors` while the others are taken, which a whole-body schema could not do.
 */
export const TrackBodyShape = z.object({
  attributes: z.array(AttributesShape).max(MAX_OBJECTS_PER_ARRAY).optional(),
  events: z.array(EventShape).max(MAX_OBJECTS_PER_ARRAY).optional(),
  purchases: z.array(PurchaseShape).max(MAX_OBJECTS_PER_ARRAY).optional(),
});

export interface TrackValidation {
  objects: TrackObjects;
  errors: ObjectError[];
  /** Which arrays the request sent: a count is answered for each. */
  sent: Record<TrackArray, boolean>;
}

/** What makes a whole /users/track request unusable (nothing is taken). */
export class FatalTrackError extends Error {}

/**
 * A /users/track body: every object validated on its own; the valid ones are taken, the others listed in
 * `errors`. Throws FatalTrackError when the body itself is unusable or no object is valid.
 */
export function validateTrackBody(body: unknown, acceptedAt: string): TrackValidation {
  if (!isPlainObject(body)) throw new FatalTrackError(FATAL_NOTHING_VALID);
  const sent = { events: false, attributes: false, purchases: false };
  const arrays: Partial<Record<TrackArray, unknown[]>> = {};
  for (const name of ['attributes', 'events', 'purchases'] as const) {
    const value = body[name];
    if (value === undefined || value === null) continue;
    if (!Array.isArray(value)) throw new FatalTrackError(`'${name}' must be an array`);
    if (value.length > MAX_OBJECTS_PER_ARRAY)
      throw new FatalTrackError(
        `'${name}' may hold at most ${MAX_OBJECTS_PER_ARRAY} objects per request; got ${value.length}`,
      );
    sent[name] = true;
    arrays[name] = value;
  }
  const objects: TrackObjects = { events: [], attributes: [], purchases: [] };
  const errors: ObjectError[] = [];
  const take = <T>(name: TrackArray, list: T[], check: (raw: unknown) => Result<T>) => {
    arrays[name]?.forEach((raw, index) => {
      const r = check(raw);
      if (r.ok) list.push(r.value);
      else errors.push({ type: r.type, input_array: name, index });
    });
  };
  take('attributes', objects.attributes, (raw) => validateAttributes(raw, acceptedAt));
  take('events', objects.events, validateEvent);
  take('purchases', objects.purchases, validatePurchase);
  const accepted = objects.events.length + objects.attributes.length + objects.purchases.length;
  if (accepted === 0) {
    const detail = errors.slice(0, 5).map((e) => `${e.input_array}[${e.index}]: ${e.type}`);
    if (errors.length > 5) detail.push(`and ${errors.length - 5} more`);
    throw new FatalTrackError(detail.length ? `${FATAL_NOTHING_VALID} ${detail.join('; ')}` : FATAL_NOTHING_VALID);
  }
  return { objects, errors, sent };
}
