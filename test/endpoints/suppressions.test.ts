import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi, statusAndBody } from '../helpers/http.js';

/**
 * The calls that edit the suppression lists (POST /email/blocklist, /email/blacklist, /email/bounce/remove,
 * /email/spam/remove, /sms/invalid_phone_numbers/remove), each seen through the lists that read them.
 */

const env = useTestEnv({ workspaces: ['ws', 'other'] });

const post = (url: string, body: unknown, key: string | null = env.ws.apiKey) =>
  callApi(env.app, 'POST', url, { key, ...bodyOrRaw(body) }).then(statusAndBody);
const list = async (url: string, key = env.ws.apiKey) => {
  const r = await callApi(env.app, 'GET', url, { key });
  expect(r.status, JSON.stringify(r.body)).toBe(200);
  return r.body;
};
const addresses = async (url: string, key = env.ws.apiKey) =>
  ((await list(url, key)).emails as { email: string }[]).map((e) => e.email).sort();
const phones = async (key = env.ws.apiKey) =>
  ((await list('/sms/invalid_phone_numbers?limit=500', key)).sms as { phone: string }[]).map((s) => s.phone).sort();
async function record(kind: string, records: unknown[], key = env.ws.apiKey) {
  const r = await post(`/internal/records/${kind}`, { records }, key);
  expect(r.status, JSON.stringify(r.body)).toBe(201);
}
async function subscribe(externalId: string) {
  const { rows } = await env.ctx.pool.query(
    `SELECT email_subscribe FROM profiles WHERE workspace_id = $1 AND external_id = $2`,
    [env.ws.workspaceId, externalId],
  );
  return rows[0]?.email_subscribe;
}

/** Every list of both workspaces, and the profiles' states: what a refused request must leave as it was. */
async function everything() {
  const lists = async (key: string) => ({
    bounces: await addresses('/email/hard_bounces?limit=500', key),
    unsubscribes: await addresses('/email/unsubscribes?limit=500', key),
    spam: await addresses('/email/spam?limit=500', key),
    phones: await phones(key),
  });
  const profiles = await env.ctx.pool.query('SELECT external_id, email_subscribe FROM profiles ORDER BY external_id');
  return { ws: await lists(env.ws.apiKey), other: await lists(env.other.apiKey), profiles: profiles.rows };
}

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, email, email_subscribe) VALUES
       ($1, 's1', 'ann', 1, 'Ann@Example.com', 'opted_in'),
       ($1, 's2', 'bob', 2, 'bob@example.com', 'subscribed'),
       ($2, 's3', 'foreign-ann', 3, 'ann@example.com', 'opted_in')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
});

describe('POST /email/blocklist and /email/blacklist', () => {
  it('unsubscribes the addresses and marks them hard bounced, in this workspace only', async () => {
    const r = await post('/email/blocklist', { email: ['ANN@example.com', 'nobody-yet@example.com'] });
    expect(r).toEqual({ status: 201, body: { message: 'success' } });
    expect(await addresses('/email/hard_bounces')).toEqual(['ann@example.com', 'nobody-yet@example.com']);
    expect(await addresses('/email/unsubscribes')).toEqual(['ann@example.com', 'nobody-yet@example.com']);
    expect(await subscribe('ann')).toBe('unsubscribed');
    expect(await subscribe('bob')).toBe('subscribed');
    expect(await addresses('/email/hard_bounces', env.other.apiKey)).toEqual([]);
    const foreign = await env.ctx.pool.query(`SELECT email_subscribe FROM profiles WHERE external_id = 'foreign-ann'`);
    expect(foreign.rows[0].email_subscribe).toBe('opted_in');
  });

  it('lists an address blocklisted again (or under its other name) once', async () => {
    expect((await post('/email/blacklist', { email: 'ann@EXAMPLE.com' })).status).toBe(201);
    expect((await post('/email/blocklist', { email: ['nobody-yet@example.com'] })).status).toBe(201);
    expect(await addresses('/email/hard_bounces')).toEqual(['ann@example.com', 'nobody-yet@example.com']);
  });

  it('logs the unsubscribe as /email/status does, with blocklist as its source', async () => {
    const { rows } = await env.ctx.pool.query(
      `SELECT external_user_id, data FROM event_log
        WHERE workspace_id = $1 AND type = 'users.behaviors.subscription.GlobalStateChange'`,
      [env.ws.workspaceId],
    );
    expect(rows).toEqual([
      {
        external_user_id: 'ann',
        data: {
          subscription_status: 'unsubscribed',
          channel: 'email',
          email_address: 'Ann@Example.com',
          state_change_source: 'blocklist',
        },
      },
    ]);
  });

  it('answers the legacy name the same way (one address as a string)', async () => {
    expect(await post('/email/blacklist', { email: 'bob@example.com' })).toEqual({
      status: 201,
      body: { message: 'success' },
    });
    expect(await subscribe('bob')).toBe('unsubscribed');
    expect(await addresses('/email/hard_bounces?email=BOB@example.com')).toEqual(['bob@example.com']);
  });

  it('takes 50 addresses', async () => {
    const many = Array.from({ length: 50 }, (_, i) => `many${i}@example.com`);
    expect((await post('/email/blocklist', { email: many })).status).toBe(201);
    expect((await addresses('/email/hard_bounces?limit=500')).filter((e) => e.startsWith('many'))).toHaveLength(50);
  });
});

