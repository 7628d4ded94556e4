import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi, statusAndBody } from '../helpers/http.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'app-ios', 'iOS'), ($2, 'app-foreign', 'Foreign')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, email, email_subscribe, attribute_times)
     VALUES ($1, 's1', 'u1', 1, 'Ann@Example.com', 'opted_in', '{}'),
            ($1, 's2', 'u2', 2, 'bob@example.com', 'opted_in', '{"email_subscribe": "2030-01-01T00:00:00.000Z"}'),
            ($1, 's3', 'u3', 3, null, null, '{}'),
            ($2, 's9', 'u9', 9, 'ann@example.com', 'opted_in', '{}')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
});

const post = (kind: string, payload: unknown, key = env.ws.apiKey) =>
  callApi(env.app, 'POST', `/internal/records/${kind}`, { key: key || null, ...bodyOrRaw(payload) }).then(
    statusAndBody,
  );

async function counts() {
  const { rows } = await env.ctx.pool.query<{ u: number; h: number; p: number; s: number }>(
    `SELECT (SELECT count(*)::int FROM uninstall_events) AS u, (SELECT count(*)::int FROM hard_bounces) AS h,
            (SELECT count(*)::int FROM invalid_phone_numbers) AS p, (SELECT count(*)::int FROM email_subscriptions) AS s`,
  );
  return rows[0]!;
}

describe('POST /internal/records/uninstalls', () => {
  it('stores uninstalls, moves the user profile forward, and skips an exact repeat for the same user', async () => {
    const records = [
      { app_id: 'app-ios', external_id: 'u1', time: '2024-03-01T10:00:00Z' },
      { app_id: 'app-ios', time: '2024-03-01T10:00:00Z' },
      { app_id: 'app-ios', time: '2024-03-01T10:00:00Z' },
    ];
    const first = await post('uninstalls', { records });
    expect(first).toEqual({ status: 201, body: { recorded: 3, duplicates: 0, message: 'success' } });
    const again = await post('uninstalls', { records: [records[0]] });
    expect(again.body).toEqual({ recorded: 0, duplicates: 1, message: 'success' });
    const { rows } = await env.ctx.pool.query(
      `SELECT a.api_id, e.profile_id IS NOT NULL AS named, e.occurred_at FROM uninstall_events e JOIN apps a ON a.id = e.app_id ORDER BY e.id`,
    );
    expect(rows).toHaveLength(3);
    expect(rows.filter((r) => r.named)).toHaveLength(1);
    const p = await env.ctx.pool.query(
      `SELECT uninstalled_at FROM profiles WHERE external_id = 'u1' AND workspace_id = $1`,
      [env.ws.workspaceId],
    );
    expect(p.rows[0].uninstalled_at.toISOString()).toBe('2024-03-01T10:00:00.000Z');
  });

  it("refuses unknown app ids and external ids (also another workspace's), recording nothing of the batch", async () => {
    const before = await counts();
    const unknownApp = await post('uninstalls', { records: [{ app_id: 'app-ios' }, { app_id: 'app-foreign' }] });
    expect(unknownApp.status).toBe(400);
    expect(unknownApp.body.message).toMatch(/records\[1\]\.app_id "app-foreign"/);
    const unknownUser = await post('uninstalls', { records: [{ app_id: 'app-ios', external_id: 'u9' }] });
    expect(unknownUser.status).toBe(400);
    expect(unknownUser.body.message).toMatch(/external_id/);
    expect(await counts()).toEqual(before);
  });
});

