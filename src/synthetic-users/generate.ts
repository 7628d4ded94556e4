import { createHash } from 'node:crypto';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pgCopy from 'pg-copy-streams';
import type { Pool, PoolClient } from '../db/pool.js';
import { settleAll } from '../lib/settle.js';
import * as D from './synthetic-data.js';

export interface GenerateUsersOptions {
  workspaceId: string;
  count: number;
  seed: number;
  /**
   * Index of the first user (default 0). User `i` of a seed is always the same person, so a second load with
   * `startId` = the first load's count extends the population instead of colliding with it.
   */
  startId?: number;
  /** The moment every generated time is relative to (default: the start of the current UTC day). */
  now?: Date;
  /** Users per COPY statement (default 20,000); progress is reported after each. */
  batchSize?: number;
  /** Connections copying at once (default 2), each in its own transaction, all committed together. */
  lanes?: number;
  onProgress?: (done: number, total: number) => void;
}

export interface GenerateUsersResult {
  users: number;
  aliases: number;
  ms: number;
}

const DAY = 86_400_000;
const COPY_CHUNK = 256 * 1024;
const MAX_INDEX = 0xffff_ffff;

const PROFILE_COLUMNS = [
  'id',
  'workspace_id',
  'service_id',
  'external_id',
  'random_bucket',
  'created_at',
  'updated_at',
  'first_name',
  'last_name',
  'email',
  'dob',
  'home_city',
  'country',
  'phone',
  'language',
  'time_zone',
  'last_coordinates',
  'gender',
  'total_revenue',
  'attributed_campaign',
  'attributed_source',
  'attributed_adgroup',
  'attributed_ad',
  'push_subscribe',
  'email_subscribe',
  'push_opted_in_at',
  'uninstalled_at',
  'custom_attributes',
  'user_aliases',
  'devices',
  'push_tokens',
  'apps',
  'custom_events',
  'purchases',
  'campaigns_received',
  'canvases_received',
  'cards_clicked',
] as const;

/**
 * Bulk-loads `count` synthetic profiles into a workspace with PostgreSQL COPY, every field of the export record
 * populated somewhere in the set. User `i` depends only on (seed, i, now) and the workspace's apps, canvases and
 * cards, so a seed always yields the same people. Ids are reserved from the profiles sequence first so that the
 * alias lookup rows can be copied too, batch by batch.
 *
 * Parsing jsonb makes PostgreSQL the slow side of a COPY, so `lanes` connections (default 2) copy batches at once,
 * each in its own transaction; all are committed only once every lane has finished, and all roll back if any
 * fails, so a failed load leaves nothing behind.
 */
