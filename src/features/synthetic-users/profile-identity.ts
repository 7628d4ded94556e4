import { DIGITS, P2, hex8, round } from './format.js';
import type { Rng } from './rng.js';
import * as D from './synthetic-data.js';
import type { World } from './world.js';

/**
 * Who a user is and where: name, contact and location columns, and the ids the row is found by. Values are COPY text
 * already (`\N` for null), except the names and city, which are free text.
 */
export interface Identity {
  country: D.Country;
  city: D.City;
  first: string;
  last: string;
  gender: string;
  email: string;
  phone: string;
  dob: string;
  coordinates: string;
  /** The index padded to ten digits, which the external id and alias names end with. */
  indexText: string;
  externalId: string;
  serviceId: string;
  randomBucket: number;
}

export function drawIdentity(r: Rng, w: World, index: number, created: number): Identity {
  const country = r.pick(w.countryTable);
  const city = r.pick(country.cities);
  const female = r.chance(0.49);
  const first = r.pick(female ? country.names.female : country.names.male);
  const last = r.pick(country.names.last);
  const genderRoll = r.next();
  const gender =
    genderRoll < 0.9
      ? female
        ? 'F'
        : 'M'
      : genderRoll < 0.93
        ? 'O'
        : genderRoll < 0.95
          ? 'N'
          : genderRoll < 0.97
            ? 'P'
            : '\\N';
  const email = r.chance(0.92) ? `${slug(first)}.${slug(last)}.${index}@${r.pick(D.EMAIL_DOMAINS)}` : '\\N';
  const phone = r.chance(0.85)
    ? r.pick(country.phone.prefixes) + DIGITS[1 + r.int(9)] + r.digits(country.phone.digits - 1)
    : '\\N';
  const dob = r.chance(0.8) ? `${1955 + r.int(52)}-${P2[1 + r.int(12)]}-${P2[1 + r.int(28)]}` : '\\N';
  const coordinates = `{${round(city.lon + (r.next() - 0.5) * 0.1, 5)},${round(city.lat + (r.next() - 0.5) * 0.1, 5)}}`;
  // Keys that grow with the index make their unique-index inserts appends to the rightmost leaf.
  const indexText = String(index).padStart(10, '0');
  const externalId = r.chance(0.92) ? `u-${w.seed}-${indexText}` : '\\N';
  const serviceId = w.seedHex + hex8(index) + hex8(Math.floor(created / 1000));
  const randomBucket = r.int(10_000);
  return {
    country,
    city,
    first,
    last,
    gender,
    email,
    phone,
    dob,
    coordinates,
    indexText,
    externalId,
    serviceId,
    randomBucket,
  };
}

const ascii = (s: string) =>
  s
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z]/g, '');
const asciiCache = new Map<string, string>();
/** A name as the ASCII letters of an email address. */
const slug = (s: string) => {
  let v = asciiCache.get(s);
  if (v === undefined) asciiCache.set(s, (v = ascii(s)));
  return v;
};
