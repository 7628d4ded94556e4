import { describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { stageObjects } from '../../src/pipelines/ingest/accept/staging-writer.js';
import { claimKey, requestHash, type ClaimedKey } from '../../src/platform/idempotency/keys.js';
import { validateTrackBody } from '../../src/profiles/validation/validate.js';
import { useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi } from '../helpers/http.js';

/** POST /users/track/sync: one object, applied through the staging log before the answer. */

const env = useTestEnv({ config: { INGEST_PARTITIONS: '2' }, workspaces: ['ws', 'other'] });

const sync = (body: unknown, key: string | null = env.ws.apiKey, headers: Record<string, string> = {}) =>
  callApi(env.app, 'POST', '/users/track/sync', { key, headers, ...bodyOrRaw(body) });
const track = (body: unknown) => callApi(env.app, 'POST', '/users/track', { key: env.ws.apiKey, body });

async function profile(externalId: string, workspaceId = env.ws.workspaceId) {
  const { rows } = await env.ctx.pool.query(
    'SELECT custom_attributes, custom_events, purchases FROM profiles WHERE workspace_id = $1 AND external_id = $2',
    [workspaceId, externalId],
  );
  return rows[0];
}
const staged = async () =>
  (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_staging')).rows[0]!.n;

describe("Braze's examples", () => {
  it('updates custom attributes by external id and answers their values', async () => {
    const r = await sync({
      attributes: [
        {
          external_id: 'xyz123',
          string_attribute: 'fruit',
          boolean_attribute_1: true,
          integer_attribute: 25,
          array_attribute: ['banana', 'apple'],
        },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toEqual({
      users: [
        {
          external_id: 'xyz123',
          custom_attributes: {
            string_attribute: 'fruit',
            boolean_attribute_1: true,
            integer_attribute: 25,
            array_attribute: ['banana', 'apple'],
          },
        },
      ],
      message: 'success',
    });
    // Applied, not only staged: the profile holds it when the answer comes.
    expect((await profile('xyz123')).custom_attributes).toMatchObject({ string_attribute: 'fruit' });
    expect(await staged()).toBe(0);
  });

  it('records a custom event by email and answers its first, last and count', async () => {
    const setUp = await sync({ attributes: [{ external_id: 'renter', email: 'renter@example.com' }] });
    expect(setUp.status).toBe(201);
    const r = await sync({
      events: [
        {
          email: 'renter@example.com',
          app_id: 'your_app_identifier',
          name: 'rented_movie',
          time: '2022-12-06T19:20:45+01:00',
          properties: {
            release: { studio: 'FilmStudio', year: '2022' },
            cast: [{ name: 'Actor1' }, { name: 'Actor2' }],
          },
        },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toEqual({
      users: [
        {
          email: 'renter@example.com',
          custom_events: [
            {
              name: 'rented_movie',
              first: '2022-12-06T18:20:45.000Z',
              last: '2022-12-06T18:20:45.000Z',
              count: 1,
            },
          ],
        },
      ],
      message: 'success',
    });
  });

  it('records a purchase by user alias and answers the product', async () => {
    await sync({ attributes: [{ external_id: 'aliased' }] });
    await env.ctx.pool.query(
      `INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id)
       SELECT $1, 'my_device_identifier', 'device123', id FROM profiles WHERE workspace_id = $1 AND external_id = 'aliased'`,
      [env.ws.workspaceId],
    );
    // Braze's example, with the comma its page leaves out after user_alias (without it, it is not JSON).
    const alias = { alias_name: 'device123', alias_label: 'my_device_identifier' };
    const r = await sync({
      purchases: [
        {
          user_alias: alias,
          app_id: '11ae5b4b-2445-4440-a04f-bf537764c9ad',
          product_id: 'Completed Order',
          currency: 'USD',
          price: 219.98,
          time: '2022-12-06T19:20:45+01:00',
          properties: {
            products: [
              { name: 'Monitor', category: 'Gaming', product_amount: 19.99 },
              { name: 'Gaming Keyboard', category: 'Gaming ', product_amount: 199.99 },
            ],
          },
        },
      ],
    });
    expect(r.status, JSON.stringify(r.body)).toBe(201);
    expect(r.body).toEqual({
      users: [
        {
          user_alias: alias,
          purchase_events: [
            {
              product_id: 'Completed Order',
              first: '2022-12-06T18:20:45.000Z',
              last: '2022-12-06T18:20:45.000Z',
              count: 1,
            },
          ],
        },
      ],
      message: 'success',
    });
  });

  it('answers no user when none matched (_update_existing_only)', async () => {
    const r = await sync({ attributes: [{ external_id: 'nobody', _update_existing_only: true, colour: 'red' }] });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ users: [], message: 'success' });
    expect(await profile('nobody')).toBeUndefined();
  });
});

describe('ordering and retries', () => {
  it('applies every object accepted before it first, with no worker running', async () => {
    expect((await track({ attributes: [{ external_id: 'ord', colour: 'red', size: 1 }] })).status).toBe(201);
    expect((await track({ events: [{ external_id: 'ord', name: 'seen', time: '2024-01-01T00:00:00Z' }] })).status).toBe(
      201,
    );
    const attrs = await sync({ attributes: [{ external_id: 'ord', colour: 'blue' }] });
    expect(attrs.body.users[0].custom_attributes).toEqual({ colour: 'blue' });
    expect((await profile('ord')).custom_attributes).toEqual({ colour: 'blue', size: 1 });
    const event = await sync({ events: [{ external_id: 'ord', name: 'seen', time: '2024-01-02T00:00:00Z' }] });
    expect(event.body.users[0].custom_events).toEqual([
      { name: 'seen', first: '2024-01-01T00:00:00.000Z', last: '2024-01-02T00:00:00.000Z', count: 2 },
    ]);
  });

  it('runs beside the ingestion workers and a concurrent /users/track: each object applied once, in order', async () => {
    const workers = env.startWorkers([trackIngestJob]);
    try {
      const event = (i: number) => ({
        external_id: 'busy',
        name: 'tick',
        time: `2024-02-01T00:00:${String(i).padStart(2, '0')}Z`,
      });
      const answers = await Promise.all([
        track({ events: [event(1), event(2), event(3)] }),
        sync({ events: [event(4)] }),
        track({ events: [event(5)] }),
        sync({ events: [event(6)] }),
      ]);
      expect(answers.map((a) => a.status)).toEqual([201, 201, 201, 201]);
      // Each sync answer counts its own event and whatever was accepted before it: never fewer than itself.
      for (const a of [answers[1]!, answers[3]!])
        expect(a.body.users[0].custom_events[0].count).toBeGreaterThanOrEqual(1);
      await workers.close(5_000);
      await sync({ events: [event(7)] });
      const p = await profile('busy');
      expect(p.custom_events.tick).toMatchObject({
        count: 7,
        first: '2024-02-01T00:00:01.000Z',
        last: '2024-02-01T00:00:07.000Z',
      });
    } finally {
      await workers.close(5_000);
    }
  });

  it('an Idempotency-Key retry replays the first answer and applies nothing again', async () => {
    const body = { events: [{ external_id: 'retry', name: 'paid', time: '2024-03-01T00:00:00Z' }] };
    const first = await sync(body, env.ws.apiKey, { 'idempotency-key': 'sync-retry-1' });
    expect(first.status).toBe(201);
    const again = await sync(body, env.ws.apiKey, { 'idempotency-key': 'sync-retry-1' });
    expect(again.status).toBe(201);
    expect(again.headers['idempotent-replayed']).toBe('true');
    expect(again.body).toEqual(first.body);
    expect((await profile('retry')).custom_events.paid.count).toBe(1);
    const other = await sync(
      { events: [{ external_id: 'retry', name: 'other', time: '2024-03-01T00:00:00Z' }] },
      env.ws.apiKey,
      {
        'idempotency-key': 'sync-retry-1',
      },
    );
    expect(other.status).toBe(422);
  });
});

describe('a crash between staging and the answer', () => {
  it('a retry with the key replays the placeholder and the object is applied once', async () => {
    const body = { events: [{ external_id: 'crashed', name: 'paid', time: '2024-04-01T00:00:00Z' }] };
    // What a process that died after its staging commit left: the key claimed and answered with the placeholder by
    // the staging insert, the object staged, nothing applied and no answer sent.
    const claim = await claimKey(
      env.ctx.pool,
      env.ws.workspaceId,
      'sync-crash-1',
      requestHash('POST', '/users/track/sync', {}, body),
    );
    if (claim.kind !== 'claimed') throw new Error(claim.kind);
    const key: ClaimedKey = { claim: claim.claim, answered: false, answer: async () => {} };
    const { objects } = validateTrackBody(body, new Date().toISOString());
    await stageObjects(env.ctx.pool, env.ws.workspaceId, objects, env.config.INGEST_PARTITIONS, {
      key,
      status: 201,
      body: { users: [], message: 'success' },
    });
    const retry = await sync(body, env.ws.apiKey, { 'idempotency-key': 'sync-crash-1' });
    expect(retry.status).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBe('true');
    expect(retry.body).toEqual({ users: [], message: 'success' });
    // The next request applies what was staged before it: the crashed request's object, once.
    const next = await sync({ events: [{ external_id: 'crashed', name: 'paid', time: '2024-04-02T00:00:00Z' }] });
    expect(next.body.users[0].custom_events[0].count).toBe(2);
  });
});

describe('refusals change nothing', () => {
  it('400 for more than one object, malformed JSON, wrong types and missing fields; 401 for keys', async () => {
    const before = { staged: await staged(), xyz: await profile('xyz123') };
    const a = { external_id: 'xyz123', string_attribute: 'changed' };
    const e = { external_id: 'xyz123', name: 'x', time: '2024-01-01T00:00:00Z' };
    const cases: [unknown, RegExp][] = [
      [{ attributes: [a, a] }, /takes one object/],
      [{ attributes: [a], events: [e] }, /takes one object/],
      [{ events: [e, e] }, /takes one object/],
      ['{"attributes": [', /Malformed JSON/],
      [{}, /Valid data must be provided/],
      [{ attributes: [] }, /Valid data must be provided/],
      [{ attributes: a }, /'attributes' must be an array/],
      [{ events: [{ external_id: 'xyz123', time: '2024-01-01T00:00:00Z' }] }, /name/],
      [{ events: [{ name: 'x', time: '2024-01-01T00:00:00Z' }] }, /is required/],
      [
        {
          purchases: [
            { external_id: 'xyz123', product_id: 'p', currency: 'USD', price: 'free', time: '2024-01-01T00:00:00Z' },
          ],
        },
        /price/,
      ],
      [{ attribute: [a] }, /unknown key "attribute"/],
    ];
    for (const [body, message] of cases) {
      const r = await sync(body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(r.body.message).toMatch(message);
    }
    expect((await sync({ attributes: [a] }, null)).status).toBe(401);
    expect((await sync({ attributes: [a] }, 'ces_key_thisKeyDoesNotExist0000000000000')).status).toBe(401);
    const bare = await sync({ attributes: [a] }, env.ws.bareKey);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toContain('users.track.sync');
    expect({ staged: await staged(), xyz: await profile('xyz123') }).toEqual(before);
  });

  it("keeps workspaces apart: another workspace's user of the same external id is another user", async () => {
    const r = await sync({ attributes: [{ external_id: 'xyz123', string_attribute: 'theirs' }] }, env.other.apiKey);
    expect(r.body.users[0].custom_attributes).toEqual({ string_attribute: 'theirs' });
    expect((await profile('xyz123')).custom_attributes.string_attribute).toBe('fruit');
    expect((await profile('xyz123', env.other.workspaceId)).custom_attributes.string_attribute).toBe('theirs');
  });
});

describe('rate limit', () => {
  const limited = useTestEnv({ config: { RATE_LIMIT_TRACK_SYNC_PER_MINUTE: '2' }, workspaces: ['ws'] });
  it('500 a minute by default; beyond the limit 429 with Retry-After, the object not applied', async () => {
    expect(env.config.RATE_LIMIT_TRACK_SYNC_PER_MINUTE).toBe(500);
    const body = (n: number) => ({ attributes: [{ external_id: 'limited', n }] });
    const call = (n: number) =>
      callApi(limited.app, 'POST', '/users/track/sync', { key: limited.ws.apiKey, body: body(n) });
    const first = await call(1);
    expect(first.status).toBe(201);
    expect(first.headers['x-ratelimit-limit']).toBe('2');
    expect((await call(2)).status).toBe(201);
    const refused = await call(3);
    expect(refused.status).toBe(429);
    expect(refused.headers['retry-after']).toBeDefined();
    expect(typeof refused.body.message).toBe('string');
    const { rows } = await limited.ctx.pool.query(
      `SELECT custom_attributes FROM profiles WHERE external_id = 'limited'`,
    );
    expect(rows[0].custom_attributes).toEqual({ n: 2 });
  });
});
