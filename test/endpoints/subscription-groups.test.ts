import { beforeAll, describe, expect, it } from 'vitest';
import { applyWorkspaceFile } from '../../src/features/workspace/apply.js';
import { parseWorkspaceFile, WorkspaceFileError } from '../../src/features/workspace/parse.js';
import { useTestEnv } from '../helpers/context.js';
import { bodyOrRaw, callApi, statusAndBody } from '../helpers/http.js';
import { createKey } from '../helpers/seed.js';

/**
 * Subscription groups through the API, with Braze's documented examples as fixtures (the group ids replaced by the
 * workspace's own): POST /subscription/status/set (201 {"message": "success"}), its v2, GET /subscription/status/get
 * (capitalised states) and GET /subscription/user/status ({"success": true, ...}, lower-case states). Every refusal
 * is checked to change nothing.
 */

const env = useTestEnv({ workspaces: ['ws', 'other'] });
const EMAIL_GROUP = '0b7e6c1a-2f3d-4c5b-8a9e-1f2a3b4c5d6e';
const SMS_GROUP = '1c8f7d2b-3a4e-4d6c-9b0f-2a3b4c5d6e7f';
const OTHER_GROUP = '2d9a8e3c-4b5f-4e7d-8c1a-3b4c5d6e7f80';

beforeAll(async () => {
  const pool = env.ctx.pool;
  await pool.query(
    `INSERT INTO subscription_groups (id, workspace_id, name, channel) VALUES
       ($1, $3, 'Newsletter', 'email'), ($2, $3, 'Promotions SMS', 'sms'), ($4, $5, 'Theirs', 'email')`,
    [EMAIL_GROUP, SMS_GROUP, env.ws.workspaceId, OTHER_GROUP, env.other.workspaceId],
  );
  await pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, email, phone) VALUES
       ($1, 's1', 'user123', 1, 'Example1@email.com', '+12223334444'),
       ($1, 's2', 'example-user', 2, 'example2@email.com', '+11112223333'),
       ($1, 's3', 'twin', 3, 'example2@email.com', NULL),
       ($1, 's4', 'external_identifier', 4, NULL, '+15556667777'),
       ($2, 's5', 'user123', 5, 'example1@email.com', '+12223334444')`,
    [env.ws.workspaceId, env.other.workspaceId],
  );
});

const post = (url: string, body: unknown, key = env.ws.apiKey) =>
  callApi(env.app, 'POST', url, { key, ...bodyOrRaw(body) }).then(statusAndBody);
const get = (url: string, key = env.ws.apiKey) => callApi(env.app, 'GET', url, { key }).then(statusAndBody);

/** Every stored state, as `external_id group state`, and the group-state events logged. */
async function stored() {
  const states = await env.ctx.pool.query<{ row: string }>(
    `SELECT p.external_id || ' ' || g.name || ' ' || s.state AS row
       FROM subscription_group_states s JOIN profiles p ON p.id = s.profile_id JOIN subscription_groups g ON g.id = s.group_id
      ORDER BY 1`,
  );
  const events = await env.ctx.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM event_log WHERE type = 'users.behaviors.subscriptiongroup.StateChange'`,
  );
  return { states: states.rows.map((r) => r.row), events: events.rows[0]!.n };
}

