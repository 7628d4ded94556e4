import { describe, expect, it } from 'vitest';
import { parseEventTime } from '../../src/profiles/validation/event-time.js';
import {
  eventShapeOf,
  FATAL_NOTHING_VALID,
  FatalTrackError,
  validateAttributes,
  validateEvent,
  validatePurchase,
  validateTrackBody,
} from '../../src/profiles/validation/validate.js';

const base = { external_id: 'u1', name: 'played', time: '2024-01-02T03:04:05Z' };
const ok = (raw: unknown) => {
  const r = validateEvent(raw);
  if (!r.ok) throw new Error(`expected valid, got: ${r.type}`);
  return r.value;
};
const refused = (raw: unknown) => {
  const r = validateEvent(raw);
  if (r.ok) throw new Error(`expected a refusal for ${JSON.stringify(raw).slice(0, 200)}`);
  return r.type;
};

describe('event identifiers', () => {
  it('takes exactly one of external_id, user_alias, service_id, email', () => {
    expect(ok(base).identity).toEqual({ type: 'external_id', value: 'u1' });
    expect(ok({ ...base, external_id: undefined, service_id: 's1' }).identity).toEqual({
      type: 'service_id',
      value: 's1',
    });
    expect(ok({ ...base, external_id: undefined, email: 'A@B.io' }).identity).toEqual({
      type: 'email',
      value: 'a@b.io',
    });
    expect(ok({ ...base, external_id: undefined, user_alias: { alias_name: 'n', alias_label: 'l' } }).identity).toEqual(
      { type: 'user_alias', label: 'l', name: 'n' },
    );
    expect(refused({ name: 'x', time: base.time })).toMatch(
      /'external_id' or 'service_id' or 'user_alias' or 'email' is required/,
    );
    expect(refused({ ...base, service_id: 's1' })).toMatch(/only one of/);
    expect(
      refused({ ...base, external_id: undefined, email: 'a@b.io', user_alias: { alias_name: 'n', alias_label: 'l' } }),
    ).toMatch(/only one of/);
    expect(refused({ ...base, external_id: '' })).toMatch(/'external_id' must not be empty/);
    expect(refused({ ...base, external_id: 5 })).toMatch(/'external_id' must be a string/);
    expect(refused({ ...base, external_id: undefined, email: 'not-an-address' })).toMatch(/email address/);
    expect(refused({ ...base, external_id: undefined, user_alias: { alias_name: 'n' } })).toMatch(/alias_label/);
  });

  it('creates only for external_id without _update_existing_only; user_alias never creates', () => {
    expect(ok(base).create).toBe(true);
    expect(ok({ ...base, _update_existing_only: true }).create).toBe(false);
    expect(ok({ ...base, _update_existing_only: false }).create).toBe(true);
    expect(
      ok({
        ...base,
        external_id: undefined,
        user_alias: { alias_name: 'n', alias_label: 'l' },
        _update_existing_only: false,
      }).create,
    ).toBe(false);
    expect(refused({ ...base, _update_existing_only: 'yes' })).toMatch(/_update_existing_only/);
  });
});