describe('POST /email/bounce/remove', () => {
  it('takes the addresses off the hard-bounce list and leaves their state', async () => {
    await record('hard_bounces', [{ email: 'bounced@example.com', time: '2024-03-01T00:00:00Z' }]);
    await record('hard_bounces', [{ email: 'bounced@example.com' }], env.other.apiKey);
    // Braze's example body: one address as a string.
    const r = await post('/email/bounce/remove', { email: 'Bounced@example.com' });
    expect(r).toEqual({ status: 201, body: { message: 'success' } });
    expect(await addresses('/email/hard_bounces?email=bounced@example.com')).toEqual([]);
    expect(await addresses('/email/unsubscribes?email=bounced@example.com')).toEqual(['bounced@example.com']);
    expect(await addresses('/email/hard_bounces?email=bounced@example.com', env.other.apiKey)).toEqual([
      'bounced@example.com',
    ]);
    const ann = await post('/email/bounce/remove', { email: ['ann@example.com', 'never-bounced@example.com'] });
    expect(ann.status).toBe(201);
    expect(await addresses('/email/hard_bounces?email=ann@example.com')).toEqual([]);
    expect(await subscribe('ann')).toBe('unsubscribed');
  });
});

describe('GET /email/spam and POST /email/spam/remove', () => {
  it('lists recorded spam reports newest first and removes them by address', async () => {
    await record('spam', [
      { email: 'example@xyz.abc', time: '2024-05-01T00:00:00Z' },
      { email: 'Second@xyz.abc', time: '2024-05-02T00:00:00Z' },
    ]);
    await record('spam', [{ email: 'example@xyz.abc' }], env.other.apiKey);
    const before = await list('/email/spam');
    expect(before).toEqual({
      emails: [
        { email: 'second@xyz.abc', reported_at: '2024-05-02T00:00:00.000Z' },
        { email: 'example@xyz.abc', reported_at: '2024-05-01T00:00:00.000Z' },
      ],
      message: 'success',
    });
    expect(await addresses('/email/spam?start_date=2024-05-02')).toEqual(['second@xyz.abc']);
    // Braze's example body.
    expect(await post('/email/spam/remove', { email: 'example@xyz.abc' })).toEqual({
      status: 201,
      body: { message: 'success' },
    });
    expect(await addresses('/email/spam')).toEqual(['second@xyz.abc']);
    expect(await addresses('/email/spam', env.other.apiKey)).toEqual(['example@xyz.abc']);
  });
});

describe('POST /sms/invalid_phone_numbers/remove', () => {
  it("removes numbers whatever their reason, Braze's example numbers without + included", async () => {
    await record('invalid_phone_numbers', [
      { phone: '+12183095514', reason: 'provider_error' },
      { phone: '+14255551212', reason: 'deactivated' },
      { phone: '+15555550100', reason: 'deactivated' },
    ]);
    await record('invalid_phone_numbers', [{ phone: '+12183095514', reason: 'deactivated' }], env.other.apiKey);
    const r = await post('/sms/invalid_phone_numbers/remove', { phone_numbers: ['12183095514', '14255551212'] });
    expect(r).toEqual({ status: 201, body: { message: 'success' } });
    expect(await phones()).toEqual(['+15555550100']);
    expect(await phones(env.other.apiKey)).toEqual(['+12183095514']);
    expect((await post('/sms/invalid_phone_numbers/remove', { phone_numbers: ['+15555550100'] })).status).toBe(201);
    expect(await phones()).toEqual([]);
  });
});

