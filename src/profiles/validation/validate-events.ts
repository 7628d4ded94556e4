import { z } from 'zod';
import { isStorableText } from '../../platform/lib/storable.js';
import type { TrackEvent, TrackPurchase } from '../tracked-types.js';
import {
  AppId,
  EMAIL,
  MAX_IDENTIFIER_CHARS,
  MAX_PRICE,
  MAX_STRING_CHARS,
  NameString,
  PropertiesObject,
  TimeString,
  checkProperties,
  describeIssue,
  identifierFields,
  identityOf,
  isPlainObject,
  notAnObject,
  timeOf,
  tooLong,
  type Result,
  unstorable,
} from './validate-rules.js';

/** Event and purchase objects: their shape in zod, and the rules zod cannot say. */

export const EventShape = z
  .object({
    ...identifierFields,
    app_id: AppId.optional(),
    name: NameString('name'),
    time: TimeString,
    properties: PropertiesObject.optional(),
  })
  .strict();

export const PurchaseShape = z
  .object({
    ...identifierFields,
    app_id: AppId.optional(),
    product_id: NameString('product_id'),
    currency: z
      .string({ error: "'currency' is required and must be a string" })
      .regex(/^[A-Za-z]{3}$/, "'currency' must be a three-letter ISO 4217 code"),
    price: z
      .number({ error: "'price' is required and must be a number" })
      .min(-MAX_PRICE, `'price' must be a number from -${MAX_PRICE} to ${MAX_PRICE}`)
      .max(MAX_PRICE, `'price' must be a number from -${MAX_PRICE} to ${MAX_PRICE}`),
    quantity: z
      .number({ error: "'quantity' must be an integer from 1 to 100" })
      .int("'quantity' must be an integer from 1 to 100")
      .min(1, "'quantity' must be an integer from 1 to 100")
      .max(100, "'quantity' must be an integer from 1 to 100")
      .optional(),
    time: TimeString,
    properties: PropertiesObject.optional(),
  })
  .strict();

type EventInput = z.output<typeof EventShape>;

/**
 * The shape of an event as EventShape has it, checked by hand for the objects clients send every day: only fields of
 * the shape, each of its type and within its length, identifiers, name and app_id storable text (else the whole object
 * is walked by `unstorable`, which says where and why; checkProperties checks the properties). An object this does not
 * recognise (user_alias, a field the shape does not have, a wrong type, an empty or overlong identifier) returns null
 * and goes to EventShape, which stays the one definition of what is refused and why; this may only say yes where
 * EventShape does (test/ingest/ingest-validate.test.ts holds the two to that). Skipping zod for these halves the
 * validation of a 75-event request (BENCHMARKS.md), which runs for every request the API takes.
 */
function commonEventShape(raw: Record<string, unknown>): EventInput | null {
  let fields = 0;
  for (const key of Object.keys(raw)) {
    const v = raw[key];
    switch (key) {
      case 'external_id':
      case 'service_id':
        if (typeof v !== 'string' || v.length === 0 || v.length > MAX_IDENTIFIER_CHARS || !isStorableText(v))
          return null;
        break;
      case 'email':
        if (
          typeof v !== 'string' ||
          v.length === 0 ||
          v.length > MAX_IDENTIFIER_CHARS ||
          !EMAIL.test(v) ||
          !isStorableText(v)
        )
          return null;
        break;
      case 'name':
        if (typeof v !== 'string' || v.length === 0 || !isStorableText(v)) return null;
        fields++;
        break;
      case 'time':
        // Its format, checked later, admits digits and separators only.
        if (typeof v !== 'string') return null;
        fields++;
        break;
      case 'properties':
        if (!isPlainObject(v)) return null;
        break;
      case 'app_id':
        if (typeof v !== 'string' || v.length === 0 || v.length > MAX_STRING_CHARS || !isStorableText(v)) return null;
        break;
      case '_update_existing_only':
        if (typeof v !== 'boolean') return null;
        break;
      default:
        return null;
    }
  }
  return fields === 2 ? (raw as EventInput) : null;
}

/** An event object's shape: the hand check for the common case, else EventShape. Exported for the tests. */
export function eventShapeOf(
  raw: Record<string, unknown>,
  fast = true,
): { ok: true; value: EventInput } | { ok: false; type: string } {
  const common = fast ? commonEventShape(raw) : null;
  if (common) return { ok: true, value: common };
  const parsed = EventShape.safeParse(raw);
  return parsed.success
    ? { ok: true, value: parsed.data }
    : { ok: false, type: describeIssue(parsed.error, 'an event object') };
}

/** One event object. */
export function validateEvent(raw: unknown): Result<TrackEvent> {
  if (!isPlainObject(raw)) return notAnObject('an event object');
  // The common shape has checked its own strings, and checkProperties checks the properties as it reads them: a
  // walk of every event besides cost a third more than the rest of a 75-event request's validation.
  const common = commonEventShape(raw);
  if (!common) {
    const bad = unstorable(raw, 2);
    if (bad) return bad;
  }
  const shape = common ? { ok: true as const, value: common } : eventShapeOf(raw, false);
  if (!shape.ok) return shape;
  const e = shape.value;
  const long = tooLong(e.name, 'name');
  if (long) return long;
  const id = identityOf(e, false);
  if (!id.ok) return id;
  const time = timeOf(e.time);
  if (!time.ok) return time;
  // Fields named one by one, not spread from id.value: a spread made each object in a slow shape of its own, which
  // cost more than the rest of the validation and slowed serializing the staged row after it.
  const event: TrackEvent = { identity: id.value.identity, create: id.value.create, name: e.name, time: time.value };
  if (e.app_id !== undefined) event.app_id = e.app_id;
  if (e.properties !== undefined) {
    const props = checkProperties(e.properties, 'property', {
      objectsAsStrings: true,
      allowNull: false,
      storableAt: common ? 'properties' : undefined,
    });
    if (!props.ok) return props;
    event.properties = props.value;
  }
  return { ok: true, value: event };
}

/** One purchase object (`product_id`, `currency`, `price`, `quantity`, `time`, `properties`, `app_id`). */
export function validatePurchase(raw: unknown): Result<TrackPurchase> {
  if (!isPlainObject(raw)) return notAnObject('a purchase object');
  const bad = unstorable(raw, 2);
  if (bad) return bad;
  const parsed = PurchaseShape.safeParse(raw);
  if (!parsed.success) return { ok: false, type: describeIssue(parsed.error, 'a purchase object') };
  const p = parsed.data;
  const long = tooLong(p.product_id, 'product_id');
  if (long) return long;
  const id = identityOf(p, false);
  if (!id.ok) return id;
  const time = timeOf(p.time);
  if (!time.ok) return time;
  const purchase: TrackPurchase = {
    identity: id.value.identity,
    create: id.value.create,
    product_id: p.product_id,
    currency: p.currency.toUpperCase(),
    price: p.price,
    quantity: p.quantity ?? 1,
    time: time.value,
  };
  if (p.app_id !== undefined) purchase.app_id = p.app_id;
  if (p.properties !== undefined) {
    const props = checkProperties(p.properties, 'property', { objectsAsStrings: true, allowNull: false });
    if (!props.ok) return props;
    purchase.properties = props.value;
  }
  return { ok: true, value: purchase };
}
