import { describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { stageObjects } from '../../src/pipelines/ingest/accept/staging-writer.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer, createKey } from '../helpers/seed.js';
import { entries } from '../helpers/aggregates.js';

const env = useTestEnv({ workspaces: ['ws'] });

async function track(body: unknown, headers: Record<string, string> = bearer(env.ws.apiKey)) {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/track',
    headers: { ...headers, 'content-type': 'application/json' },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json(), headers: res.headers };
}

/** Applies everything staged so far, as a worker does. */
async function drain() {
  return drainThrough(env.ctx.pool, undefined, {
    maxRows: 200,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });
}

async function profile(externalId: string) {
  const { rows } = await env.ctx.pool.query('SELECT * FROM profiles WHERE workspace_id = $1 AND external_id = $2', [
    env.ws.workspaceId,
    externalId,
  ]);
  return rows[0];
}

async function stagedCount() {
  return (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_staging')).rows[0]!.n;
}

async function profileCount() {
  return (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM profiles')).rows[0]!.n;
}

const ev = (external_id: string, name: string, time: string, extra: Record<string, unknown> = {}) => ({
  external_id,
  name,
  time,
  ...extra,
});

describe('POST /users/track: acceptance', () => {
  it('stages accepted events before answering 201, and a worker applies them', async () => {
    const r = await track({
      events: [
        ev('u1', 'played', '2024-03-01T10:00:00Z', { properties: { level: 3 } }),
        ev('u1', 'played', '2024-02-01T10:00:00.5+01:00'),
        ev('u1', 'paid', '2024-03-05T10:00:00:123-0700'),
      ],
    });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ message: 'success', events_processed: 3 });
    expect(await stagedCount()).toBe(1);
    expect(await profile('u1')).toBeUndefined();
    await drain();
    expect(await stagedCount()).toBe(0);
    const p = await profile('u1');
    // Stored keyed by name (migration 0100).
    expect(p.custom_events).toEqual({
      paid: { name: 'paid', first: '2024-03-05T17:00:00.123Z', last: '2024-03-05T17:00:00.123Z', count: 1 },
      played: { name: 'played', first: '2024-02-01T09:00:00.500Z', last: '2024-03-01T10:00:00.000Z', count: 2 },
    });
    expect(p.service_id).toMatch(/^[0-9a-f]{24}$/);
    expect(p.random_bucket).toBeGreaterThanOrEqual(0);
    expect(p.random_bucket).toBeLessThanOrEqual(9999);
  });

  it('answers a count for each array sent, and lists refused objects while taking the valid ones', async () => {
    const r = await track({
      attributes: [{ external_id: 'p1', first_name: 'Pat' }, { first_name: 'nobody' }],
      events: [
        ev('p1', 'ok', '2024-01-01T00:00:00Z'),
        ev('p1', 'bad', 'not a time'),
        { ...ev('p1', 'x', '2024-01-01'), properties: { $x: 1 } },
      ],
      purchases: [],
    });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      message: 'success',
      attributes_processed: 1,
      events_processed: 1,
      purchases_processed: 0,
      errors: [
        {
          type: "'external_id' or 'service_id' or 'user_alias' or 'email' is required",
          input_array: 'attributes',
          index: 1,
        },
        { type: expect.stringMatching(/^'time' must be ISO 8601/), input_array: 'events', index: 1 },
        { type: expect.stringMatching(/must not begin with '\$'/), input_array: 'events', index: 2 },
      ],
    });
    await drain();
    const p = await profile('p1');
    expect(p.first_name).toBe('Pat');
    expect(Object.keys(p.custom_events)).toEqual(['ok']);
  });

  it('a refused request stages nothing and changes nothing', async () => {
    const before = { staged: await stagedCount(), profiles: await profileCount() };
    const cases: [unknown, RegExp][] = [
      [{}, /Valid data must be provided in the 'attributes', 'events', or 'purchases' fields\./],
      [{ events: [] }, /Valid data must be provided/],
      [{ events: [ev('z1', 'x', 'bad')], attributes: [{}] }, /Valid data must be provided.*events\[0\]: 'time'/],
      [
        { events: Array.from({ length: 76 }, () => ev('z1', 'x', '2024-01-01')) },
        /'events' may hold at most 75 objects per request; got 76/,
      ],
      [{ attributes: Array.from({ length: 76 }, () => ({ external_id: 'z1' })) }, /'attributes' may hold at most 75/],
      [{ events: 'all of them' }, /events/],
      ['{"events": [', /Malformed JSON/],
      ['[1, 2]', /./],
    ];
    for (const [body, message] of cases) {
      const r = await track(body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body.message).toMatch(message);
    }
    expect({ staged: await stagedCount(), profiles: await profileCount() }).toEqual(before);
  });

  it('75 events in one request are accepted', async () => {
    const r = await track({
      events: Array.from({ length: 75 }, (_, i) => ev(`bulk-${i % 5}`, 'seen', '2024-01-01T00:00:00Z')),
    });
    expect(r.status).toBe(201);
    expect(r.body.events_processed).toBe(75);
    await drain();
    expect(entries((await profile('bulk-0')).custom_events)).toEqual([
      { name: 'seen', first: '2024-01-01T00:00:00.000Z', last: '2024-01-01T00:00:00.000Z', count: 15 },
    ]);
  });

  it('refuses missing credentials, unknown keys and a key without users.track; nothing is staged', async () => {
    const staged = await stagedCount();
    const body = { events: [ev('sec', 'x', '2024-01-01')] };
    expect((await track(body, {})).status).toBe(401);
    const unknown = await track(body, bearer('not-a-real-key'));
    expect(unknown.status).toBe(401);
    expect(unknown.body.message).toMatch(/Invalid API key/);
    const bare = await track(body, bearer(env.ws.bareKey));
    expect(bare.status).toBe(401);
    expect(bare.body.message).toMatch(/users\.track/);
    const other = await createKey(env.ctx.pool, env.ws.workspaceId, 'export-only', ['users.export.segment']);
    expect((await track(body, bearer(other))).status).toBe(401);
    expect(await stagedCount()).toBe(staged);
  });

  it('sends the track rate-limit headers', async () => {
    const r = await track({ events: [ev('rl', 'x', '2024-01-01')] });
    expect(Number(r.headers['x-ratelimit-limit'])).toBe(env.config.RATE_LIMIT_TRACK_PER_MINUTE);
    expect(Number(r.headers['x-ratelimit-remaining'])).toBeLessThan(env.config.RATE_LIMIT_TRACK_PER_MINUTE);
    await drain();
  });
});