describe('refusals change nothing', () => {
  const emailCalls = ['/email/blocklist', '/email/blacklist', '/email/bounce/remove', '/email/spam/remove'];
  const badEmailBodies: [unknown, RegExp][] = [
    ['{"email":', /Malformed JSON/],
    [{}, /email is required/],
    [{ email: 5 }, /email/],
    [{ email: ['ok@example.com', 5] }, /email/],
    [{ email: [] }, /at least one/],
    [{ email: 'not-an-address' }, /email address/],
    [{ email: Array.from({ length: 51 }, (_, i) => `x${i}@example.com`) }, /at most 50/],
    [{ email: 'ok@example.com', emails: ['x@example.com'] }, /unknown key "emails"/],
    ['[]', /./],
  ];
  const badPhoneBodies: [unknown, RegExp][] = [
    ['{"phone_numbers": [', /Malformed JSON/],
    [{}, /phone_numbers is required/],
    [{ phone_numbers: '+12183095514' }, /phone_numbers/],
    [{ phone_numbers: [12183095514] }, /array of strings/],
    [{ phone_numbers: [] }, /at least one/],
    [{ phone_numbers: ['+0123'] }, /E\.164/],
    [{ phone_numbers: ['555-0100'] }, /E\.164/],
    [{ phone_numbers: Array.from({ length: 51 }, (_, i) => `+1555555${String(i).padStart(4, '0')}`) }, /at most 50/],
    [{ phone_number: ['+12183095514'] }, /unknown key "phone_number"/],
  ];

  it('400 with a message for malformed JSON, wrong types, missing fields, over-limit and unknown keys', async () => {
    await record('hard_bounces', [{ email: 'ok@example.com' }]);
    await record('spam', [{ email: 'ok@example.com' }]);
    await record('invalid_phone_numbers', [{ phone: '+15555550111', reason: 'deactivated' }]);
    const before = await everything();
    for (const url of emailCalls) {
      for (const [body, message] of badEmailBodies) {
        const r = await post(url, body);
        expect(r.status, `${url} ${JSON.stringify(body).slice(0, 60)}`).toBe(400);
        expect(r.body.message).toMatch(message);
      }
    }
    for (const [body, message] of badPhoneBodies) {
      const r = await post('/sms/invalid_phone_numbers/remove', body);
      expect(r.status, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(r.body.message).toMatch(message);
    }
    expect(await everything()).toEqual(before);
  });

  it('401 without a key, with an unknown key, and with a key lacking the permission', async () => {
    const before = await everything();
    const calls: [string, unknown, string][] = [
      ...emailCalls.map((u): [string, unknown, string] => [u, { email: 'ok@example.com' }, '']),
      ['/sms/invalid_phone_numbers/remove', { phone_numbers: ['+15555550111'] }, 'sms.invalid_phone_numbers.remove'],
    ];
    const permissions: Record<string, string> = {
      '/email/blocklist': 'email.blacklist',
      '/email/blacklist': 'email.blacklist',
      '/email/bounce/remove': 'email.bounce.remove',
      '/email/spam/remove': 'email.spam.remove',
    };
    for (const [url, body, permission] of calls) {
      expect((await post(url, body, null)).status, url).toBe(401);
      expect((await post(url, body, 'ces_key_thisKeyDoesNotExist0000000000000')).status, url).toBe(401);
      const bare = await post(url, body, env.ws.bareKey);
      expect(bare.status, url).toBe(401);
      expect(bare.body.message).toContain(permission || permissions[url]);
    }
    const spam = await callApi(env.app, 'GET', '/email/spam', { key: env.ws.bareKey });
    expect(spam.status).toBe(401);
    expect(spam.body.message).toContain('email.spam');
    expect(await everything()).toEqual(before);
  });

  it('GET /email/spam refuses bad queries', async () => {
    for (const q of ['limit=0', 'limit=501', 'offset=-1', 'email=nope', 'start_date=2024-05-02&end_date=2024-05-01']) {
      const r = await callApi(env.app, 'GET', `/email/spam?${q}`, { key: env.ws.apiKey });
      expect(r.status, q).toBe(400);
      expect(typeof r.body.message).toBe('string');
    }
  });
});