describe('event name, time and fields', () => {
  it('requires a name of 1 to 255 characters', () => {
    expect(refused({ ...base, name: undefined })).toMatch(/'name' is required/);
    expect(refused({ ...base, name: '' })).toMatch(/'name' must not be empty/);
    expect(ok({ ...base, name: 'n'.repeat(255) }).name).toHaveLength(255);
    expect(refused({ ...base, name: 'n'.repeat(256) })).toMatch(/at most 255/);
  });

  it('takes ISO 8601 and yyyy-MM-ddTHH:mm:ss:SSSZ times, normalized to UTC milliseconds', () => {
    expect(ok({ ...base, time: '2024-01-02T03:04:05Z' }).time).toBe('2024-01-02T03:04:05.000Z');
    expect(ok({ ...base, time: '2024-01-02T03:04:05.123456+02:00' }).time).toBe('2024-01-02T01:04:05.123Z');
    expect(ok({ ...base, time: '2024-01-02T03:04:05-0130' }).time).toBe('2024-01-02T04:34:05.000Z');
    expect(ok({ ...base, time: '2024-01-02T03:04' }).time).toBe('2024-01-02T03:04:00.000Z');
    expect(ok({ ...base, time: '2024-01-02' }).time).toBe('2024-01-02T00:00:00.000Z');
    expect(ok({ ...base, time: '2013-07-23T12:34:56:789-0700' }).time).toBe('2013-07-23T19:34:56.789Z');
    expect(ok({ ...base, time: '2013-07-23T12:34:56:789Z' }).time).toBe('2013-07-23T12:34:56.789Z');
    for (const bad of [
      'yesterday',
      '2024-02-30T00:00:00Z',
      '2024-13-01',
      '2024-01-02 03:04:05',
      '2024-01-02T25:00:00Z',
      '2013-07-23T12:34:56:78-0700',
      '1700000000',
      '',
    ]) {
      expect(refused({ ...base, time: bad }), bad).toMatch(/'time' must be ISO 8601 or yyyy-MM-dd'T'HH:mm:ss:SSSZ/);
    }
    expect(refused({ ...base, time: 1700000000 })).toMatch(/'time'/);
    expect(parseEventTime('2024-02-29T00:00:00Z')).toBe(Date.UTC(2024, 1, 29));
    // The canonical form (what toISOString writes) is taken as it is, still only for real times.
    expect(ok({ ...base, time: '2024-02-29T23:59:59.999Z' }).time).toBe('2024-02-29T23:59:59.999Z');
    for (const bad of [
      '2023-02-29T00:00:00.000Z',
      '2024-04-31T00:00:00.000Z',
      '2024-01-01T24:00:00.000Z',
      '2024-00-10T00:00:00.000Z',
      '2024-01-01T00:60:00.000Z',
    ]) {
      expect(refused({ ...base, time: bad }), bad).toMatch(/'time'/);
    }
  });

  it('refuses unknown fields and non-objects, with the offending name', () => {
    expect(refused({ ...base, propeties: {} })).toMatch(/'propeties' is not a field of an event object/);
    expect(refused('event')).toMatch(/event object/);
    expect(refused(null)).toMatch(/event object/);
    expect(refused([base])).toMatch(/event object/);
    expect(refused({ ...base, app_id: 7 })).toMatch(/'app_id'/);
    expect(refused({ ...base, properties: [1] })).toMatch(/'properties' must be an object/);
  });
});

describe('the hand-checked shape of common events', () => {
  // Values at and around every limit and type the event shape has, for every field, plus fields it does not have.
  const candidates: Record<string, unknown[]> = {
    external_id: ['u1', '', 'x'.repeat(512), 'x'.repeat(513), 5, null, true, {}],
    service_id: ['s1', '', 'x'.repeat(512), 'x'.repeat(513), 5, null],
    email: ['A@b.io', 'bad', '', 'a b@c.io', `${'x'.repeat(508)}@b.io`, `${'x'.repeat(509)}@b.io`, 5, null],
    user_alias: [{ alias_name: 'n', alias_label: 'l' }, { alias_name: 'n' }, 'n', null],
    _update_existing_only: [true, false, 'yes', null],
    app_id: ['app', '', 'a'.repeat(255), 'a'.repeat(256), 5],
    name: ['played', '', 'n'.repeat(300), 5, null],
    time: ['2024-01-02T03:04:05Z', 'garbage', 5, null],
    properties: [{}, { a: 1 }, [], 'x', null],
    extra: [1],
    toString: ['x'],
  };
  const keys = Object.keys(candidates);
  // A fixed pseudo-random sequence (a linear congruential generator), so that a failure repeats.
  let seed = 42;
  const random = () => (seed = (seed * 1103515245 + 12345) % 2 ** 31) / 2 ** 31;

  it('says yes only where the zod shape does, with the same value', () => {
    let takenByHand = 0;
    for (let i = 0; i < 20_000; i++) {
      const raw: Record<string, unknown> = {};
      // Mostly the common fields, now and then any field; mostly the first (valid) value, else any.
      for (const key of keys) {
        const common = key === 'name' || key === 'time' || key === 'external_id';
        const values = candidates[key]!;
        if (random() < (common ? 0.9 : 0.1))
          raw[key] = random() < 0.6 ? values[0] : values[Math.floor(random() * values.length)];
      }
      const fast = eventShapeOf(raw);
      expect(fast, JSON.stringify(raw).slice(0, 300)).toEqual(eventShapeOf(raw, false));
      // The hand check hands back the object itself; zod builds a new one.
      if (fast.ok && fast.value === raw) takenByHand++;
    }
    // The sequence above makes thousands of common events: the hand check must have taken them.
    expect(takenByHand).toBeGreaterThan(3_000);
  });
});