describe('staging', () => {
  it('group-commits concurrent requests and gives each its own row', async () => {
    const staged = await Promise.all(
      Array.from({ length: 60 }, (_, i) =>
        stageObjects(env.ctx.pool, env.ws.workspaceId, {
          events: [
            {
              identity: { type: 'external_id', value: `g${i}` },
              create: true,
              name: `n${i}`,
              time: '2024-01-01T00:00:00.000Z',
            },
          ],
          attributes: [],
          purchases: [],
        }),
      ),
    );
    expect(staged.every((rows) => rows.length === 1)).toBe(true);
    const ids = staged.map(([id]) => id!);
    expect(new Set(ids).size).toBe(60);
    const { rows } = await env.ctx.pool.query<{ id: number; payload: string }>(
      'SELECT id, payload FROM ingest_staging WHERE id = ANY($1::bigint[])',
      [ids],
    );
    const byId = new Map(rows.map((r) => [r.id, JSON.parse(r.payload).events[0].name]));
    ids.forEach((id, i) => expect(byId.get(id)).toBe(`n${i}`));
    await drain();
  });
});

describe('applying: semantics', () => {
  it('keeps first, last and count over all history when events arrive out of order', async () => {
    await track({ events: [ev('o1', 'login', '2024-06-01T00:00:00Z'), ev('o1', 'login', '2024-06-03T00:00:00Z')] });
    await drain();
    await track({ events: [ev('o1', 'login', '2024-05-01T00:00:00Z')] });
    await track({ events: [ev('o1', 'login', '2024-06-02T00:00:00Z'), ev('o1', 'logout', '2023-01-01T00:00:00Z')] });
    await drain();
    await track({ events: [ev('o1', 'login', '2024-07-01T12:00:00.001Z')] });
    await drain();
    expect(entries((await profile('o1')).custom_events)).toEqual([
      { name: 'login', first: '2024-05-01T00:00:00.000Z', last: '2024-07-01T12:00:00.001Z', count: 5 },
      { name: 'logout', first: '2023-01-01T00:00:00.000Z', last: '2023-01-01T00:00:00.000Z', count: 1 },
    ]);
  });

  it('keeps event names that are also object property names, such as __proto__, as names like any other', async () => {
    await track({
      events: [ev('n1', '__proto__', '2024-01-01T00:00:00Z'), ev('n1', 'constructor', '2024-01-02T00:00:00Z')],
    });
    await drain();
    await track({ events: [ev('n1', '__proto__', '2024-01-03T00:00:00Z')] });
    await drain();
    expect(entries((await profile('n1')).custom_events)).toEqual([
      { name: '__proto__', first: '2024-01-01T00:00:00.000Z', last: '2024-01-03T00:00:00.000Z', count: 2 },
      { name: 'constructor', first: '2024-01-02T00:00:00.000Z', last: '2024-01-02T00:00:00.000Z', count: 1 },
    ]);
  });

  it('aggregates purchases by product (quantity counts) and adds revenue', async () => {
    await track({
      purchases: [
        {
          external_id: 'buyer',
          product_id: 'sku',
          currency: 'USD',
          price: 2.5,
          quantity: 2,
          time: '2024-02-01T00:00:00Z',
        },
        { external_id: 'buyer', product_id: 'sku', currency: 'USD', price: 1, time: '2024-01-01T00:00:00Z' },
        { external_id: 'buyer', product_id: 'other', currency: 'EUR', price: 10, time: '2024-03-01T00:00:00Z' },
      ],
    });
    await drain();
    const p = await profile('buyer');
    expect(entries(p.purchases)).toEqual([
      { name: 'other', first: '2024-03-01T00:00:00.000Z', last: '2024-03-01T00:00:00.000Z', count: 1 },
      { name: 'sku', first: '2024-01-01T00:00:00.000Z', last: '2024-02-01T00:00:00.000Z', count: 3 },
    ]);
    expect(p.total_revenue).toBe(16);
  });

  it('_update_existing_only updates existing profiles and creates none', async () => {
    const before = await profileCount();
    await track({
      events: [ev('ghost', 'x', '2024-01-01', { _update_existing_only: true })],
      attributes: [{ external_id: 'ghost2', _update_existing_only: true, first_name: 'G' }],
    });
    await drain();
    expect(await profileCount()).toBe(before);
    expect(await profile('ghost')).toBeUndefined();
    await track({ events: [ev('o1', 'seen', '2024-01-01', { _update_existing_only: true })] });
    await drain();
    expect((await profile('o1')).custom_events.seen).toMatchObject({ count: 1 });
  });

  it('user_alias names existing users only; service_id and email find their users', async () => {
    const p = await profile('o1');
    await env.ctx.pool.query(
      `INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id) VALUES ($1, 'crm', 'c-1', $2)`,
      [env.ws.workspaceId, p.id],
    );
    await env.ctx.pool.query(`UPDATE profiles SET email = 'O1@Example.com' WHERE id = $1`, [p.id]);
    const before = await profileCount();
    const r = await track({
      events: [
        { user_alias: { alias_label: 'crm', alias_name: 'c-1' }, name: 'by-alias', time: '2024-01-01' },
        { user_alias: { alias_label: 'crm', alias_name: 'unknown' }, name: 'by-alias', time: '2024-01-01' },
        { service_id: p.service_id, name: 'by-service-id', time: '2024-01-01' },
        { email: 'o1@example.COM', name: 'by-email', time: '2024-01-01' },
        { email: 'nobody@example.com', name: 'by-email', time: '2024-01-01' },
      ],
    });
    expect(r.body.events_processed).toBe(5);
    const result = await drain();
    expect(result.unmatched).toBe(2);
    expect(await profileCount()).toBe(before);
    const names = Object.keys((await profile('o1')).custom_events);
    expect(names).toEqual(expect.arrayContaining(['by-alias', 'by-service-id', 'by-email']));
  });

  it('attributes are last-write-wins by acceptance time; null removes a custom attribute', async () => {
    await track({ attributes: [{ external_id: 'a1', first_name: 'First', tier: 'bronze', keep: 1, country: 'fr' }] });
    await track({ attributes: [{ external_id: 'a1', first_name: 'Second', tier: null }] });
    await drain();
    let p = await profile('a1');
    expect(p.first_name).toBe('Second');
    expect(p.country).toBe('FR');
    expect(p.custom_attributes).toEqual({ keep: 1 });
    expect(Object.keys(p.attribute_times).sort()).toEqual([
      'country',
      'custom_attributes.keep',
      'custom_attributes.tier',
      'first_name',
    ]);
    // A write stamped earlier than the stored value loses, whenever it is applied.
    const stale = new Date(Date.parse(p.attribute_times.first_name) - 60_000).toISOString();
    await env.ctx.pool.query(`INSERT INTO ingest_staging (workspace_id, objects, payload) VALUES ($1, 1, $2)`, [
      env.ws.workspaceId,
      JSON.stringify({
        events: [],
        purchases: [],
        attributes: [
          {
            identity: { type: 'external_id', value: 'a1' },
            create: true,
            at: stale,
            standard: { first_name: 'Stale', last_name: 'New' },
            custom: {},
          },
        ],
      }),
    ]);
    await drain();
    p = await profile('a1');
    expect(p.first_name).toBe('Second');
    expect(p.last_name).toBe('New');
  });

  it('several objects for one user in one request apply in the order sent', async () => {
    await track({
      attributes: [
        { external_id: 'a2', home_city: 'A' },
        { external_id: 'a2', home_city: 'B' },
        { external_id: 'a2', home_city: 'C' },
      ],
    });
    await drain();
    expect((await profile('a2')).home_city).toBe('C');
  });
});