describe('POST /internal/records/hard_bounces', () => {
  it('stores the bounce lower-cased and unsubscribes the address and its profiles, but not over a later change', async () => {
    const res = await post('hard_bounces', {
      records: [
        { email: 'ANN@example.com', time: '2024-03-02T08:00:00Z' },
        { email: 'bob@example.com', time: '2024-03-02T08:00:00Z' },
        { email: 'nobody-yet@example.com', time: '2024-03-02T09:00:00Z' },
      ],
    });
    expect(res).toEqual({ status: 201, body: { recorded: 3, duplicates: 0, message: 'success' } });
    const profiles = await env.ctx.pool.query(
      `SELECT external_id, email_subscribe, attribute_times->>'email_subscribe' AS at FROM profiles ORDER BY workspace_id = $1 DESC, external_id`,
      [env.ws.workspaceId],
    );
    const byId = Object.fromEntries(profiles.rows.map((r) => [r.external_id, r]));
    expect(byId.u1).toMatchObject({ email_subscribe: 'unsubscribed', at: '2024-03-02T08:00:00.000Z' });
    // bob changed his subscription after the bounce time: that later write wins.
    expect(byId.u2).toMatchObject({ email_subscribe: 'opted_in' });
    // The same address in another workspace is untouched.
    expect(byId.u9).toMatchObject({ email_subscribe: 'opted_in' });
    const subs = await env.ctx.pool.query(
      `SELECT email, state FROM email_subscriptions WHERE workspace_id = $1 ORDER BY email`,
      [env.ws.workspaceId],
    );
    expect(subs.rows).toEqual([
      { email: 'ann@example.com', state: 'unsubscribed' },
      { email: 'bob@example.com', state: 'unsubscribed' },
      { email: 'nobody-yet@example.com', state: 'unsubscribed' },
    ]);
    const stored = await env.ctx.pool.query(`SELECT email FROM hard_bounces WHERE workspace_id = $1 ORDER BY id`, [
      env.ws.workspaceId,
    ]);
    expect(stored.rows.map((r) => r.email)).toEqual(['ann@example.com', 'bob@example.com', 'nobody-yet@example.com']);
  });

  it('skips exact repeats, in the batch and against stored rows', async () => {
    const dup = { email: 'ann@example.com', time: '2024-03-02T08:00:00Z' };
    const res = await post('hard_bounces', {
      records: [dup, { ...dup, email: 'Ann@Example.com' }, { email: 'new@example.com', time: '2024-03-05T00:00:00Z' }],
    });
    expect(res.body).toEqual({ recorded: 1, duplicates: 2, message: 'success' });
  });

  it('defaults the time to now', async () => {
    const before = Date.now();
    await post('hard_bounces', { records: [{ email: 'now@example.com' }] });
    const { rows } = await env.ctx.pool.query(`SELECT bounced_at FROM hard_bounces WHERE email = 'now@example.com'`);
    expect(rows[0].bounced_at.getTime()).toBeGreaterThanOrEqual(before - 1000);
  });
});

describe('POST /internal/records/invalid_phone_numbers', () => {
  it('stores numbers with their reason and skips exact repeats', async () => {
    const records = [
      { phone: '+15555550100', reason: 'provider_error', time: '2024-03-03T00:00:00Z' },
      { phone: '+15555550100', reason: 'deactivated', time: '2024-03-03T00:00:00Z' },
    ];
    expect((await post('invalid_phone_numbers', { records })).body).toEqual({
      recorded: 2,
      duplicates: 0,
      message: 'success',
    });
    expect((await post('invalid_phone_numbers', { records })).body).toEqual({
      recorded: 0,
      duplicates: 2,
      message: 'success',
    });
    const { rows } = await env.ctx.pool.query(`SELECT phone, reason FROM invalid_phone_numbers ORDER BY id`);
    expect(rows).toEqual([
      { phone: '+15555550100', reason: 'provider_error' },
      { phone: '+15555550100', reason: 'deactivated' },
    ]);
  });
});

