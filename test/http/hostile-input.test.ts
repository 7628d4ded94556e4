import { beforeAll, describe, expect, it } from 'vitest';
import type { InjectOptions, LightMyRequestResponse } from 'fastify';
import { bulkImportJob } from '../../jobs/bulk-import.js';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import type { RouteEntry } from '../../src/platform/http/route-config.js';
import { LocalStore } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import { waitFor } from '../helpers/cli.js';
import { ERROR_SCHEMA, ORIGIN } from '../helpers/scim.js';
import { bearer, createScimToken, seedWorkspace } from '../helpers/seed.js';

/**
 * Input PostgreSQL would refuse (NUL, unpaired surrogates) and JSON nested deep enough to overflow recursive code:
 * refused with a 4xx in the route's own error format, never a 500, and nothing stored. /users/track and imports refuse
 * such an object alone and take the rest, and a refused object is never staged, so ingestion never stalls on it.
 */

// Every route is called many times here: the shared catalog buckets (50 a minute by default) are raised out of the way.
const env = useTestEnv({
  config: {
    RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '100000',
    RATE_LIMIT_CATALOG_FIELDS_SELECTIONS_PER_MINUTE: '100000',
    RATE_LIMIT_PREFERENCE_CENTER_WRITE_PER_MINUTE: '100000',
  },
  workspaces: ['ws'],
});
let scimToken: string;