export async function generateUsers(pool: Pool, options: GenerateUsersOptions): Promise<GenerateUsersResult> {
  const started = Date.now();
  const { workspaceId, count, seed } = options;
  const startId = options.startId ?? 0;
  if (!Number.isSafeInteger(count) || count < 0) throw new RangeError('count must be a non-negative integer');
  if (!Number.isSafeInteger(seed) || seed < 0 || seed > MAX_INDEX) throw new RangeError('seed must be an integer from 0 to 4294967295');
  if (!Number.isSafeInteger(startId) || startId < 0 || startId + count - 1 > MAX_INDEX) throw new RangeError('startId + count must stay below 2^32');
  const batchSize = options.batchSize ?? 20_000;
  const batches = Math.ceil(count / batchSize);
  const lanes = Math.max(1, Math.min(options.lanes ?? 2, batches));
  const now = options.now ?? startOfUtcDay(new Date());

  const clients: PoolClient[] = [];
  let aliases = 0;
  let done = 0;
  let nextBatch = 0;
  let failed = false;
  try {
    for (let l = 0; l < lanes; l++) clients.push(await pool.connect());
    for (const client of clients) {
      await client.query('BEGIN');
      // Holding the workspace for the load is what lets the per-row foreign-key checks go (see skipRowTriggers).
      const found = await client.query('SELECT 1 FROM workspaces WHERE id = $1 FOR KEY SHARE', [workspaceId]);
      if (found.rowCount === 0) throw new Error(`workspace ${workspaceId} does not exist`);
      await skipRowTriggers(client);
    }
    const world = await loadWorld(clients[0]!, workspaceId, seed, now.getTime());
    const sequence = (await clients[0]!.query<{ seq: string }>(`SELECT pg_get_serial_sequence('profiles', 'id') AS seq`)).rows[0]!.seq;

    const lane = async (client: PoolClient) => {
      // Batches are handed out as lanes free up; which lane copies a user never changes who the user is.
      for (let b = nextBatch++; b < batches && !failed; b = nextBatch++) {
        const first = b * batchSize;
        const n = Math.min(batchSize, count - first);
        const { rows } = await client.query<{ id: number }>(`SELECT nextval($1::regclass)::bigint AS id FROM generate_series(1, $2)`, [sequence, n]);
        const aliasLines: string[] = [];
        await copyIn(client, `COPY profiles (${PROFILE_COLUMNS.join(', ')}) FROM STDIN`, profileChunks(world, startId + first, rows.map((r) => r.id), aliasLines));
        if (aliasLines.length > 0) {
          await copyIn(client, `COPY profile_aliases (workspace_id, alias_label, alias_name, profile_id) FROM STDIN`, joinChunks(aliasLines));
          aliases += aliasLines.length;
        }
        done += n;
        options.onProgress?.(done, count);
      }
    };
    // Settle every lane before rolling back: a client must not be sent ROLLBACK while its COPY is still running.
    await settleAll(
      clients.map((c) =>
        lane(c).catch((err: unknown) => {
          failed = true;
          throw err;
        }),
      ),
    );
    // A COMMIT failing after another lane's succeeded would leave part of the load; COMMIT after a clean COPY
    // fails only if the server goes away at that moment.
    for (const client of clients) await client.query('COMMIT');
  } catch (err) {
    for (const client of clients) await client.query('ROLLBACK').catch(() => {});
    throw err;
  } finally {
    for (const client of clients) client.release();
  }
  // Fresh statistics, so that segment counts and export shard plans see the new rows at once.
  await pool.query('ANALYZE profiles');
  await pool.query('ANALYZE profile_aliases');
  return { users: count, aliases, ms: Date.now() - started };
}

/**
 * Foreign-key checks run one query per row (a quarter of PostgreSQL's time in this load). This load's rows reference only the
 * workspace locked above and profile ids it reserved itself, so the checks cannot fail: skip them with
 * session_replication_role = replica, which PostgreSQL allows superusers only; other roles simply keep them.
 * Any trigger that is not a constraint check (none today) keeps them too, since replica mode would skip it.
 */
