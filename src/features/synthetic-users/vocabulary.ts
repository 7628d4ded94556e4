/**
 * The vocabulary as the line builders use it, and the check, run once when the module loads, that none of it needs
 * JSON escaping: the builders write it into JSON as is.
 */
import * as D from './synthetic-data.js';

export const EVENTS = [...D.CUSTOM_EVENTS].sort((a, b) => (a.name < b.name ? -1 : 1));
export const PRODUCTS = [...D.PRODUCTS].sort((a, b) => (a.name < b.name ? -1 : 1));
export const PREMIUM = PRODUCTS.find((p) => p.name === 'premium_plan')!;

function assertPlain(values: Iterable<string>, what: string): void {
  for (const v of values)
    if (/["\\\u0000-\u001f\t]/.test(v)) throw new Error(`synthetic ${what} "${v}" needs JSON escaping`);
}
assertPlain(
  [
    ...D.COUNTRIES.flatMap((c) => [...c.carriers, ...c.languages, ...c.cities.map((x) => x.tz)]),
    ...D.IOS_MODELS,
    ...D.IOS_VERSIONS,
    ...D.ANDROID_MODELS,
    ...D.ANDROID_VERSIONS,
    ...D.TV_MODELS.flatMap((t) => [t.model, t.os]),
    ...D.APP_VERSIONS,
    ...EVENTS.map((e) => e.name),
    ...PRODUCTS.map((p) => p.name),
    ...D.CANVAS_STEPS,
    ...D.CANVAS_VARIATIONS,
    ...D.CAMPAIGN_NAMES.flatMap((c) => [c.name, ...(c.variations ?? [])]),
    ...D.LOYALTY_TIERS,
    ...D.CATEGORIES,
    ...D.SIGNUP_CHANNELS,
  ],
  'vocabulary',
);