beforeAll(async () => {
  scimToken = await createScimToken(env.ctx.pool, env.ws.companyId);
  // Things for the requests to find, so that they get past "not found" to the code that stores.
  await env.ctx.pool.query(
    `INSERT INTO canvases (workspace_id, api_id, name, status, api_triggered) VALUES ($1, 'welcome', 'Welcome', 'active', true)`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO segments (workspace_id, api_id, name, filter) VALUES ($1, 'vips', 'VIPs', '{"custom_attribute": "vip", "op": "eq", "value": true}')`,
    [env.ws.workspaceId],
  );
});

const NUL = 'a\u0000b';
const deepJson = (levels: number, inner = '1') => `${'{"k":'.repeat(levels)}${inner}${'}'.repeat(levels)}`;

/** Every table of the test's schema: its row count and a hash of its rows. */
async function snapshot(): Promise<Record<string, string>> {
  const schema = env.config.DATABASE_SCHEMA;
  const { rows } = await env.ctx.pool.query<{ name: string }>(
    `SELECT tablename AS name FROM pg_tables WHERE schemaname = $1 ORDER BY 1`,
    [schema],
  );
  const out: Record<string, string> = {};
  for (const { name } of rows) {
    const r = await env.ctx.pool.query<{ n: number; h: string }>(
      `SELECT count(*)::int AS n, md5(coalesce(string_agg(t::text, '|' ORDER BY t::text), '')) AS h FROM "${schema}"."${name}" t`,
    );
    out[name] = `${r.rows[0]!.n} rows, ${r.rows[0]!.h}`;
  }
  return out;
}

type Route = RouteEntry;

/** Every route the app registered, HEAD twins excluded: new endpoint families are covered as they land. */
const allRoutes = (): Route[] => env.app.routeCatalog.filter((r) => r.method !== 'HEAD');

const withParams = (url: string, value: (name: string) => string) =>
  url.replace(/:([A-Za-z_]+)/g, (_, name: string) => value(name)).replace(/\*$/, () => value('*'));
const paramsOf = (url: string) =>
  [...url.matchAll(/:([A-Za-z_]+)/g)].map((m) => m[1]!).concat(url.endsWith('*') ? ['*'] : []);

function headersFor(route: Route): Record<string, string> {
  const auth =
    route.config.auth === 'scim' ? { ...bearer(scimToken), 'x-request-origin': ORIGIN } : bearer(env.ws.apiKey);
  return { ...auth, 'content-type': 'application/json' };
}

interface JsonSchema {
  type?: string | string[];
  enum?: unknown[];
  const?: unknown;
  anyOf?: JsonSchema[];
  oneOf?: JsonSchema[];
  items?: JsonSchema;
  properties?: Record<string, JsonSchema>;
}

/** The route's operation in the generated OpenAPI document (query parameters, request body). */
function operationOf(route: Route):
  | {
      parameters?: Array<{ in: string; name: string }>;
      requestBody?: { content?: Record<string, { schema?: JsonSchema }> };
    }
  | undefined {
  const doc = env.app.swagger() as { paths?: Record<string, Record<string, unknown>> };
  const path = route.url.replace(/:([A-Za-z_]+)/g, '{$1}');
  return doc.paths?.[path]?.[route.method.toLowerCase()] as ReturnType<typeof operationOf>;
}

/** A body of the documented shape with every free string set to `text` (enums keep a valid value). */
function sampleOf(schema: JsonSchema | undefined, text: string, level = 0): unknown {
  if (!schema || level > 8) return text;
  if (schema.enum) return schema.enum[0];
  if ('const' in schema) return schema.const;
  const alternatives = schema.anyOf ?? schema.oneOf;
  if (alternatives) return sampleOf(alternatives.find((a) => a.type !== 'null') ?? alternatives[0], text, level + 1);
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type;
  switch (type) {
    case 'number':
    case 'integer':
      return 1;
    case 'boolean':
      return true;
    case 'array':
      return [sampleOf(schema.items, text, level + 1)];
    case 'object':
      return Object.fromEntries(
        Object.entries(schema.properties ?? { s: {} }).map(([k, v]) => [k, sampleOf(v, text, level + 1)]),
      );
    default:
      return text;
  }
}

const hasBody = (route: Route) =>
  route.method !== 'GET' && (route.method !== 'DELETE' || operationOf(route)?.requestBody !== undefined);

/** Why an answer is not a refusal in the route's error format ('' when it is one). */
function notARefusal(route: Route, res: LightMyRequestResponse, status?: number): string {
  const where = `${route.method} ${route.url}`;
  if (status !== undefined ? res.statusCode !== status : res.statusCode < 400 || res.statusCode >= 500)
    return `${where}: ${res.statusCode} ${res.body.slice(0, 200)}`;
  if (!/json/.test(String(res.headers['content-type']))) return `${where}: content type ${res.headers['content-type']}`;
  const body = res.json() as Record<string, unknown>;
  const ok =
    route.config.errorFormat === 'scim'
      ? (body.schemas as string[] | undefined)?.includes(ERROR_SCHEMA) && body.status === res.statusCode
      : route.config.errorFormat === 'catalog'
        ? body.message === 'Invalid Request' && Array.isArray(body.errors)
        : route.config.errorFormat === 'error'
          ? typeof body.error === 'string'
          : typeof body.message === 'string';
  return ok ? '' : `${where}: body ${res.body.slice(0, 200)}`;
}

async function send(route: Route, options: Omit<InjectOptions, 'method' | 'headers'>): Promise<LightMyRequestResponse> {
  return env.app.inject({ method: route.method as 'GET', headers: headersFor(route), ...options });
}

describe('every route: hostile input gets a 4xx in the route error format, and changes nothing', () => {
  it('has routes of every family to check', () => {
    const urls = allRoutes().map((r) => r.url);
    for (const url of [
      '/users/track',
      '/catalogs/:catalog_name/items',
      '/scim/v2/Users/:id',
      '/messages/live_activity/update',
      '/canvas/trigger/schedule/create',
    ]) {
      expect(urls).toContain(url);
    }
  });

  it('a NUL in any path parameter: 400 before any handler runs', async () => {
    const before = await snapshot();
    const failures: string[] = [];
    let checked = 0;
    for (const route of allRoutes()) {
      for (const param of paramsOf(route.url)) {
        const url = withParams(route.url, (name) => (name === param ? 'a%00b' : 'x'));
        const res = await send(route, { url, payload: hasBody(route) ? '{}' : undefined });
        const why = notARefusal(route, res, 400);
        if (why) failures.push(`${why} (param ${param})`);
        checked++;
      }
    }
    expect(failures).toEqual([]);
    expect(checked).toBeGreaterThan(10);
    expect(await snapshot()).toEqual(before);
  });

  it('a NUL in any query value (and in a query key): 400', async () => {
    const before = await snapshot();
    const failures: string[] = [];
    for (const route of allRoutes()) {
      const documented = (operationOf(route)?.parameters ?? []).filter((p) => p.in === 'query').map((p) => p.name);
      for (const name of [...documented, 'undocumented']) {
        const base = withParams(route.url, () => 'x');
        for (const query of [`${encodeURIComponent(name)}=a%00b`, `${encodeURIComponent(name)}%00=1`]) {
          const res = await send(route, { url: `${base}?${query}`, payload: hasBody(route) ? '{}' : undefined });
          const why = notARefusal(route, res, 400);
          if (why) failures.push(`${why} (query ${query})`);
        }
      }
    }
    expect(failures).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });

  it('the SCIM filter and the export status prefix, named in the issue: 400 in their formats', async () => {
    const scim = await env.app.inject({
      method: 'GET',
      url: '/scim/v2/Users?filter=userName%20eq%20%22a%00b%22',
      headers: { ...bearer(scimToken), 'x-request-origin': ORIGIN },
    });
    expect(scim.statusCode).toBe(400);
    expect(scim.json()).toMatchObject({
      schemas: [ERROR_SCHEMA],
      status: 400,
      scimType: 'invalidValue',
      detail: expect.stringMatching(/^Invalid query: 'filter' contains a NUL character/),
    });
    const status = await env.app.inject({
      method: 'GET',
      url: '/users/export/status?object_prefix=%00',
      headers: bearer(env.ws.apiKey),
    });
    expect(status.statusCode).toBe(400);
    expect(status.json()).toEqual({
      message: "Invalid query: 'object_prefix' contains a NUL character (U+0000), which cannot be stored",
    });
    const items = await env.app.inject({ method: 'GET', url: '/catalogs/a%00b/items', headers: bearer(env.ws.apiKey) });
    expect(items.statusCode).toBe(400);
    expect(items.json().errors[0]).toMatchObject({
      id: 'invalid-request',
      message: expect.stringContaining("'catalog_name' contains a NUL character"),
    });
  });

  it('a NUL in a body string of the documented shape: 4xx, never 500', async () => {
    const before = await snapshot();
    const failures: string[] = [];
    const routes = allRoutes().filter(hasBody);
    expect(routes.length).toBeGreaterThan(15);
    for (const route of routes) {
      const schema = operationOf(route)?.requestBody?.content?.['application/json']?.schema;
      for (const text of [NUL, 'lone \ud800 surrogate']) {
        const res = await send(route, {
          url: withParams(route.url, () => 'x'),
          payload: JSON.stringify(sampleOf(schema, text)),
        });
        const why = notARefusal(route, res);
        if (why) failures.push(why);
      }
    }
    expect(failures).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });

  it('a body nested 10,000 deep: 400 for the whole request, before it is parsed', async () => {
    const before = await snapshot();
    const failures: string[] = [];
    for (const route of allRoutes().filter(hasBody)) {
      const res = await send(route, {
        url: withParams(route.url, () => 'x'),
        payload: `{"items":[${deepJson(10_000)}]}`,
      });
      const why = notARefusal(route, res, 400);
      if (why) failures.push(why);
      else if (route.config.errorFormat === 'catalog') {
        // The catalog routes' documented error id for values nested too deep.
        if (res.json().errors[0].id !== 'too-deep-nesting-in-value-object')
          failures.push(`${route.method} ${route.url}: ${res.body}`);
      }
    }
    expect(failures).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });

  it('a text/plain body, with or without a charset: 415 naming the media type sent and the one wanted, on every route that takes a body', async () => {
    const before = await snapshot();
    const failures: string[] = [];
    for (const route of allRoutes().filter(hasBody)) {
      for (const type of ['text/plain', 'text/plain; charset=utf-8']) {
        const res = await env.app.inject({
          method: route.method as 'POST',
          url: withParams(route.url, () => 'x'),
          headers: { ...headersFor(route), 'content-type': type },
          payload: '{"items": []}',
        });
        const why = notARefusal(route, res, 415);
        const text = why ? '' : JSON.stringify(res.json());
        if (why) failures.push(why);
        else if (!text.includes(`the request sent Content-Type \\"${type}\\"`) || !text.includes('application/json'))
          failures.push(`${route.method} ${route.url}: ${text}`);
      }
    }
    expect(failures).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });

  it('a key twice in one object, at the top or nested: 400 naming the key and its path, nothing changed', async () => {
    const before = await snapshot();
    const failures: string[] = [];
    for (const route of allRoutes().filter(hasBody)) {
      for (const [payload, named] of [
        ['{"items": [], "items": [1]}', 'the key \\"items\\" appears more than once in body;'],
        [
          '{"items": [{"a": 1}, {"a": 1, "b": {"c": 2, "\\u0063": 3}}]}',
          'the key \\"c\\" appears more than once in body.items[1].b;',
        ],
      ] as const) {
        const res = await send(route, { url: withParams(route.url, () => 'x'), payload });
        const why = notARefusal(route, res, 400);
        if (why) failures.push(why);
        else if (!JSON.stringify(res.json()).includes(named))
          failures.push(`${route.method} ${route.url}: ${res.body}`);
      }
    }
    expect(failures).toEqual([]);
    expect(await snapshot()).toEqual(before);
  });

  it('__proto__ anywhere, or prototype inside constructor: 400 naming the key, its path and why, nothing changed', async () => {
    const before = await snapshot();
    const failures: string[] = [];
    for (const route of allRoutes().filter(hasBody)) {
      for (const [payload, named] of [
        [
          '{"__proto__": {"admin": true}}',
          'the key \\"__proto__\\" in body is not accepted: it names an object\'s prototype',
        ],
        [
          '{"items": [{"x": {"constructor": {"prototype": {"admin": true}}}}]}',
          'the key \\"prototype\\" in body.items[0].x.constructor is not accepted',
        ],
        ['{"items": [{"\\u005f_proto__": 1}]}', 'the key \\"__proto__\\" in body.items[0] is not accepted'],
      ] as const) {
        const res = await send(route, { url: withParams(route.url, () => 'x'), payload });
        const why = notARefusal(route, res, 400);
        if (why) failures.push(why);
        else if (!JSON.stringify(res.json()).includes(named))
          failures.push(`${route.method} ${route.url}: ${res.body}`);
      }
    }
    expect(failures).toEqual([]);
    expect(await snapshot()).toEqual(before);
    expect(({} as Record<string, unknown>).admin).toBeUndefined();
  });

  it('a body string with NUL on a route that stores it: 400 naming the field, nothing stored', async () => {
    const create = async (body: unknown) =>
      env.app.inject({
        method: 'POST',
        url: '/canvas/trigger/schedule/create',
        headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
        payload: JSON.stringify(body),
      });
    const schedule = { time: new Date(Date.now() + 3_600_000).toISOString() };
    const res = await create({ canvas_id: 'welcome', broadcast: true, schedule, trigger_properties: { coupon: NUL } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({
      message: "Invalid body: 'trigger_properties.coupon' contains a NUL character (U+0000), which cannot be stored",
    });
    const key = await create({
      canvas_id: 'welcome',
      broadcast: true,
      schedule,
      trigger_properties: { ['\udfff']: 1 },
    });
    expect(key.statusCode).toBe(400);
    expect(key.json().message).toBe(
      "Invalid body: the key 'trigger_properties.\\udfff' contains an unpaired UTF-16 surrogate (U+DFFF), which cannot be stored",
    );
    const { rows } = await env.ctx.pool.query('SELECT 1 FROM canvas_schedules');
    expect(rows).toHaveLength(0);
  });
});

async function track(body: unknown, key = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/track',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json() };
}

/** The objects staged for a workspace, as the apply will read them. */
async function staged(workspaceId: string): Promise<string[]> {
  const { rows } = await env.ctx.pool.query<{ payload: string }>(
    'SELECT payload FROM ingest_staging WHERE workspace_id = $1 ORDER BY id',
    [workspaceId],
  );
  return rows.map((r) => r.payload);
}

let applying = false;
/** Starts the track-ingest worker once: tests that need staged objects applied call it after checking what is staged. */
function startApplying(): void {
  if (applying) return;
  applying = true;
  env.startWorkers([trackIngestJob]);
}

async function profile(workspaceId: string, externalId: string) {
  const { rows } = await env.ctx.pool.query('SELECT * FROM profiles WHERE workspace_id = $1 AND external_id = $2', [
    workspaceId,
    externalId,
  ]);
  return rows[0] as Record<string, unknown> | undefined;
}

describe('POST /users/track: keys JSON.parse would drop or turn into prototypes', () => {
  it('a name given twice in one event is 400 naming it (the first would be lost), and nothing of the request is staged', async () => {
    const other = await seedWorkspace(env.ctx.pool);
    const body = `{"events": [{"external_id": "dup", "name": "first", "time": "2026-11-23T10:00:00Z"}, {"external_id": "dup", "name": "a", "name": "b", "time": "2026-11-23T10:00:00Z"}]}`;
    const r = await track(body, other.apiKey);
    expect(r.status).toBe(400);
    expect(r.body.message).toBe(
      'Invalid body: the key "name" appears more than once in body.events[1]; each key may appear once in an object (JSON parsers keep only one of them, so the data of the others would be lost)',
    );
    const twice = await track(
      `{"events": [], "attributes": [{"external_id": "dup", "tier": "gold"}], "attributes": []}`,
      other.apiKey,
    );
    expect(twice.status).toBe(400);
    expect(twice.body.message).toContain('the key "attributes" appears more than once in body;');
    expect(await staged(other.workspaceId)).toEqual([]);
  });

  it('keeps "constructor" and "prototype" as plain attribute names (only __proto__ and constructor.prototype are refused)', async () => {
    const other = await seedWorkspace(env.ctx.pool);
    const r = await track(
      {
        attributes: [
          {
            external_id: 'plain-keys',
            constructor: 'Ford',
            prototype: true,
            toString: 'x',
            car: { constructor: { make: 'Ford' } },
          },
        ],
      },
      other.apiKey,
    );
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    startApplying();
    await waitFor(async () => (await profile(other.workspaceId, 'plain-keys')) !== undefined, 20_000);
    const row = await profile(other.workspaceId, 'plain-keys');
    expect(row!.custom_attributes).toEqual({
      constructor: 'Ford',
      prototype: true,
      toString: 'x',
      car: { constructor: { make: 'Ford' } },
    });
  });
});

describe('POST /users/track: an object with unstorable text is refused alone', () => {
  const time = '2026-11-23T10:00:00.000Z';
  const stored = 'which cannot be stored';

  it('refuses each of the variants with a per-object error naming the field, stages only the valid objects, and ingestion goes on', async () => {
    const other = await seedWorkspace(env.ctx.pool);
    const r = await track({
      events: [
        { external_id: NUL, name: 'e', time: '2026-11-23' },
        { external_id: 'x\ud800', name: 'e', time },
        { external_id: 'hostile-ok', name: 'e\udc00', time },
        { external_id: 'hostile-ok', name: 'played', time },
      ],
      attributes: [
        { external_id: 'hostile-ok', first_name: NUL },
        { external_id: 'hostile-ok', tier: 'gold\ud83d' },
        { external_id: 'hostile-ok', ['ti\u0000er']: 'gold' },
        { external_id: 'hostile-ok', prefs: { colours: ['red', 'gr\u0000een'] } },
        { external_id: 'hostile-ok', first_name: 'Ada', tier: 'gold 😀' },
      ],
      purchases: [
        { external_id: 'hostile-ok', product_id: 'p\u0000', currency: 'USD', price: 1, time },
        { external_id: 'hostile-ok', product_id: 'book', currency: 'USD', price: 9.5, time },
      ],
    });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      message: 'success',
      attributes_processed: 1,
      events_processed: 1,
      purchases_processed: 1,
      errors: [
        { type: `'first_name' contains a NUL character (U+0000), ${stored}`, input_array: 'attributes', index: 0 },
        {
          type: `'tier' contains an unpaired UTF-16 surrogate (U+D83D), ${stored}`,
          input_array: 'attributes',
          index: 1,
        },
        {
          type: `the key 'ti\\u0000er' contains a NUL character (U+0000), ${stored}`,
          input_array: 'attributes',
          index: 2,
        },
        {
          type: `'prefs.colours[1]' contains a NUL character (U+0000), ${stored}`,
          input_array: 'attributes',
          index: 3,
        },
        { type: `'external_id' contains a NUL character (U+0000), ${stored}`, input_array: 'events', index: 0 },
        {
          type: `'external_id' contains an unpaired UTF-16 surrogate (U+D800), ${stored}`,
          input_array: 'events',
          index: 1,
        },
        { type: `'name' contains an unpaired UTF-16 surrogate (U+DC00), ${stored}`, input_array: 'events', index: 2 },
        { type: `'product_id' contains a NUL character (U+0000), ${stored}`, input_array: 'purchases', index: 0 },
      ],
    });
    const payloads = (await staged(env.ws.workspaceId)).join('\n');
    expect(payloads).toContain('"played"');
    expect(payloads).toContain('"book"');
    expect(payloads).toContain('gold 😀');
    expect(payloads).not.toMatch(/\\u0000|\\ud[89a-f]/i);

    const elsewhere = await track({ events: [{ external_id: 'bystander', name: 'signed_up', time }] }, other.apiKey);
    expect(elsewhere.status).toBe(201);

    startApplying();
    await waitFor(
      async () =>
        (await profile(other.workspaceId, 'bystander')) !== undefined &&
        (await staged(env.ws.workspaceId)).length === 0,
      20_000,
    );
    const ok = await profile(env.ws.workspaceId, 'hostile-ok');
    expect(ok).toMatchObject({ first_name: 'Ada', custom_attributes: { tier: 'gold 😀' } });
    expect(Object.keys(ok!.custom_events as object)).toEqual(['played']);
    expect(Object.keys(ok!.purchases as object)).toEqual(['book']);
    const { rows } = await env.ctx.pool.query<{ external_id: string }>(
      'SELECT external_id FROM profiles WHERE workspace_id = $1',
      [env.ws.workspaceId],
    );
    expect(rows.map((p) => p.external_id)).toEqual(['hostile-ok']);
  });

  it('refuses values PostgreSQL would refuse at apply time, or store as something else', async () => {
    const r = await track(
      // 1e999 cannot come out of JSON.stringify: JSON.parse reads it as Infinity, which would be stored as null.
      `{"attributes": [
         {"external_id": "edge", "dob": "0000-01-01"},
         {"external_id": "edge", "score": 1e999},
         {"external_id": "edge", "dob": "0001-01-01", "score": 1.5e308}
       ],
       "purchases": [
         {"external_id": "edge", "product_id": "yacht", "currency": "USD", "price": 1.7e308, "time": "${time}"},
         {"external_id": "edge", "product_id": "yacht", "currency": "USD", "price": 1e15, "quantity": 100, "time": "${time}"}
       ],
       "events": [
         {"external_id": "edge", "name": "late", "time": "9999-12-31T23:59:00-23:59"},
         {"external_id": "edge", "name": "early", "time": "0000-01-01T00:00:00+01:00"},
         {"external_id": "edge", "name": "ok", "time": "9999-12-31T23:59:59Z"}
       ]}`,
    );
    expect(r.status).toBe(201);
    expect(r.body).toMatchObject({ attributes_processed: 1, events_processed: 1, purchases_processed: 1 });
    expect(r.body.errors).toEqual([
      { type: "'dob' must be a date YYYY-MM-DD (years 0001 to 9999) or null", input_array: 'attributes', index: 0 },
      {
        type: "'score' is a number too large to store (beyond ±1.7976931348623157e308)",
        input_array: 'attributes',
        index: 1,
      },
      {
        type: "'time' must fall within the years 0000 to 9999 in UTC; got '9999-12-31T23:59:00-23:59'",
        input_array: 'events',
        index: 0,
      },
      {
        type: "'time' must fall within the years 0000 to 9999 in UTC; got '0000-01-01T00:00:00+01:00'",
        input_array: 'events',
        index: 1,
      },
      {
        type: "'price' must be a number from -1000000000000000 to 1000000000000000",
        input_array: 'purchases',
        index: 0,
      },
    ]);
    startApplying();
    await waitFor(async () => (await staged(env.ws.workspaceId)).length === 0, 20_000);
    expect(await profile(env.ws.workspaceId, 'edge')).toMatchObject({
      dob: '0001-01-01',
      total_revenue: 1e17,
      custom_attributes: { score: 1.5e308 },
    });
  });

  it('a 10,000-deep value in properties or custom attributes: 400 for the whole request, nothing staged', async () => {
    const before = (await staged(env.ws.workspaceId)).length;
    const props = await track(
      `{"events": [{"external_id": "deep", "name": "e", "time": "${time}", "properties": {"p": ${deepJson(10_000)}}}, {"external_id": "deep", "name": "ok", "time": "${time}"}]}`,
    );
    expect(props).toEqual({
      status: 400,
      body: { message: 'Invalid body: arrays and objects may be nested at most 64 levels deep' },
    });
    const arrays = await track(
      `{"attributes": [{"external_id": "deep", "nested": ${'['.repeat(10_000)}${']'.repeat(10_000)}}]}`,
    );
    expect(arrays.status).toBe(400);
    expect(arrays.body.message).toMatch(/nested at most 64 levels/);
    expect(await staged(env.ws.workspaceId)).toHaveLength(before);
  });

  it('values nested past 50 levels in a body within 64: refused alone; 50 levels are taken', async () => {
    const r = await track({
      events: [
        { external_id: 'nest', name: 'e', time, properties: { p: JSON.parse(deepJson(51)) } },
        { external_id: 'nest', name: 'e', time, properties: { p: JSON.parse(deepJson(50)) } },
      ],
      attributes: [{ external_id: 'nest', profile: JSON.parse(deepJson(51)) }],
    });
    expect(r.status).toBe(201);
    expect(r.body.events_processed).toBe(1);
    expect(r.body.errors).toEqual([
      {
        type: expect.stringMatching(/^'profile\.k\.k\.k.*' nests arrays or objects more than 50 levels deep$/),
        input_array: 'attributes',
        index: 0,
      },
      {
        type: expect.stringMatching(/^'properties\.p\.k\.k.*' nests arrays or objects more than 50 levels deep$/),
        input_array: 'events',
        index: 0,
      },
    ]);
  });

  it('canvas trigger_properties nested 10,000 deep: 400, nothing scheduled', async () => {
    const res = await env.app.inject({
      method: 'POST',
      url: '/canvas/trigger/schedule/create',
      headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
      payload: `{"canvas_id": "welcome", "broadcast": true, "schedule": {"time": "${new Date(Date.now() + 3_600_000).toISOString()}"}, "trigger_properties": {"p": ${deepJson(10_000)}}}`,
    });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toEqual({ message: 'Invalid body: arrays and objects may be nested at most 64 levels deep' });
    expect((await env.ctx.pool.query('SELECT 1 FROM canvas_schedules')).rows).toHaveLength(0);
  });
});

describe('bulk import: lines with unstorable text or deep nesting go to the rejects file', () => {
  it('writes them there with the reason, applies the rest, and completes', async () => {
    const store = LocalStore.forWorkspace(env.config.LOCAL_STORE_DIR, env.ws);
    const time = '2026-11-23T10:00:00Z';
    const lines = [
      JSON.stringify({ external_id: 'imp-1', name: 'opened', time }),
      JSON.stringify({ external_id: 'imp\u0000x', name: 'opened', time }),
      JSON.stringify({ external_id: 'imp-1', name: 'clicked\ud800', time }),
      JSON.stringify({ external_id: 'imp-1', name: 'opened', time, properties: { ['a\u0000']: 1 } }),
      `{"external_id": "imp-1", "name": "opened", "time": "${time}", "properties": {"p": ${deepJson(10_000)}}}`,
      JSON.stringify({ external_id: 'imp-2', name: 'opened', time }),
      `${'['.repeat(10_000)}${']'.repeat(10_000)}`,
    ];
    await store.put('imports/hostile.ndjson', Buffer.from(`${lines.join('\n')}\n`));
    const started = await env.app.inject({
      method: 'POST',
      url: '/users/import',
      headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
      payload: JSON.stringify({ source: 'local', key: 'imports/hostile.ndjson' }),
    });
    expect(started.statusCode).toBe(201);
    env.startWorkers([bulkImportJob]);
    const statusOf = async () =>
      (
        await env.app.inject({
          method: 'GET',
          url: `/users/import/${started.json().import_id}`,
          headers: bearer(env.ws.apiKey),
        })
      ).json();
    await waitFor(async () => ['completed', 'failed'].includes((await statusOf()).status), 30_000);
    expect(await statusOf()).toMatchObject({
      status: 'completed',
      records_handled: 7,
      events_applied: 2,
      rejected: 5,
      error: null,
    });

    const rejects = (await (await store.get('imports/hostile.ndjson.rejects.ndjson')).toArray())
      .map(String)
      .join('')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as { line: number; reason: string; object: unknown });
    expect(rejects.map((r) => [r.line, r.reason])).toEqual([
      [2, "'external_id' contains a NUL character (U+0000), which cannot be stored"],
      [3, "'name' contains an unpaired UTF-16 surrogate (U+D800), which cannot be stored"],
      [4, "the key 'properties.a\\u0000' contains a NUL character (U+0000), which cannot be stored"],
      [5, expect.stringMatching(/^'properties\.p\.k\.k.*' nests arrays or objects more than 50 levels deep$/)],
      [7, 'each entry must be an event object (a JSON object)'],
    ]);
    expect(rejects[0]!.object).toEqual({ external_id: 'imp\u0000x', name: 'opened', time });
    // Too deep for JSON.stringify: written without the record rather than failing the import.
    expect(rejects[3]!.object).toBeNull();
    expect(rejects[4]!.object).toBeNull();
    expect(Object.keys((await profile(env.ws.workspaceId, 'imp-1'))!.custom_events as object)).toEqual(['opened']);
    expect(await profile(env.ws.workspaceId, 'imp-2')).toBeDefined();
  });
});