describe('POST /subscription/status/set', () => {
  it("Braze's email example: the external id and every profile with an address, whatever its case", async () => {
    const r = await post('/subscription/status/set', {
      subscription_group_id: EMAIL_GROUP,
      subscription_state: 'unsubscribed',
      external_id: 'external_identifier',
      email: ['example1@email.com', 'example2@email.com'],
    });
    expect(r).toEqual({ status: 201, body: { message: 'success' } });
    expect((await stored()).states).toEqual([
      'example-user Newsletter unsubscribed',
      'external_identifier Newsletter unsubscribed',
      'twin Newsletter unsubscribed',
      'user123 Newsletter unsubscribed',
    ]);
  });

  it("Braze's SMS example: by number; another workspace's user of the same number is untouched", async () => {
    const r = await post('/subscription/status/set', {
      subscription_group_id: SMS_GROUP,
      subscription_state: 'subscribed',
      external_id: 'external_identifier',
      phone: ['+12223334444', '+11112223333'],
    });
    expect(r).toEqual({ status: 201, body: { message: 'success' } });
    const { states } = await stored();
    expect(states.filter((s) => s.includes('Promotions'))).toEqual([
      'example-user Promotions SMS subscribed',
      'external_identifier Promotions SMS subscribed',
      'user123 Promotions SMS subscribed',
    ]);
    const foreign = await env.ctx.pool.query(
      `SELECT count(*)::int AS n FROM subscription_group_states WHERE workspace_id = $1`,
      [env.other.workspaceId],
    );
    expect(foreign.rows[0].n).toBe(0);
  });

  it('logs one StateChange per change, none for a state set again, and takes external_id arrays', async () => {
    const before = (await stored()).events;
    const again = { subscription_group_id: SMS_GROUP, subscription_state: 'subscribed', external_id: ['user123'] };
    expect((await post('/subscription/status/set', again)).status).toBe(201);
    expect((await stored()).events).toBe(before);
    const flip = { ...again, subscription_state: 'unsubscribed', external_id: ['user123', 'nobody-has-this'] };
    expect((await post('/subscription/status/set', flip)).status).toBe(201);
    expect((await stored()).events).toBe(before + 1);
    const { rows } = await env.ctx.pool.query(
      `SELECT external_user_id, data FROM event_log WHERE type = 'users.behaviors.subscriptiongroup.StateChange'
        ORDER BY accepted_at DESC, time DESC LIMIT 1`,
    );
    expect(rows[0]).toEqual({
      external_user_id: 'user123',
      data: {
        subscription_group_id: SMS_GROUP,
        subscription_status: 'unsubscribed',
        channel: 'sms',
        state_change_source: 'subscription_status',
        email_address: null,
        phone_number: '+12223334444',
      },
    });
  });

  it('refuses bad requests whole and changes nothing', async () => {
    const before = await stored();
    const base = { subscription_group_id: EMAIL_GROUP, subscription_state: 'subscribed' };
    const cases: [unknown, RegExp | string][] = [
      [
        { ...base, email: ['example1@email.com'], phone: ['+12223334444'] },
        'Either an email address or a phone number should be provided, but not both.',
      ],
      [{ ...base, subscription_group_id: OTHER_GROUP, external_id: ['user123'] }, 'Invalid subscription group ID'],
      [
        { ...base, subscription_group_id: 'pto81fff-734f-80e5', external_id: ['user123'] },
        'Invalid subscription group ID',
      ],
      [{ ...base, phone: ['+12223334444'] }, /SMS subscription groups only/],
      [{ ...base, subscription_group_id: SMS_GROUP, email: ['example1@email.com'] }, /email subscription groups only/],
      [base, 'external_id, email or phone is required'],
      [{ ...base, external_id: Array.from({ length: 51 }, (_, i) => `u${i}`) }, /at most 50/],
      [{ ...base, email: Array.from({ length: 51 }, (_, i) => `u${i}@x.io`) }, /at most 50/],
      [{ ...base, external_id: [] }, /at least one/],
      [{ ...base, subscription_state: 'opted_in', external_id: ['user123'] }, /subscription_state/],
      [{ subscription_state: 'subscribed', external_id: ['user123'] }, /subscription_group_id/],
      [{ ...base, external_id: [5] }, /external_id/],
      [{ ...base, phone: ['2223334444'] }, /E\.164/],
      [{ ...base, email: ['not-an-address'] }, /email/],
      [{ ...base, external_id: ['user123'], extra: 1 }, /unknown key "extra"/],
      ['{"subscription_group_id":', /Malformed JSON/],
    ];
    for (const [body, message] of cases) {
      const r = await post('/subscription/status/set', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      if (typeof message === 'string') expect(r.body).toEqual({ message });
      else expect(r.body.message).toMatch(message);
    }
    const ok = { ...base, external_id: ['user123'] };
    expect((await post('/subscription/status/set', ok, env.ws.bareKey)).status).toBe(401);
    expect((await post('/subscription/status/set', ok, 'bogus')).status).toBe(401);
    const getOnly = await createKey(env.ctx.pool, env.ws.workspaceId, 'get-only', ['subscription.status.get']);
    const refused = await post('/subscription/status/set', ok, getOnly);
    expect(refused.status).toBe(401);
    expect(refused.body.message).toMatch(/subscription\.status\.set/);
    expect(await stored()).toEqual(before);
  });
});

describe('incremental exports', () => {
  it('a change of state marks the profile changed (profile_changes), a state set again does not', async () => {
    const stamp = async () =>
      (
        await env.ctx.pool.query<{ xid: string; n: number }>(
          `SELECT p.changed_xid::text AS xid, (SELECT count(*)::int FROM profile_changes c WHERE c.profile_id = p.id) AS n
             FROM profiles p WHERE p.workspace_id = $1 AND p.external_id = 'twin'`,
          [env.ws.workspaceId],
        )
      ).rows[0]!;
    const body = { subscription_group_id: EMAIL_GROUP, subscription_state: 'subscribed', external_id: ['twin'] };
    const before = await stamp();
    expect((await post('/subscription/status/set', body)).status).toBe(201);
    const changed = await stamp();
    expect(changed.xid).not.toBe(before.xid);
    expect(changed.n).toBe(before.n + 1);
    expect((await post('/subscription/status/set', body)).status).toBe(201);
    expect(await stamp()).toEqual(changed);
    // Back as it was for the tests below.
    await post('/subscription/status/set', { ...body, subscription_state: 'unsubscribed' });
  });
});

describe('POST /v2/subscription/status/set', () => {
  it("Braze's examples: several groups in one call, by external ids, emails or phones", async () => {
    const byIds = await post('/v2/subscription/status/set', {
      subscription_groups: [
        {
          subscription_group_id: EMAIL_GROUP,
          subscription_state: 'subscribed',
          external_ids: ['example-user', 'example1@email.com'],
        },
        {
          subscription_group_id: SMS_GROUP,
          subscription_state: 'subscribed',
          external_ids: ['example-user', 'example1@email.com'],
        },
      ],
    });
    expect(byIds).toEqual({ status: 201, body: { message: 'success' } });
    const byEmails = await post('/v2/subscription/status/set', {
      subscription_groups: [
        {
          subscription_group_id: EMAIL_GROUP,
          subscription_state: 'subscribed',
          emails: ['example1@email.com', 'example2@email.com'],
        },
      ],
    });
    expect(byEmails.status).toBe(201);
    const byPhones = await post('/v2/subscription/status/set', {
      subscription_groups: [
        {
          subscription_group_id: SMS_GROUP,
          subscription_state: 'unsubscribed',
          phones: ['+12223334444', '+15556667777'],
        },
      ],
    });
    expect(byPhones.status).toBe(201);
    const { states } = await stored();
    expect(states).toEqual([
      'example-user Newsletter subscribed',
      'example-user Promotions SMS subscribed',
      'external_identifier Newsletter unsubscribed',
      'external_identifier Promotions SMS unsubscribed',
      'twin Newsletter subscribed',
      'user123 Newsletter subscribed',
      'user123 Promotions SMS unsubscribed',
    ]);
  });

  it('refuses the whole request when one group is wrong, and changes nothing', async () => {
    const before = await stored();
    const good = { subscription_group_id: EMAIL_GROUP, subscription_state: 'unsubscribed', external_ids: ['twin'] };
    const cases: [unknown, RegExp | string][] = [
      [
        { subscription_groups: [good, { ...good, subscription_group_id: OTHER_GROUP }] },
        'Invalid subscription group ID',
      ],
      [
        { subscription_groups: [good, { ...good, emails: ['a@b.io'], phones: ['+12223334444'] }] },
        'Either an email address or a phone number should be provided, but not both.',
      ],
      [{ subscription_groups: [] }, /at least one group/],
      [{ subscription_groups: Array.from({ length: 51 }, () => good) }, /at most 50 groups/],
      [
        { subscription_groups: [{ ...good, external_ids: Array.from({ length: 51 }, (_, i) => `u${i}`) }] },
        /at most 50/,
      ],
      [{ subscription_groups: [{ ...good, subscription_state: 'maybe' }] }, /subscription_state/],
      [{ subscription_group_id: EMAIL_GROUP }, /subscription_groups/],
      ['[', /Malformed JSON/],
    ];
    for (const [body, message] of cases) {
      const r = await post('/v2/subscription/status/set', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      if (typeof message === 'string') expect(r.body).toEqual({ message });
      else expect(r.body.message).toMatch(message);
    }
    expect((await post('/v2/subscription/status/set', { subscription_groups: [good] }, env.ws.bareKey)).status).toBe(
      401,
    );
    expect(await stored()).toEqual(before);
  });
});

describe('GET /subscription/status/get', () => {
  it("Braze's examples: several external ids, one number (its + unencoded), one address", async () => {
    const many = await get(
      `/subscription/status/get?subscription_group_id=${SMS_GROUP}&external_id[]=user123&external_id[]=example-user&external_id[]=nobody`,
    );
    expect(many).toEqual({
      status: 200,
      body: {
        status: { user123: 'Unsubscribed', 'example-user': 'Subscribed', nobody: 'Unknown' },
        message: 'success',
      },
    });
    const sms = await get(`/subscription/status/get?subscription_group_id=${SMS_GROUP}&phone=+11112223333`);
    expect(sms.body).toEqual({ status: { '+11112223333': 'Subscribed' }, message: 'success' });
    const email = await get(`/subscription/status/get?subscription_group_id=${EMAIL_GROUP}&email=EXAMPLE2@email.com`);
    expect(email.body).toEqual({ status: { 'EXAMPLE2@email.com': 'Subscribed' }, message: 'success' });
  });

  it('uses the external ids alone when both are given; Unknown for a user never set in the group', async () => {
    const r = await get(
      `/subscription/status/get?subscription_group_id=${SMS_GROUP}&external_id=twin&email=example1@email.com`,
    );
    expect(r.body).toEqual({ status: { twin: 'Unknown' }, message: 'success' });
  });

  it('refuses an unknown group, email beside phone, no user, too many users, and callers without the permission', async () => {
    const cases: [string, RegExp | string][] = [
      [`subscription_group_id=${OTHER_GROUP}&external_id=user123`, 'Invalid subscription group ID'],
      [`subscription_group_id=nope&external_id=user123`, 'Invalid subscription group ID'],
      [
        `subscription_group_id=${EMAIL_GROUP}&email=a@b.io&phone=%2B12223334444`,
        'Either an email address or a phone number should be provided, but not both.',
      ],
      [`subscription_group_id=${EMAIL_GROUP}`, 'external_id, email or phone is required'],
      ['external_id=user123', /subscription_group_id/],
      [
        `subscription_group_id=${EMAIL_GROUP}&${Array.from({ length: 51 }, (_, i) => `external_id[]=u${i}`).join('&')}`,
        /at most 50/,
      ],
    ];
    for (const [query, message] of cases) {
      const r = await get(`/subscription/status/get?${query}`);
      expect(r.status, query.slice(0, 80)).toBe(400);
      if (typeof message === 'string') expect(r.body).toEqual({ message });
      else expect(r.body.message).toMatch(message);
    }
    const url = `/subscription/status/get?subscription_group_id=${EMAIL_GROUP}&external_id=user123`;
    expect((await get(url, env.ws.bareKey)).status).toBe(401);
    expect((await get(url, 'bogus')).status).toBe(401);
  });
});

describe('GET /subscription/user/status', () => {
  it("lists the groups the user has a state in, lower-case, under success: true (Braze's example shape)", async () => {
    const r = await get('/subscription/user/status?external_id=user123&limit=100&offset=0');
    expect(r).toEqual({
      status: 200,
      body: {
        success: true,
        subscription_groups: [
          { subscription_group_id: EMAIL_GROUP, subscription_status: 'subscribed' },
          { subscription_group_id: SMS_GROUP, subscription_status: 'unsubscribed' },
        ].sort((a, b) => (a.subscription_group_id < b.subscription_group_id ? -1 : 1)),
      },
    });
    const paged = await get('/subscription/user/status?external_id[]=user123&limit=1&offset=1');
    expect(paged.body.subscription_groups).toHaveLength(1);
    const byPhone = await get('/subscription/user/status?phone=+15556667777');
    expect(byPhone.body.subscription_groups).toEqual([
      { subscription_group_id: EMAIL_GROUP, subscription_status: 'unsubscribed' },
      { subscription_group_id: SMS_GROUP, subscription_status: 'unsubscribed' },
    ]);
    const never = await get('/subscription/user/status?external_id=nobody');
    expect(never.body).toEqual({ success: true, subscription_groups: [] });
  });

  it('refuses no user, a bad limit, and callers without the permission', async () => {
    expect((await get('/subscription/user/status')).body).toEqual({
      message: 'external_id, email or phone is required',
    });
    expect((await get('/subscription/user/status?external_id=user123&limit=101')).status).toBe(400);
    expect((await get('/subscription/user/status?external_id=user123&offset=-1')).status).toBe(400);
    const statusOnly = await createKey(env.ctx.pool, env.ws.workspaceId, 'status-only', ['subscription.status.get']);
    const r = await get('/subscription/user/status?external_id=user123', statusOnly);
    expect(r.status).toBe(401);
    expect(r.body.message).toMatch(/subscription\.groups\.get/);
  });
});

describe('the workspace file', () => {
  const file = (groups: string) => `company:
  name: Groups Co
workspaces:
  - name: Groups WS
    subscription_groups:
${groups}`;
  const declared = `      - { id: 3E2D1C0B-0000-4000-8000-000000000001, name: Weekly, channel: email }
      - { id: 3e2d1c0b-0000-4000-8000-000000000002, name: Alerts, channel: sms }
`;

  it('declares groups by id; applying it again changes nothing; a rename updates the group', async () => {
    const first = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(file(declared)));
    expect(first.counts.subscription_groups).toEqual({ created: 2, updated: 0, unchanged: 0 });
    const again = await applyWorkspaceFile(env.ctx.pool, parseWorkspaceFile(file(declared)));
    expect(again.counts.subscription_groups).toEqual({ created: 0, updated: 0, unchanged: 2 });
    const renamed = await applyWorkspaceFile(
      env.ctx.pool,
      parseWorkspaceFile(file(declared.replace('Weekly', 'Daily'))),
    );
    expect(renamed.counts.subscription_groups).toEqual({ created: 0, updated: 1, unchanged: 1 });
    const { rows } = await env.ctx.pool.query(
      `SELECT id, name, channel FROM subscription_groups WHERE name IN ('Daily', 'Alerts') ORDER BY name`,
    );
    expect(rows).toEqual([
      { id: '3e2d1c0b-0000-4000-8000-000000000002', name: 'Alerts', channel: 'sms' },
      { id: '3e2d1c0b-0000-4000-8000-000000000001', name: 'Daily', channel: 'email' },
    ]);
  });

  it("refuses a bad channel, a duplicate name or id, and another workspace's group id", () => {
    expect(() =>
      parseWorkspaceFile(file('      - { id: 3e2d1c0b-0000-4000-8000-000000000003, name: X, channel: push }\n')),
    ).toThrow(/email or sms/);
    expect(() => parseWorkspaceFile(file('      - { id: not-a-uuid, name: X, channel: email }\n'))).toThrow(/UUID/);
    expect(() => parseWorkspaceFile(file(declared + declared.replace(/000000000001/, '000000000009')))).toThrow(
      /subscription group/,
    );
    return expect(
      applyWorkspaceFile(
        env.ctx.pool,
        parseWorkspaceFile(file(`      - { id: ${EMAIL_GROUP}, name: Stolen, channel: email }\n`)),
      ),
    ).rejects.toThrow(WorkspaceFileError);
  });
});

describe('rate limit', () => {
  const limited = useTestEnv({ config: { RATE_LIMIT_SUBSCRIPTION_SET_PER_MINUTE: '2' }, workspaces: ['ws'] });
  const send = (url: string, body: unknown) => callApi(limited.app, 'POST', url, { key: limited.ws.apiKey, body });

  it('one bucket for both versions of the set call: the third request of the minute gets 429 with Retry-After', async () => {
    const v1 = { subscription_group_id: EMAIL_GROUP, subscription_state: 'subscribed', external_id: ['u'] };
    const first = await send('/subscription/status/set', v1);
    // The group is not this workspace's: a 400, counted all the same.
    expect(first.status).toBe(400);
    expect(first.headers['x-ratelimit-limit']).toBe('2');
    expect(first.headers['x-ratelimit-remaining']).toBe('1');
    const second = await send('/v2/subscription/status/set', {
      subscription_groups: [
        { subscription_group_id: EMAIL_GROUP, subscription_state: 'subscribed', external_ids: ['u'] },
      ],
    });
    expect(second.headers['x-ratelimit-remaining']).toBe('0');
    const third = await send('/subscription/status/set', v1);
    expect(third.status).toBe(429);
    expect(Number(third.headers['retry-after'])).toBeGreaterThan(0);
    expect(typeof third.body.message).toBe('string');
    const read = await callApi(limited.app, 'GET', `/subscription/user/status?external_id=u`, {
      key: limited.ws.apiKey,
    });
    expect(read.status).toBe(200);
  });
});
