// Custom events and purchases: all history, first/last/count.
import { DAY, iso } from './format.js';
import type { Rng } from './rng.js';
import { EVENTS, PREMIUM, PRODUCTS } from './vocabulary.js';

/** A history aggregate entry keyed by its name, `"name": {name, first, last, count}` (migration 0100). */
const aggregate = (name: string, first: number, last: number, count: number) =>
  `"${name}":{"name":"${name}","first":"${iso(first)}","last":"${iso(last)}","count":${count}}`;

/** The custom_events object's members, and how often the app was opened (the apps' session count). */
export function drawCustomEvents(r: Rng, created: number, lastActive: number): { json: string; appOpens: number } {
  const span = lastActive - created;
  let customEvents = '';
  let appOpens = 1;
  for (const e of EVENTS) {
    if (!r.chance(e.p)) continue;
    const firstAt = created + Math.floor(r.next() * span * 0.5);
    const weeks = Math.max(1, (lastActive - firstAt) / (7 * DAY));
    const count = e.rate === 0 ? 1 : 1 + Math.floor(r.next() * 2 * e.rate * weeks);
    const lastAt = count === 1 ? firstAt : e.name === 'app_opened' ? lastActive : r.between(firstAt, lastActive);
    if (e.name === 'app_opened') appOpens = count;
    customEvents += (customEvents ? ',' : '') + aggregate(e.name, firstAt, lastAt, count);
  }
  return { json: customEvents, appOpens };
}

/** The purchases object's members, and the revenue they add up to. */
export function drawPurchases(r: Rng, created: number, lastActive: number): { json: string; revenue: number } {
  const span = lastActive - created;
  let purchases = '';
  let revenue = 0;
  if (r.chance(0.35)) {
    const bought = PRODUCTS.filter((p) => r.chance(p.p));
    for (const p of bought.length > 0 ? bought : [PREMIUM]) {
      const firstAt = created + Math.floor(r.next() * span * 0.6);
      const months = Math.max(1, (lastActive - firstAt) / (30 * DAY));
      const count = 1 + Math.floor(r.next() * 2 * p.rate * months);
      const lastAt =
        count === 1
          ? firstAt
          : p.name === 'premium_plan'
            ? Math.max(firstAt, lastActive - r.int(20 * DAY))
            : r.between(firstAt, lastActive);
      purchases += (purchases ? ',' : '') + aggregate(p.name, firstAt, lastAt, count);
      revenue += count * p.price;
    }
  }
  return { json: purchases, revenue };
}