describe('event properties', () => {
  const props = (properties: Record<string, unknown>) => ({ ...base, properties });
  it('names: non-empty, at most 255 characters, no leading $', () => {
    expect(ok(props({ ['k'.repeat(255)]: 1 })).properties).toBeDefined();
    expect(refused(props({ ['k'.repeat(256)]: 1 }))).toMatch(/longer than 255/);
    expect(refused(props({ '': 1 }))).toMatch(/non-empty/);
    expect(refused(props({ $price: 1 }))).toMatch(/must not begin with '\$'/);
    expect(ok(props({ price$: 1 })).properties).toEqual({ price$: 1 });
  });

  it('values: number, boolean, date, string of at most 255 characters, array without dates, object as a string', () => {
    const v = ok(
      props({
        n: 1.5,
        i: -3,
        b: false,
        d: '2024-01-01T00:00:00Z',
        s: 's'.repeat(255),
        a: ['x', 1, true, ['y']],
        o: { deep: { x: 1 } },
      }),
    ).properties!;
    expect(v.o).toBe('{"deep":{"x":1}}');
    expect(v.a).toEqual(['x', 1, true, ['y']]);
    expect(refused(props({ s: 's'.repeat(256) }))).toMatch(/at most 255 characters/);
    // Characters, not UTF-16 units: 255 emoji are 255 characters.
    expect(ok(props({ s: '😀'.repeat(255) })).properties).toBeDefined();
    expect(refused(props({ s: '😀'.repeat(256) }))).toMatch(/at most 255/);
    expect(refused(props({ a: ['2024-01-01T00:00:00Z'] }))).toMatch(/array may not contain dates/);
    expect(refused(props({ a: [['2024-01-01']] }))).toMatch(/array may not contain dates/);
    expect(refused(props({ a: ['s'.repeat(256)] }))).toMatch(/at most 255/);
    expect(refused(props({ z: null }))).toMatch(/null is not a valid value/);
  });

  it('properties holding arrays or objects total at most 50 KB', () => {
    // Strings of 255 characters in an array, then a last string that lands the JSON on exactly `total` bytes.
    const fill = (total: number) => {
      const base = JSON.stringify({ a: [], b: '' }).length; // {"a":[],"b":""}
      const list: string[] = [];
      let size = base;
      while (size + 258 <= total) {
        list.push('x'.repeat(255));
        size += 258 - (list.length === 1 ? 1 : 0);
      }
      const p = { a: list, b: '' } as Record<string, unknown>;
      const rest = total - Buffer.byteLength(JSON.stringify(p));
      p.b = 'y'.repeat(rest);
      return p;
    };
    const exact = fill(51_200);
    expect(Buffer.byteLength(JSON.stringify(exact))).toBe(51_200);
    expect(ok(props(exact)).properties).toBeDefined();
    const over = fill(51_201);
    expect(Buffer.byteLength(JSON.stringify(over))).toBe(51_201);
    expect(refused(props(over))).toMatch(/at most 50 KB/);
    // Without arrays or objects, the 50 KB rule does not apply (each string is still at most 255 characters).
    const flat = Object.fromEntries(Array.from({ length: 300 }, (_, i) => [`k${i}`, 'z'.repeat(255)]));
    expect(ok(props(flat)).properties).toBeDefined();
  });
});

describe('purchases', () => {
  const p = { external_id: 'u1', product_id: 'sku-1', currency: 'usd', price: 9.99, time: '2024-01-01T00:00:00Z' };
  it('accepts the purchase object and normalizes currency and quantity', () => {
    const r = validatePurchase({ ...p, quantity: 3, properties: { color: 'red' }, app_id: 'app' });
    expect(r.ok && r.value).toMatchObject({
      product_id: 'sku-1',
      currency: 'USD',
      price: 9.99,
      quantity: 3,
      time: '2024-01-01T00:00:00.000Z',
    });
    const d = validatePurchase(p);
    expect(d.ok && d.value.quantity).toBe(1);
  });
  it('refuses bad purchase fields', () => {
    const type = (raw: unknown) => {
      const r = validatePurchase(raw);
      return r.ok ? 'ok' : r.type;
    };
    expect(type({ ...p, product_id: undefined })).toMatch(/'product_id' is required/);
    expect(type({ ...p, currency: 'dollars' })).toMatch(/'currency'/);
    expect(type({ ...p, price: '9.99' })).toMatch(/'price'/);
    expect(type({ ...p, quantity: 0 })).toMatch(/'quantity'/);
    expect(type({ ...p, quantity: 100 })).toBe('ok');
    expect(type({ ...p, quantity: 101 })).toMatch(/'quantity'/);
    expect(type({ ...p, quantity: 1.5 })).toMatch(/'quantity'/);
    expect(type({ ...p, time: 'now' })).toMatch(/'time'/);
    expect(type({ ...p, properties: { $x: 1 } })).toMatch(/\$/);
    expect(type({ ...p, external_id: undefined })).toMatch(/is required/);
  });
});