describe('bad input is refused and changes nothing', () => {
  const long = 'x'.repeat(300);
  const cases: [string, string, unknown, RegExp][] = [
    ['uninstalls', 'malformed JSON', '{"records": [', /Malformed JSON/],
    ['uninstalls', 'no records field', {}, /records/],
    ['uninstalls', 'empty records', { records: [] }, /at least one/],
    ['uninstalls', 'records not an array', { records: 'x' }, /records/],
    ['uninstalls', 'missing app_id', { records: [{}] }, /app_id/],
    ['uninstalls', 'app_id of the wrong type', { records: [{ app_id: 5 }] }, /app_id/],
    ['uninstalls', 'app_id over 255 characters', { records: [{ app_id: long }] }, /255/],
    ['uninstalls', 'time not a time', { records: [{ app_id: 'app-ios', time: 'yesterday' }] }, /time/],
    ['uninstalls', 'time not a real date', { records: [{ app_id: 'app-ios', time: '2024-02-30T00:00:00Z' }] }, /time/],
    ['uninstalls', 'unknown field', { records: [{ app_id: 'app-ios', extra: 1 }] }, /extra|unrecognized/i],
    ['uninstalls', '5,001 records', { records: Array.from({ length: 5001 }, () => ({ app_id: 'app-ios' })) }, /5000/],
    ['hard_bounces', 'not an address', { records: [{ email: 'not-an-address' }] }, /email/],
    ['hard_bounces', 'address over 254 characters', { records: [{ email: `${long}@example.com` }] }, /254/],
    ['hard_bounces', 'address of the wrong type', { records: [{ email: ['a@b.c'] }] }, /email/],
    [
      'invalid_phone_numbers',
      'number not E.164',
      { records: [{ phone: '5555550100', reason: 'deactivated' }] },
      /E\.164/,
    ],
    ['invalid_phone_numbers', 'missing reason', { records: [{ phone: '+15555550100' }] }, /reason/],
    ['invalid_phone_numbers', 'unknown reason', { records: [{ phone: '+15555550100', reason: 'gone' }] }, /reason/],
  ];
  it.each(cases)('%s: %s', async (kind, _label, payload, message) => {
    const before = await counts();
    const res = await post(kind, payload);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(message);
    expect(await counts()).toEqual(before);
  });

  it.each(['uninstalls', 'hard_bounces', 'invalid_phone_numbers'])(
    '%s needs a key with internal.records.write',
    async (kind) => {
      const before = await counts();
      const body = { records: [{ app_id: 'app-ios', email: 'a@b.c', phone: '+15555550100', reason: 'deactivated' }] };
      const missing = await post(kind, body, '');
      expect(missing.status).toBe(401);
      expect(missing.body.message).toMatch(/API key/);
      const bare = await post(kind, body, env.ws.bareKey);
      expect(bare.status).toBe(401);
      expect(bare.body.message).toMatch(/internal\.records\.write/);
      expect(await counts()).toEqual(before);
    },
  );
});

describe('records declared in the workspace file go through the same writers', () => {
  it('a hard bounce from the workspace file unsubscribes the address and its profiles, like one from the API', async () => {
    const { applyWorkspaceFile } = await import('../../src/features/workspace/apply.js');
    const { parseWorkspaceFile } = await import('../../src/features/workspace/parse.js');
    const file = `company: { name: Bounce Co }
workspaces:
  - name: Mail
    records:
      hard_bounces:
        - { email: Carol@Example.com, at: "2026-02-01T10:00:00Z" }
`;
    const first = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(file));
    const workspaceId = first.workspaceIds.Mail!;
    await env.ctx.pool.query(
      `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, email, email_subscribe, attribute_times)
       VALUES ($1, 'wf1', 'carol', 1, 'carol@example.com', 'opted_in', '{}')`,
      [workspaceId],
    );
    // The profile came after the first apply; applying again unsubscribes it (the bounce is stored once).
    const again = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(file));
    expect(again.counts.hard_bounces).toEqual({ created: 0, updated: 0, unchanged: 1 });
    const { rows } = await env.ctx.pool.query(
      `SELECT email_subscribe FROM profiles WHERE workspace_id = $1 AND external_id = 'carol'`,
      [workspaceId],
    );
    expect(rows[0].email_subscribe).toBe('unsubscribed');
    const subs = await env.ctx.pool.query(
      `SELECT state FROM email_subscriptions WHERE workspace_id = $1 AND email = 'carol@example.com'`,
      [workspaceId],
    );
    expect(subs.rows).toEqual([{ state: 'unsubscribed' }]);
    expect(
      (await env.ctx.pool.query(`SELECT 1 FROM hard_bounces WHERE workspace_id = $1`, [workspaceId])).rowCount,
    ).toBe(1);
  });
});