async function skipRowTriggers(client: PoolClient): Promise<void> {
  const { rows } = await client.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_trigger WHERE tgrelid IN ('profiles'::regclass, 'profile_aliases'::regclass) AND NOT tgisinternal`,
  );
  if (rows[0]!.n > 0) return;
  await client.query('SAVEPOINT replica_role');
  try {
    await client.query('SET LOCAL session_replication_role = replica');
    await client.query('RELEASE SAVEPOINT replica_role');
  } catch {
    await client.query('ROLLBACK TO SAVEPOINT replica_role');
  }
}

async function copyIn(client: PoolClient, sql: string, chunks: Iterable<string>): Promise<void> {
  // pipeline() waits on the COPY stream's backpressure, so memory holds only a few chunks at a time.
  await pipeline(Readable.from(chunks, { objectMode: false }), client.query(pgCopy.from(sql)));
}

function* joinChunks(lines: string[]): Generator<string> {
  let buf = '';
  for (const line of lines) {
    buf += line;
    if (buf.length >= COPY_CHUNK) {
      yield buf;
      buf = '';
    }
  }
  if (buf) yield buf;
}

function* profileChunks(world: World, firstIndex: number, ids: number[], aliasLines: string[]): Generator<string> {
  let buf = '';
  for (let k = 0; k < ids.length; k++) {
    buf += profileLine(world, firstIndex + k, ids[k]!, aliasLines);
    if (buf.length >= COPY_CHUNK) {
      yield buf;
      buf = '';
    }
  }
  if (buf) yield buf;
}

export function startOfUtcDay(d: Date): Date {
  return new Date(Date.UTC(d.getUTCFullYear(), d.getUTCMonth(), d.getUTCDate()));
}

// ---------------------------------------------------------------------------------------------------------------
// The world a seed's users live in: the workspace's apps, canvases and cards, and per-seed constants.

interface World {
  workspaceId: string;
  seed: number;
  seedHash: number;
  seedHex: string;
  seedTag: string;
  now: number;
  // JSON fragments below are escaped for COPY already: workspace names are free text.
  apps: { platform: string; nameJson: string; platformJson: string }[];
  /** `json`: `"name":..,"api_canvas_id":..`; steps: `"name":..,"api_canvas_step_id":..` each. */
  canvases: { json: string; steps: string[] }[];
  /** `{"name":..}` each. */
  cards: string[];
  /** `json`: `"name":..,"api_campaign_id":..`; variations: `"variation_name":..,"variation_api_id":..` each. */
  campaigns: { json: string; controlId: string; variations: string[] }[];
  countryTable: D.Country[];
}

async function loadWorld(client: PoolClient, workspaceId: string, seed: number, now: number): Promise<World> {
  const apps = await client.query<{ name: string; platform: string }>('SELECT name, platform FROM apps WHERE workspace_id = $1 ORDER BY name', [workspaceId]);
  const canvases = await client.query<{ name: string; api_id: string }>('SELECT name, api_id FROM canvases WHERE workspace_id = $1 ORDER BY api_id', [
    workspaceId,
  ]);
  const cards = await client.query<{ title: string }>('SELECT title FROM feed_cards WHERE workspace_id = $1 AND NOT archived ORDER BY api_id', [workspaceId]);
  const seedHash = fmix32(seed ^ 0x5bd1e995);
  const countryTable: D.Country[] = [];
  for (const c of D.COUNTRIES) for (let w = 0; w < c.weight; w++) countryTable.push(c);
  const j = (v: unknown) => copyJson(JSON.stringify(v));
  return {
    workspaceId,
    seed,
    seedHash,
    seedHex: hex8(seedHash),
    seedTag: seed.toString(36),
    now,
    apps: (apps.rows.length > 0 ? apps.rows : D.APP_FALLBACK).map((a) => ({ platform: a.platform, nameJson: j(a.name), platformJson: j(a.platform) })),
    canvases: (canvases.rows.length > 0 ? canvases.rows : D.CANVAS_FALLBACK).map((c) => ({
      json: `"name":${j(c.name)},"api_canvas_id":${j(c.api_id)}`,
      steps: D.CANVAS_STEPS.map((s) => `"name":${j(s)},"api_canvas_step_id":"${stableUuid(`${c.api_id}/${s}`)}"`),
    })),
    cards: (cards.rows.length > 0 ? cards.rows.map((r) => r.title) : D.CARD_FALLBACK).map((title) => `{"name":${j(title)}}`),
    campaigns: D.CAMPAIGN_NAMES.map((c) => {
      const id = stableUuid(`campaign/${c.name}`);
      return {
        json: `"name":${j(c.name)},"api_campaign_id":"${id}"`,
        controlId: stableUuid(`control/${c.name}`),
        variations: (c.variations ?? []).map((v) => `"variation_name":${j(v)},"variation_api_id":"${stableUuid(`variation/${c.name}/${v}`)}"`),
      };
    }),
    countryTable,
  };
}

function stableUuid(seed: string): string {
  const h = createHash('sha256').update(seed).digest('hex');
  return `${h.slice(0, 8)}-${h.slice(8, 12)}-4${h.slice(13, 16)}-a${h.slice(17, 20)}-${h.slice(20, 32)}`;
}

// ---------------------------------------------------------------------------------------------------------------
// One user. This is the hot loop of a million-user load, so JSON is written as text from pieces known to need no
// escaping (the vocabulary is checked once, below); only free text goes through JSON.stringify.

/** mulberry32: tiny, fast and good enough for synthetic data; one stream per user, seeded from (seed, index). */
class Rng {
  private s: number;
  constructor(seed: number) {
    this.s = seed | 0;
  }
  next(): number {
    this.s = (this.s + 0x6d2b79f5) | 0;
    let t = Math.imul(this.s ^ (this.s >>> 15), 1 | this.s);
    t = (t + Math.imul(t ^ (t >>> 7), 61 | t)) ^ t;
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  u32(): number {
    return (this.next() * 4294967296) >>> 0;
  }
  hex(words: number): string {
    let out = '';
    for (let i = 0; i < words; i++) out += hex8(this.u32());
    return out;
  }
  uuid(): string {
    const a = this.u32();
    const b = this.u32();
    const c = this.u32();
    const d = this.u32();
    return `${hex8(a)}-${HEX[b >>> 24]}${HEX[(b >>> 16) & 255]}-4${HEX[(b >>> 8) & 255]!.slice(1)}${HEX[b & 255]}-${HEX[0x80 | ((c >>> 24) & 0x3f)]}${HEX[(c >>> 16) & 255]}-${HEX[(c >>> 8) & 255]}${HEX[c & 255]}${hex8(d)}`;
  }
  digits(n: number): string {
    let out = '';
    for (let i = 0; i < n; i++) out += DIGITS[this.int(10)];
    return out;
  }
  /** A time uniformly between a and b (ms). */
  between(a: number, b: number): number {
    return b <= a ? a : a + Math.floor(this.next() * (b - a));
  }
}

function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}

const HEX = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
const DIGITS = '0123456789';
const P2 = Array.from({ length: 100 }, (_, i) => String(i).padStart(2, '0'));
const P3 = Array.from({ length: 1000 }, (_, i) => String(i).padStart(3, '0'));

function hex8(n: number): string {
  return HEX[n >>> 24]! + HEX[(n >>> 16) & 255]! + HEX[(n >>> 8) & 255]! + HEX[n & 255]!;
}

const dayPrefix = new Map<number, string>();
/** `YYYY-MM-DDTHH:MM:SS.mmmZ`, as Date#toISOString but without a Date per call (a load formats ~30M times). */
function iso(ms: number): string {
  const day = Math.floor(ms / DAY);
  let prefix = dayPrefix.get(day);
  if (prefix === undefined) dayPrefix.set(day, (prefix = new Date(day * DAY).toISOString().slice(0, 11)));
  let rest = Math.floor(ms) - day * DAY;
  const h = Math.floor(rest / 3_600_000);
  rest -= h * 3_600_000;
  const m = Math.floor(rest / 60_000);
  rest -= m * 60_000;
  const s = Math.floor(rest / 1000);
  return `${prefix}${P2[h]}:${P2[m]}:${P2[s]}.${P3[rest - s * 1000]}Z`;
}

const COPY_ESCAPES: Record<string, string> = { '\\': '\\\\', '\n': '\\n', '\r': '\\r', '\t': '\\t' };
const NEEDS_ESCAPE = /[\\\n\r\t]/;
/** COPY text format: backslash, newline, carriage return and tab are escaped; null is \N. */
export function copyText(v: string | null | undefined): string {
  if (v === null || v === undefined) return '\\N';
  return NEEDS_ESCAPE.test(v) ? v.replace(/[\\\n\r\t]/g, (c) => COPY_ESCAPES[c]!) : v;
}
/** JSON text inside COPY text: JSON never holds a raw tab or newline (they are \t, \n), so only backslashes double. */
export function copyJson(json: string): string {
  return json.includes('\\') ? json.replaceAll('\\', '\\\\') : json;
}
/** A JSON string literal of vocabulary known to need no escaping. */
const q = (s: string) => `"${s}"`;
const bool = (b: boolean) => (b ? 'true' : 'false');

const ascii = (s: string) =>
  s
    .normalize('NFD')
    .replace(/[\u0300-\u036f]/g, '')
    .toLowerCase()
    .replace(/[^a-z]/g, '');
const asciiCache = new Map<string, string>();
const slug = (s: string) => {
  let v = asciiCache.get(s);
  if (v === undefined) asciiCache.set(s, (v = ascii(s)));
  return v;
};

const EVENTS = [...D.CUSTOM_EVENTS].sort((a, b) => (a.name < b.name ? -1 : 1));
const PRODUCTS = [...D.PRODUCTS].sort((a, b) => (a.name < b.name ? -1 : 1));
const PREMIUM = PRODUCTS.find((p) => p.name === 'premium_plan')!;

function assertPlain(values: Iterable<string>, what: string): void {
  for (const v of values) if (/["\\\u0000-\u001f\t]/.test(v)) throw new Error(`synthetic ${what} "${v}" needs JSON escaping`);
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

/** A history aggregate entry keyed by its name, `"name": {name, first, last, count}` (migration 0100). */
const aggregate = (name: string, first: number, last: number, count: number) =>
  `"${name}":{"name":"${name}","first":"${iso(first)}","last":"${iso(last)}","count":${count}}`;

function profileLine(w: World, index: number, id: number, aliasLines: string[]): string {
  const r = new Rng(fmix32(w.seedHash ^ Math.imul(index ^ 0x27d4eb2d, 0x9e3779b1)) ^ index);
  const now = w.now;

  // When: created within two years; about half of the older users have not been seen for 90 days or more.
  const created = now - 3_600_000 - r.int(730 * DAY);
  const isNew = created > now - 90 * DAY;
  const lastActive = isNew || r.chance(0.55) ? Math.max(created, now - r.int(89 * DAY)) : r.between(created, now - 90 * DAY);

  // Who and where.
  const country = r.pick(w.countryTable);
  const city = r.pick(country.cities);
  const female = r.chance(0.49);
  const first = r.pick(female ? country.names.female : country.names.male);
  const last = r.pick(country.names.last);
  const genderRoll = r.next();
  const gender = genderRoll < 0.9 ? (female ? 'F' : 'M') : genderRoll < 0.93 ? 'O' : genderRoll < 0.95 ? 'N' : genderRoll < 0.97 ? 'P' : '\\N';
  const email = r.chance(0.92) ? `${slug(first)}.${slug(last)}.${index}@${r.pick(D.EMAIL_DOMAINS)}` : '\\N';
  const phone = r.chance(0.85) ? r.pick(country.phone.prefixes) + DIGITS[1 + r.int(9)] + r.digits(country.phone.digits - 1) : '\\N';
  const dob = r.chance(0.8) ? `${1955 + r.int(52)}-${P2[1 + r.int(12)]}-${P2[1 + r.int(28)]}` : '\\N';
  const coordinates = `{${round(city.lon + (r.next() - 0.5) * 0.1, 5)},${round(city.lat + (r.next() - 0.5) * 0.1, 5)}}`;
  // Keys that grow with the index make their unique-index inserts appends to the rightmost leaf.
  const indexText = String(index).padStart(10, '0');
  const externalId = r.chance(0.92) ? `u-${w.seed}-${indexText}` : '\\N';
  const serviceId = w.seedHex + hex8(index) + hex8(Math.floor(created / 1000));
  const randomBucket = r.int(10_000);

  const attribution = r.chance(0.55)
    ? `${r.pick(D.ATTRIBUTION.campaigns)}\t${r.pick(D.ATTRIBUTION.sources)}\t${r.pick(D.ATTRIBUTION.adgroups)}\t${r.pick(D.ATTRIBUTION.ads)}`
    : '\\N\t\\N\t\\N\t\\N';
  const pushRoll = r.next();
  const pushSubscribe = pushRoll < 0.45 ? 'opted_in' : pushRoll < 0.85 ? 'subscribed' : 'unsubscribed';
  const emailRoll = r.next();
  const emailSubscribe = emailRoll < 0.3 ? 'opted_in' : emailRoll < 0.85 ? 'subscribed' : 'unsubscribed';
  const pushOptedInAt = pushSubscribe === 'opted_in' ? iso(r.between(created, lastActive)) : '\\N';
  const uninstalledAt = r.chance(0.08) ? r.between(lastActive, now) : -1;

  // Custom events and purchases: all history, first/last/count.
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
  let purchases = '';
  let revenue = 0;
  if (r.chance(0.35)) {
    const bought = PRODUCTS.filter((p) => r.chance(p.p));
    for (const p of bought.length > 0 ? bought : [PREMIUM]) {
      const firstAt = created + Math.floor(r.next() * span * 0.6);
      const months = Math.max(1, (lastActive - firstAt) / (30 * DAY));
      const count = 1 + Math.floor(r.next() * 2 * p.rate * months);
      const lastAt = count === 1 ? firstAt : p.name === 'premium_plan' ? Math.max(firstAt, lastActive - r.int(20 * DAY)) : r.between(firstAt, lastActive);
      purchases += (purchases ? ',' : '') + aggregate(p.name, firstAt, lastAt, count);
      revenue += count * p.price;
    }
  }

  // Devices, the apps on them, and their push tokens.
  const deviceCount = r.chance(0.85) ? 1 : r.chance(0.8) ? 2 : 3;
  let devices = '';
  let pushTokens = '';
  let apps = '';
  const appsSeen: string[] = [];
  for (let d = 0; d < deviceCount; d++) {
    const roll = r.next();
    const deviceId = r.uuid();
    const adTracking = r.chance(roll < 0.5 ? 0.4 : 0.8);
    const carrier = r.chance(0.9) ? q(r.pick(country.carriers)) : 'null';
    let platform: string;
    let device: string;
    if (roll < 0.5) {
      platform = 'ios';
      const idfa = adTracking ? q(r.uuid().toUpperCase()) : 'null';
      device = `{"model":"${r.pick(D.IOS_MODELS)}","os":"${r.pick(D.IOS_VERSIONS)}","carrier":${carrier},"idfv":"${r.uuid().toUpperCase()}","idfa":${idfa},"device_id":"${deviceId}","ad_tracking_enabled":${bool(adTracking)}}`;
    } else if (roll < 0.95) {
      platform = 'android';
      const adId = adTracking ? q(r.uuid()) : 'null';
      device = `{"model":"${r.pick(D.ANDROID_MODELS)}","os":"${r.pick(D.ANDROID_VERSIONS)}","carrier":${carrier},"device_id":"${deviceId}","store_ad_id":${adId},"ad_tracking_enabled":${bool(adTracking)}}`;
    } else {
      const tv = r.pick(D.TV_MODELS);
      platform = tv.platform;
      device = `{"model":"${tv.model}","os":"${tv.os}","carrier":null,"device_id":"${deviceId}","tv_ad_id":"${r.uuid()}","ad_tracking_enabled":${bool(adTracking)}}`;
    }
    devices += (devices ? ',' : '') + device;
    const app = w.apps.find((a) => a.platform === platform) ?? (d === 0 ? w.apps[0] : undefined);
    if (!app) continue;
    if (!appsSeen.includes(app.nameJson)) {
      appsSeen.push(app.nameJson);
      apps +=
        (apps ? ',' : '') +
        `{"name":${app.nameJson},"platform":${app.platformJson},"version":"${r.pick(D.APP_VERSIONS)}","sessions":${appOpens},"first_used":"${iso(created)}","last_used":"${iso(lastActive)}"}`;
    }
    if ((platform === 'ios' || platform === 'android') && r.chance(0.6)) {
      const token = platform === 'ios' ? r.hex(8) : `${r.hex(3).slice(0, 22)}:APA91b${r.hex(10)}`;
      const enabled = pushSubscribe !== 'unsubscribed' && r.chance(0.9);
      pushTokens +=
        (pushTokens ? ',' : '') +
        `{"app":${app.nameJson},"platform":${app.platformJson},"token":"${token}","device_id":"${deviceId}","notifications_enabled":${bool(enabled)}}`;
    }
  }

  // Messaging received in the last 90 days.
  const recentFloor = Math.max(created, now - 89 * DAY);
  let campaigns = '';
  const campaignCount = r.chance(0.75) ? 0 : r.chance(0.8) ? 1 : 2;
  const campaignStart = r.int(w.campaigns.length);
  for (let c = 0; c < campaignCount; c++) {
    const campaign = w.campaigns[(campaignStart + c) % w.campaigns.length]!;
    const converted = r.chance(0.2);
    let entry =
      `{${campaign.json},"last_received":"${iso(r.between(recentFloor, now))}",` +
      `"engaged":{"opened_email":${bool(r.chance(0.4))},"opened_push":${bool(r.chance(0.25))},"clicked_email":${bool(r.chance(0.1))},"clicked_triggered_in_app_message":${bool(r.chance(0.05))}},` +
      `"converted":${bool(converted)},"multiple_converted":{"Primary Conversion Event - A":${bool(converted)},"Conversion Event - B":${bool(converted && r.chance(0.3))}}`;
    if (campaign.variations.length > 0) {
      const inControl = r.chance(0.1);
      const v = r.pick(campaign.variations);
      entry += inControl ? `,"variation_name":"Control","variation_api_id":"${campaign.controlId}","in_control":true` : `,${v},"in_control":false`;
    }
    campaigns += (campaigns ? ',' : '') + entry + '}';
  }
  let canvases = '';
  const canvasCount = r.chance(0.8) ? 0 : r.chance(0.8) ? 1 : 2;
  const canvasStart = r.int(w.canvases.length);
  for (let c = 0; c < canvasCount && c < w.canvases.length; c++) {
    const canvas = w.canvases[(canvasStart + c) % w.canvases.length]!;
    const entered = r.between(recentFloor, now);
    const lastMessage = Math.min(now, entered + r.int(2 * DAY));
    const inControl = r.chance(0.1);
    let steps = '';
    const stepCount = inControl ? 0 : 1 + r.int(2);
    for (let k = 0; k < stepCount; k++) {
      steps += (steps ? ',' : '') + `{${canvas.steps[k]},"last_received":"${iso(Math.min(lastMessage, entered + k * 3_600_000))}"}`;
    }
    canvases +=
      (canvases ? ',' : '') +
      `{${canvas.json},"last_received_message":"${iso(lastMessage)}","last_entered":"${iso(entered)}",` +
      `"variation_name":"${inControl ? 'Control' : r.pick(D.CANVAS_VARIATIONS)}","in_control":${bool(inControl)},` +
      `"last_entered_control_at":${inControl ? `"${iso(entered)}"` : 'null'},"last_exited":"${iso(Math.min(now, lastMessage + r.int(5 * DAY)))}",` +
      `"steps_received":[${steps}]}`;
  }
  let cardsClicked = '';
  if (r.chance(0.3)) {
    const n = Math.min(w.cards.length, 1 + r.int(2));
    const start = r.int(w.cards.length);
    for (let c = 0; c < n; c++) cardsClicked += (cardsClicked ? ',' : '') + w.cards[(start + c) % w.cards.length];
  }

  let categories = '';
  const categoryCount = 1 + r.int(3);
  const categoryStart = r.int(D.CATEGORIES.length);
  for (let c = 0; c < categoryCount; c++) categories += (categories ? ',' : '') + q(D.CATEGORIES[(categoryStart + c) % D.CATEGORIES.length]!);
  let customAttributes =
    `{"loyalty_tier":"${r.pick(D.LOYALTY_TIERS)}","loyalty_points":${r.int(20_000)},"lifetime_value":${round(revenue * (1 + r.next() * 0.2), 2)},` +
    `"newsletter_opt_in":${bool(emailSubscribe === 'opted_in')},"favorite_categories":[${categories}],"last_login_at":"${iso(lastActive)}",` +
    `"preferences":{"theme":"${r.chance(0.6) ? 'dark' : 'light'}","notifications":{"sms":${bool(r.chance(0.3))}}},` +
    `"signup_channel":"${r.pick(D.SIGNUP_CHANNELS)}","nps_score":${r.chance(0.3) ? r.int(11) : 'null'}`;
  // A few carry free text with quotes, backslashes, tabs, newlines and emoji, so every escaping layer is exercised.
  if (r.chance(0.02)) customAttributes += `,"note":${JSON.stringify(r.pick(D.AWKWARD_NOTES))}`;
  customAttributes += '}';

  let userAliases = '';
  if (r.chance(0.7)) {
    const name = `amp-${w.seedTag}-${indexText}`;
    userAliases = `{"alias_name":"${name}","alias_label":"amplitude_id"}`;
    aliasLines.push(`${w.workspaceId}\tamplitude_id\t${name}\t${id}\n`);
  }
  if (r.chance(0.25)) {
    const name = `shop-${w.seedTag}-${indexText}`;
    userAliases += (userAliases ? ',' : '') + `{"alias_name":"${name}","alias_label":"shopify_customer_id"}`;
    aliasLines.push(`${w.workspaceId}\tshopify_customer_id\t${name}\t${id}\n`);
  }

  const updated = Math.max(lastActive, uninstalledAt);
  return (
    `${id}\t${w.workspaceId}\t${serviceId}\t${externalId}\t${randomBucket}\t${iso(created)}\t${iso(updated)}\t` +
    `${copyText(first)}\t${copyText(last)}\t${email}\t${dob}\t${copyText(city.name)}\t${country.code}\t${phone}\t` +
    `${r.pick(country.languages)}\t${city.tz}\t${coordinates}\t${gender}\t${round(revenue, 2)}\t${attribution}\t` +
    `${pushSubscribe}\t${emailSubscribe}\t${pushOptedInAt}\t${uninstalledAt < 0 ? '\\N' : iso(uninstalledAt)}\t` +
    `${copyJson(customAttributes)}\t[${userAliases}]\t[${devices}]\t[${pushTokens}]\t[${apps}]\t` +
    `{${customEvents}}\t{${purchases}}\t[${campaigns}]\t[${canvases}]\t[${cardsClicked}]\n`
  );
}

function round(v: number, digits: number): number {
  const f = 10 ** digits;
  return Math.round(v * f) / f;
}