describe('attributes', () => {
  const at = '2024-05-01T00:00:00.000Z';
  const attrs = (raw: Record<string, unknown>) => validateAttributes({ external_id: 'u1', ...raw }, at);
  it('splits standard fields from custom attributes and normalizes them', () => {
    const r = attrs({
      first_name: 'Ada',
      country: 'gb',
      language: 'EN',
      gender: 'f',
      email: 'Ada@X.io',
      current_location: { longitude: 1.5, latitude: 2 },
      tier: 'gold',
      vip: true,
      tags: ['a'],
      nested: { a: 1 },
      gone: null,
    });
    expect(r.ok).toBe(true);
    if (!r.ok) return;
    expect(r.value.identity).toEqual({ type: 'external_id', value: 'u1' });
    expect(r.value.standard).toEqual({
      first_name: 'Ada',
      country: 'GB',
      language: 'en',
      gender: 'F',
      email: 'Ada@X.io',
      last_coordinates: [1.5, 2],
    });
    expect(r.value.custom).toEqual({ tier: 'gold', vip: true, tags: ['a'], nested: { a: 1 }, gone: null });
    expect(r.value.at).toBe(at);
  });
  it('uses email as the identifier only when no other identifier is given', () => {
    const r = validateAttributes({ email: 'a@b.io', first_name: 'A' }, at);
    expect(r.ok && r.value.identity).toEqual({ type: 'email', value: 'a@b.io' });
    expect(r.ok && r.value.standard).toEqual({ first_name: 'A' });
  });
  it('refuses bad standard fields and reserved fields', () => {
    const type = (raw: Record<string, unknown>) => {
      const r = attrs(raw);
      return r.ok ? 'ok' : r.type;
    };
    expect(type({ first_name: 'f'.repeat(255) })).toBe('ok');
    expect(type({ first_name: 'f'.repeat(256) })).toMatch(/'first_name' may be at most 255/);
    expect(type({ dob: '1990-02-30' })).toMatch(/'dob'/);
    expect(type({ dob: '1990-02-28' })).toBe('ok');
    expect(type({ country: 'GBR' })).toMatch(/'country'/);
    expect(type({ gender: 'X' })).toMatch(/'gender'/);
    expect(type({ email_subscribe: 'maybe' })).toMatch(/'email_subscribe'/);
    expect(type({ time_zone: 'Mars/Base' })).toMatch(/'time_zone'/);
    expect(type({ time_zone: 'Europe/Paris' })).toBe('ok');
    expect(type({ random_bucket: 5 })).toMatch(/'random_bucket' cannot be set/);
    expect(type({ $bad: 1 })).toMatch(/must not begin with '\$'/);
    expect(type({ s: 's'.repeat(256) })).toMatch(/at most 255/);
  });
});

describe('a whole /users/track body', () => {
  const now = '2024-05-01T00:00:00.000Z';
  it('takes the valid objects and lists the others by array and index', () => {
    const r = validateTrackBody(
      { events: [base, { ...base, time: 'x' }, base], purchases: [{}], attributes: [{ external_id: 'u1' }] },
      now,
    );
    expect(r.objects.events).toHaveLength(2);
    expect(r.objects.attributes).toHaveLength(1);
    expect(r.errors).toEqual([
      { type: expect.stringMatching(/'time'/), input_array: 'events', index: 1 },
      { type: expect.stringMatching(/is required/), input_array: 'purchases', index: 0 },
    ]);
    expect(r.sent).toEqual({ events: true, purchases: true, attributes: true });
  });
  it('75 objects of each kind are fine, 76 refuse the request', () => {
    const events = Array.from({ length: 75 }, () => base);
    expect(
      validateTrackBody({ events, attributes: events.map(() => ({ external_id: 'u' })) }, now).objects.events,
    ).toHaveLength(75);
    expect(() => validateTrackBody({ events: [...events, base] }, now)).toThrow(
      /'events' may hold at most 75 objects per request; got 76/,
    );
    expect(() => validateTrackBody({ purchases: Array(76).fill({}) }, now)).toThrow(/'purchases' may hold at most 75/);
  });
  it('is fatal when nothing is valid or the body is not usable', () => {
    for (const body of [{}, { events: [] }, null, [], 'x', { events: [{ name: 'x' }] }]) {
      expect(() => validateTrackBody(body, now)).toThrow(FatalTrackError);
    }
    expect(() => validateTrackBody({}, now)).toThrow(FATAL_NOTHING_VALID);
    expect(() => validateTrackBody({ events: {} }, now)).toThrow(/'events' must be an array/);
  });
});
