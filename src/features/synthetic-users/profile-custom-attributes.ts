import { bool, iso, q, round } from './format.js';
import type { Rng } from './rng.js';
import * as D from './synthetic-data.js';

/** The custom_attributes object, as JSON (not yet escaped for COPY): values of several types, some nested. */
export function drawCustomAttributes(r: Rng, revenue: number, emailSubscribe: string, lastActive: number): string {
  let categories = '';
  const categoryCount = 1 + r.int(3);
  const categoryStart = r.int(D.CATEGORIES.length);
  for (let c = 0; c < categoryCount; c++)
    categories += (categories ? ',' : '') + q(D.CATEGORIES[(categoryStart + c) % D.CATEGORIES.length]!);
  let customAttributes =
    `{"loyalty_tier":"${r.pick(D.LOYALTY_TIERS)}","loyalty_points":${r.int(20_000)},"lifetime_value":${round(revenue * (1 + r.next() * 0.2), 2)},` +
    `"newsletter_opt_in":${bool(emailSubscribe === 'opted_in')},"favorite_categories":[${categories}],"last_login_at":"${iso(lastActive)}",` +
    `"preferences":{"theme":"${r.chance(0.6) ? 'dark' : 'light'}","notifications":{"sms":${bool(r.chance(0.3))}}},` +
    `"signup_channel":"${r.pick(D.SIGNUP_CHANNELS)}","nps_score":${r.chance(0.3) ? r.int(11) : 'null'}`;
  // A few carry free text with quotes, backslashes, tabs, newlines and emoji, so every escaping layer is exercised.
  if (r.chance(0.02)) customAttributes += `,"note":${JSON.stringify(r.pick(D.AWKWARD_NOTES))}`;
  return customAttributes + '}';
}
