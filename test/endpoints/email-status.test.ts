import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi, statusAndBody } from '../helpers/http.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, email, email_subscribe) VALUES
       ($1, 's1', 'one', 1, 'Shared@Example.com', 'subscribed'),
       ($1, 's2', 'two', 2, 'shared@example.com', NULL),
       ($1, 's3', 'three', 3, 'solo@example.com', 'opted_in'),
       ($2, 's4', 'foreign', 4, 'shared@example.com', 'subscribed')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
});

const post = (body: unknown, key = env.ws.apiKey) =>
  callApi(env.app, 'POST', '/email/status', { key, ...bodyOrRaw(body) }).then(statusAndBody);

async function states() {
  return (await env.ctx.pool.query('SELECT external_id, email_subscribe FROM profiles ORDER BY external_id')).rows;
}
async function stored() {
  return (await env.ctx.pool.query('SELECT workspace_id, email, state FROM email_subscriptions ORDER BY email')).rows;
}

describe('POST /email/status', () => {
  it('sets the state of every user of the workspace with the address, whatever its case', async () => {
    const r = await post({ email: 'SHARED@example.com', subscription_state: 'unsubscribed' });
    expect(r).toEqual({ status: 201, body: { message: 'success' } });
    expect(await states()).toEqual([
      { external_id: 'foreign', email_subscribe: 'subscribed' },
      { external_id: 'one', email_subscribe: 'unsubscribed' },
      { external_id: 'three', email_subscribe: 'opted_in' },
      { external_id: 'two', email_subscribe: 'unsubscribed' },
    ]);
  });

  it('takes up to 50 addresses and stores the state of addresses no user has yet', async () => {
    const emails = ['solo@example.com', ...Array.from({ length: 49 }, (_, i) => `new${i}@example.com`)];
    const r = await post({ email: emails, subscription_state: 'opted_in' });
    expect(r.status).toBe(201);
    expect((await states()).find((s) => s.external_id === 'three').email_subscribe).toBe('opted_in');
    const rows = await stored();
    expect(rows.filter((x) => x.email.startsWith('new'))).toHaveLength(49);
    expect(rows.every((x) => x.workspace_id === env.ws.workspaceId)).toBe(true);
  });

  it('refuses bad requests whole and changes nothing', async () => {
    const before = { states: await states(), stored: await stored() };
    const cases: [unknown, RegExp][] = [
      [{ subscription_state: 'opted_in' }, /email/],
      [{ email: 'a@b.io' }, /subscription_state/],
      [{ email: 'a@b.io', subscription_state: 'maybe' }, /subscription_state/],
      [{ email: 'not-an-address', subscription_state: 'opted_in' }, /email address/],
      [{ email: ['a@b.io', 5], subscription_state: 'opted_in' }, /email/],
      [{ email: [], subscription_state: 'opted_in' }, /email/],
      [{ email: Array.from({ length: 51 }, (_, i) => `x${i}@b.io`), subscription_state: 'opted_in' }, /email/],
      [{ email: `${'a'.repeat(251)}@b.io`, subscription_state: 'opted_in' }, /255/],
      ['{"email":', /Malformed JSON/],
    ];
    for (const [body, message] of cases) {
      const r = await post(body);
      expect(r.status, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(r.body.message).toMatch(message);
    }
    expect((await post({ email: 'a@b.io', subscription_state: 'opted_in' }, env.ws.bareKey)).status).toBe(401);
    expect((await post({ email: 'a@b.io', subscription_state: 'opted_in' }, 'bogus')).status).toBe(401);
    expect({ states: await states(), stored: await stored() }).toEqual(before);
  });
});