describe('email subscription states', () => {
  async function emailStatus(email: string | string[], state: string) {
    const res = await env.app.inject({
      method: 'POST',
      url: '/email/status',
      headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
      payload: { email, subscription_state: state },
    });
    expect(res.statusCode).toBe(201);
  }

  it('a state stored for an address no user has is applied when an attribute ties it to a user', async () => {
    await emailStatus('pending@example.com', 'unsubscribed');
    await track({ attributes: [{ external_id: 'e1', email: 'Pending@Example.com' }] });
    await drain();
    expect((await profile('e1')).email_subscribe).toBe('unsubscribed');
    // An explicit state in the same object wins over the stored one.
    await emailStatus('other@example.com', 'opted_in');
    await track({ attributes: [{ external_id: 'e2', email: 'other@example.com', email_subscribe: 'subscribed' }] });
    await drain();
    expect((await profile('e2')).email_subscribe).toBe('subscribed');
    // Re-sending the same address does not re-apply the stored state over a later change.
    await env.ctx.pool.query(`UPDATE profiles SET email_subscribe = 'opted_in' WHERE external_id = 'e1'`);
    await track({ attributes: [{ external_id: 'e1', email: 'pending@example.com' }] });
    await drain();
    expect((await profile('e1')).email_subscribe).toBe('opted_in');
  });
});

describe('with a real worker', () => {
  it('applies accepted objects without any help, many requests coalesced', async () => {
    env.startWorkers([trackIngestJob]);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) =>
        track({
          events: Array.from({ length: 10 }, (_, j) =>
            ev(`w${i % 4}`, `e${j % 3}`, `2024-01-01T00:00:${String(j).padStart(2, '0')}Z`),
          ),
        }),
      ),
    );
    expect(answers.every((a) => a.status === 201)).toBe(true);
    for (let i = 0; i < 200 && (await stagedCount()) > 0; i++) await new Promise((res) => setTimeout(res, 50));
    expect(await stagedCount()).toBe(0);
    const total = (
      await env.ctx.pool.query<{ n: number }>(
        `SELECT coalesce(sum((e->>'count')::int), 0)::int AS n FROM profiles p, jsonb_each(p.custom_events) AS c(name, e) WHERE p.external_id LIKE 'w_'`,
      )
    ).rows[0]!.n;
    expect(total).toBe(200);
  });
});
