import { gunzipSync } from 'node:zlib';
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { entries } from '../helpers/aggregates.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, insertProfiles, requestExport, waitForExport } from '../helpers/export-fixtures.js';
import { bearer, createKey } from '../helpers/seed.js';

/**
 * The user-data endpoints (docs/user-data.md) against real PostgreSQL and Redis: what each answers, what it changes
 * once applied (the staging log drained here by the same code the workers run), and how each refuses bad input
 * without changing anything.
 */

const env = useTestEnv({ workspaces: ['ws', 'other'] });

async function post(url: string, body: unknown, key = env.ws.apiKey, headers: Record<string, string> = {}) {
  const res = await env.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(key), 'content-type': 'application/json', ...headers },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json() as Record<string, unknown>, raw: res.body };
}

/** Applies everything staged, as an apply job does. */
async function applyStaged() {
  return drainThrough(env.ctx.pool, undefined, {
    maxRows: 100,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });
}

const exportIds = (body: unknown, key = env.ws.apiKey) => post('/users/export/ids', body, key);

async function profileOf(externalId: string, workspaceId = env.ws.workspaceId) {
  const { rows } = await env.ctx.pool.query(
    `SELECT p.*, (SELECT array_agg(x.external_id ORDER BY x.external_id) FROM profile_external_ids x WHERE x.profile_id = p.id) AS deprecated
       FROM profiles p WHERE p.workspace_id = $1 AND (p.external_id = $2 OR p.id IN (SELECT profile_id FROM profile_external_ids WHERE external_id = $2))`,
    [workspaceId, externalId],
  );
  return rows[0] as Record<string, unknown> | undefined;
}

async function track(body: unknown, key = env.ws.apiKey) {
  const r = await post('/users/track', body, key);
  expect(r.status, r.raw).toBe(201);
}

async function stagedRows() {
  return (await env.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ingest_staging`)).rows[0]!.n;
}

beforeAll(async () => {
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 40);
  await insertProfiles(env.ctx.pool, env.other.workspaceId, 1, 5);
  await env.ctx.pool.query(
    `UPDATE profiles SET phone = '+1555000' || lpad((regexp_replace(external_id, '\\D', '', 'g'))::text, 4, '0') WHERE workspace_id = $1`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id) SELECT workspace_id, 'crm', 'crm-' || external_id, id FROM profiles WHERE workspace_id = $1`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `UPDATE profiles p SET user_aliases = jsonb_build_array(jsonb_build_object('alias_name', 'crm-' || p.external_id, 'alias_label', 'crm')) WHERE workspace_id = $1`,
    [env.ws.workspaceId],
  );
});

describe('POST /users/export/ids', () => {
  it('finds users by external_id, alias, service_id, email, phone and device id, lists the unknown ones, and renders the fields asked', async () => {
    const r = await exportIds({
      external_ids: ['ext-1', 'nobody', 'ext-2'],
      user_aliases: [
        { alias_label: 'crm', alias_name: 'crm-ext-3' },
        { alias_label: 'crm', alias_name: 'missing' },
      ],
      fields_to_export: ['external_id', 'email', 'user_aliases'],
    });
    expect(r.status, r.raw).toBe(201);
    expect(r.body).toEqual({
      users: [
        {
          external_id: 'ext-1',
          email: 'user1@example.com',
          user_aliases: [{ alias_name: 'crm-ext-1', alias_label: 'crm' }],
        },
        {
          external_id: 'ext-2',
          email: 'user2@example.com',
          user_aliases: [{ alias_name: 'crm-ext-2', alias_label: 'crm' }],
        },
        {
          external_id: 'ext-3',
          email: 'user3@example.com',
          user_aliases: [{ alias_name: 'crm-ext-3', alias_label: 'crm' }],
        },
      ],
      invalid_user_ids: ['nobody', 'crm:missing'],
      message: 'success',
    });
    for (const [body, expected] of [
      [{ service_id: 'svc-4' }, 'ext-4'],
      [{ email_address: 'USER5@example.com' }, 'ext-5'],
      [{ phone: '+15550000006' }, 'ext-6'],
      [{ device_id: 'd7' }, 'ext-7'],
    ] as const) {
      const one = await exportIds({ ...body, fields_to_export: ['external_id'] });
      expect(one.status, one.raw).toBe(201);
      expect(one.body, JSON.stringify(body)).toEqual({ users: [{ external_id: expected }], message: 'success' });
    }
  });

  it("never answers another workspace's users", async () => {
    // Only this file's first workspace has aliases and ext-6 upwards.
    const r = await exportIds(
      {
        external_ids: ['ext-1', 'ext-6'],
        user_aliases: [{ alias_label: 'crm', alias_name: 'crm-ext-1' }],
        fields_to_export: ['external_id'],
      },
      env.other.apiKey,
    );
    expect(r.body).toEqual({
      users: [{ external_id: 'ext-1' }],
      invalid_user_ids: ['ext-6', 'crm:crm-ext-1'],
      message: 'success',
    });
  });

  it('renders a user as the segment export renders the same user, field for field, every field', async () => {
    await createSegment(env.ctx.pool, env.ws.workspaceId, 'everyone-us');
    const workers = env.startWorkers([segmentExportJob, exportShardJob]);
    try {
      const fields = [
        'external_id',
        'service_id',
        'first_name',
        'email',
        'dob',
        'created_at',
        'custom_attributes',
        'custom_events',
        'purchases',
        'devices',
        'campaigns_received',
        'phone',
        'user_aliases',
        'total_revenue',
        'country',
        'random_bucket',
      ];
      const started = await requestExport(env, env.ws.apiKey, {
        segment_id: 'everyone-us',
        fields_to_export: fields,
        output_format: 'gzip',
      });
      expect(started.status).toBe(201);
      const done = await waitForExport(env, env.ws.apiKey, String(started.body.object_prefix));
      expect(done.status).toBe('ready');
      const manifest = JSON.parse(
        await readFile(
          path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(done.key_prefix), 'manifest.json'),
          'utf8',
        ),
      ) as {
        parts: Array<{ key: string }>;
      };
      const lines = (
        await Promise.all(
          manifest.parts.map(async (p) =>
            gunzipSync(
              await readFile(path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), p.key)),
            ).toString('utf8'),
          ),
        )
      )
        .join('')
        .split('\n')
        .filter(Boolean);
      const exported = new Map(lines.map((l) => [JSON.parse(l).external_id as string, l]));
      const r = await exportIds({ external_ids: ['ext-9', 'ext-10', 'ext-11'], fields_to_export: fields });
      expect(r.status).toBe(201);
      const users = r.body.users as Array<Record<string, unknown>>;
      expect(users).toHaveLength(3);
      // Byte for byte: the answer holds each user's export line as the export wrote it.
      for (const u of users) {
        const line = exported.get(u.external_id as string)!;
        expect(r.raw).toContain(line);
        expect(JSON.parse(line)).toEqual(u);
      }
    } finally {
      await workers.close(5_000);
    }
  });

  it('refuses bad bodies with 400 naming the problem', async () => {
    const cases: Array<[unknown, RegExp]> = [
      [{}, /name at least one user/],
      [{ external_ids: 'ext-1' }, /external_ids.*array/],
      [{ external_ids: Array.from({ length: 51 }, (_, i) => `e${i}`) }, /at most 50/],
      [
        {
          external_ids: Array.from({ length: 30 }, (_, i) => `e${i}`),
          user_aliases: Array.from({ length: 21 }, (_, i) => ({ alias_label: 'l', alias_name: `n${i}` })),
        },
        /The max number of external_ids and aliases per request was exceeded/,
      ],
      [{ email_address: 'a@example.com', phone: '+15550000001' }, /only one of device_id, email_address and phone/],
      [{ external_ids: ['ext-1'], fields_to_export: ['password'] }, /fields_to_export entries must be fields/],
      [{ external_ids: [''] }, /must not be empty/],
      [{ external_ids: ['x'.repeat(513)] }, /at most 512 characters/],
      [{ email_address: 'not-an-address' }, /email address/],
      [{ user_aliases: [{ alias_label: 'crm' }] }, /alias_name/],
    ];
    for (const [body, message] of cases) {
      const r = await exportIds(body);
      expect(r.status, JSON.stringify(body)).toBe(400);
      expect(String(r.body.message), JSON.stringify(body)).toMatch(message);
    }
  });
});

describe('POST /users/delete', () => {
  it('deletes by each kind of identifier; the users are gone from /users/export/ids and leave tombstones', async () => {
    const r = await post('/users/delete', {
      external_ids: ['ext-20'],
      user_aliases: [{ alias_label: 'crm', alias_name: 'crm-ext-21' }],
      service_ids: ['svc-22'],
      email_addresses: [{ email: 'user23@example.com', prioritization: ['most_recently_updated'] }],
      phone_numbers: ['+15550000024'],
    });
    expect(r.status, r.raw).toBe(202);
    expect(r.body).toEqual({ deleted: 5, message: 'success' });
    // Accepted means staged: nothing is gone before the apply.
    expect(await profileOf('ext-20')).toBeDefined();
    const applied = await applyStaged();
    expect(applied.commandRows).toBe(1);
    const after = await exportIds({
      external_ids: ['ext-20', 'ext-21', 'ext-22', 'ext-23', 'ext-24', 'ext-25'],
      fields_to_export: ['external_id'],
    });
    expect(after.body).toEqual({
      users: [{ external_id: 'ext-25' }],
      invalid_user_ids: ['ext-20', 'ext-21', 'ext-22', 'ext-23', 'ext-24'],
      message: 'success',
    });
    const tombstones = await env.ctx.pool.query(
      `SELECT external_id, service_id FROM profile_tombstones WHERE workspace_id = $1 ORDER BY external_id`,
      [env.ws.workspaceId],
    );
    expect(tombstones.rows).toEqual(
      ['20', '21', '22', '23', '24'].map((n) => ({ external_id: `ext-${n}`, service_id: `svc-${n}` })),
    );
    expect((await env.ctx.pool.query(`SELECT 1 FROM profile_aliases WHERE alias_name = 'crm-ext-21'`)).rowCount).toBe(
      0,
    );
    // The other workspace's ext-20... are untouched.
    expect(await profileOf('ext-2', env.other.workspaceId)).toBeDefined();
  });

  it('a /users/track accepted before the delete never brings the user back; one accepted after creates a new, empty profile', async () => {
    await track({
      events: [{ external_id: 'ext-26', name: 'before_delete', time: '2026-01-01T00:00:00Z' }],
      attributes: [{ external_id: 'ext-26', first_name: 'Old' }],
    });
    expect((await post('/users/delete', { external_ids: ['ext-26'] })).status).toBe(202);
    await track({ events: [{ external_id: 'ext-26', name: 'after_delete', time: '2026-01-02T00:00:00Z' }] });
    // A user named by another identifier, tracked before the delete and staged in another row: also not brought back.
    await track({ attributes: [{ user_alias: { alias_label: 'crm', alias_name: 'crm-ext-26' }, last_name: 'Alias' }] });
    expect(await stagedRows()).toBeGreaterThanOrEqual(3);
    await applyStaged();
    const p = await profileOf('ext-26');
    expect(p).toBeDefined();
    expect(p!.first_name).toBeNull();
    expect(p!.last_name).toBeNull();
    expect(entries(p!.custom_events as never)!.map((e) => e.name)).toEqual(['after_delete']);
    expect(p!.user_aliases).toEqual([]);
  });

  it("erases the copies: dead letters lose the user's objects, idempotency answers that name them go, live activity tokens go; an unsubscribe stays", async () => {
    const { rows } = await env.ctx.pool.query<{ id: number }>(
      `SELECT id FROM profiles WHERE workspace_id = $1 AND external_id = 'ext-27'`,
      [env.ws.workspaceId],
    );
    expect(rows).toHaveLength(1);
    const payload = {
      events: [
        {
          identity: { type: 'external_id', value: 'ext-27' },
          create: true,
          name: 'x',
          time: '2026-01-01T00:00:00.000Z',
        },
        {
          identity: { type: 'external_id', value: 'ext-28' },
          create: true,
          name: 'y',
          time: '2026-01-01T00:00:00.000Z',
        },
      ],
      purchases: [],
      attributes: [],
    };
    await env.ctx.pool.query(
      `INSERT INTO ingest_dead_letters (source, workspace_id, staged_id, part, accepted_at, objects, payload, error_code, error_message)
       VALUES ('track', $1, 1, 0, now(), 2, $2, '22P05', 'unsupported Unicode escape sequence near "user27@example.com"'),
              ('track', $1, 2, 0, now(), 1, $3, '22P05', 'x')`,
      [env.ws.workspaceId, JSON.stringify(payload), JSON.stringify({ ...payload, events: [payload.events[0]] })],
    );
    await env.ctx.pool.query(
      `INSERT INTO idempotency_keys (workspace_id, key, request_hash, status_code, response) VALUES ($1, 'k-27', '\\x00', 202, '{"message": "success", "external_ids": ["ext-27"]}'),
                                                                                                  ($1, 'k-other', '\\x00', 202, '{"message": "success", "external_ids": ["ext-28"]}')`,
      [env.ws.workspaceId],
    );
    const app = await env.ctx.pool.query<{ id: string }>(
      `INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'erase-app', 'A') RETURNING id`,
      [env.ws.workspaceId],
    );
    const activity = await env.ctx.pool.query<{ id: string }>(
      `INSERT INTO live_activities (app_id, activity_id, content_state_shape) VALUES ($1, 'act', '{}') RETURNING id`,
      [app.rows[0]!.id],
    );
    await env.ctx.pool.query(
      `INSERT INTO live_activity_tokens (live_activity_id, push_token, external_id) VALUES ($1, 'tok-27', 'ext-27'), ($1, 'tok-28', 'ext-28')`,
      [activity.rows[0]!.id],
    );
    await env.ctx.pool.query(
      `INSERT INTO email_subscriptions (workspace_id, email, state) VALUES ($1, 'user27@example.com', 'unsubscribed')`,
      [env.ws.workspaceId],
    );

    expect((await post('/users/delete', { external_ids: ['ext-27'] })).status).toBe(202);
    await applyStaged();

    const letters = await env.ctx.pool.query(
      `SELECT staged_id, objects, payload, error_message FROM ingest_dead_letters WHERE workspace_id = $1 ORDER BY staged_id`,
      [env.ws.workspaceId],
    );
    expect(letters.rows).toHaveLength(1);
    expect(letters.rows[0].objects).toBe(1);
    expect(
      JSON.parse(letters.rows[0].payload).events.map((e: { identity: { value: string } }) => e.identity.value),
    ).toEqual(['ext-28']);
    expect(letters.rows[0].error_message).not.toContain('user27');
    expect(
      (
        await env.ctx.pool.query(`SELECT key FROM idempotency_keys WHERE workspace_id = $1 ORDER BY key`, [
          env.ws.workspaceId,
        ])
      ).rows,
    ).toEqual([{ key: 'k-other' }]);
    expect((await env.ctx.pool.query(`SELECT push_token FROM live_activity_tokens`)).rows).toEqual([
      { push_token: 'tok-28' },
    ]);
    expect(
      (await env.ctx.pool.query(`SELECT state FROM email_subscriptions WHERE email = 'user27@example.com'`)).rows,
    ).toEqual([{ state: 'unsubscribed' }]);
  });

  it('an email shared by two users deletes neither without a prioritization that picks one', async () => {
    await env.ctx.pool.query(
      `UPDATE profiles SET email = 'shared@example.com' WHERE workspace_id = $1 AND external_id IN ('ext-30', 'ext-31')`,
      [env.ws.workspaceId],
    );
    await env.ctx.pool.query(
      `UPDATE profiles SET updated_at = now() + interval '1 minute' WHERE workspace_id = $1 AND external_id = 'ext-31'`,
      [env.ws.workspaceId],
    );
    expect((await post('/users/delete', { email_addresses: ['shared@example.com'] })).status).toBe(202);
    await applyStaged();
    expect(await profileOf('ext-30')).toBeDefined();
    expect(await profileOf('ext-31')).toBeDefined();
    expect(
      (
        await post('/users/delete', {
          email_addresses: [{ email: 'Shared@example.com', prioritization: ['identified', 'most_recently_updated'] }],
        })
      ).status,
    ).toBe(202);
    await applyStaged();
    expect(await profileOf('ext-30')).toBeDefined();
    expect(await profileOf('ext-31')).toBeUndefined();
  });
});

describe('POST /users/alias/new and /users/identify', () => {
  it('adds an alias to an identified user, creates an alias-only user, and changes nothing for an alias that exists', async () => {
    const r = await post('/users/alias/new', {
      user_aliases: [
        { external_id: 'ext-32', alias_name: 'a@example.com', alias_label: 'Enterprise' },
        { alias_name: 'b@example.com', alias_label: 'Enterprise' },
        { alias_name: 'crm-ext-33', alias_label: 'crm' },
        { external_id: 'nobody', alias_name: 'c@example.com', alias_label: 'Enterprise' },
      ],
    });
    expect(r.status, r.raw).toBe(201);
    expect(r.body).toEqual({ aliases_processed: 4, message: 'success' });
    await applyStaged();
    expect((await profileOf('ext-32'))!.user_aliases).toEqual(
      expect.arrayContaining([
        { alias_name: 'crm-ext-32', alias_label: 'crm' },
        { alias_name: 'a@example.com', alias_label: 'Enterprise' },
      ]),
    );
    expect((await profileOf('ext-32'))!.user_aliases).toHaveLength(2);
    const anonymous = await env.ctx.pool.query(
      `SELECT p.external_id, p.user_aliases FROM profile_aliases a JOIN profiles p ON p.id = a.profile_id WHERE a.alias_name = 'b@example.com'`,
    );
    expect(anonymous.rows).toEqual([
      { external_id: null, user_aliases: [{ alias_name: 'b@example.com', alias_label: 'Enterprise' }] },
    ]);
    expect(
      (await env.ctx.pool.query(`SELECT 1 FROM profile_aliases WHERE alias_name = 'c@example.com'`)).rowCount,
    ).toBe(0);
  });

  it('identify gives an alias-only user a new external_id, or merges it into the user that has it', async () => {
    await post('/users/alias/new', { user_aliases: [{ alias_name: 'merge-me', alias_label: 'Enterprise' }] });
    await applyStaged();
    await track({
      attributes: [
        { user_alias: { alias_label: 'Enterprise', alias_name: 'b@example.com' }, first_name: 'Bea' },
        {
          user_alias: { alias_label: 'Enterprise', alias_name: 'merge-me' },
          first_name: 'Merged',
          home_city: 'Lyon',
          custom_only_on_alias: 1,
        },
      ],
      events: [
        {
          user_alias: { alias_label: 'Enterprise', alias_name: 'merge-me' },
          name: 'recent_event',
          time: '2020-01-01T00:00:00Z',
        },
      ],
    });
    const r = await post('/users/identify', {
      aliases_to_identify: [
        { external_id: 'new-identified', user_alias: { alias_label: 'Enterprise', alias_name: 'b@example.com' } },
        // edX's client sends its numeric user ids as numbers.
        { external_id: 34, user_alias: { alias_label: 'Enterprise', alias_name: 'nobody' } },
        { external_id: 'ext-35', user_alias: { alias_label: 'Enterprise', alias_name: 'merge-me' } },
      ],
    });
    expect(r.status, r.raw).toBe(201);
    expect(r.body).toEqual({ aliases_processed: 3, message: 'success' });
    await applyStaged();
    const identified = await profileOf('new-identified');
    expect(identified).toMatchObject({
      first_name: 'Bea',
      user_aliases: [{ alias_name: 'b@example.com', alias_label: 'Enterprise' }],
    });
    const kept = await profileOf('ext-35');
    // The kept user's own values win; what it lacked comes from the merged one; counts add.
    expect(kept).toMatchObject({ first_name: 'Name\\35 "q"', home_city: 'Lyon', external_id: 'ext-35' });
    expect((kept!.custom_attributes as Record<string, unknown>).custom_only_on_alias).toBe(1);
    const events = entries(kept!.custom_events as never)!;
    expect(events.find((e) => e.name === 'recent_event')).toMatchObject({
      count: 4,
      first: '2020-01-01T00:00:00.000Z',
    });
    expect((kept!.user_aliases as Array<{ alias_label: string }>).map((a) => a.alias_label).sort()).toEqual([
      'Enterprise',
      'crm',
    ]);
    expect(
      (
        await env.ctx.pool.query(
          `SELECT 1 FROM profile_aliases a JOIN profiles p ON p.id = a.profile_id WHERE a.alias_name = 'merge-me' AND p.external_id = 'ext-35'`,
        )
      ).rowCount,
    ).toBe(1);
  });
});

describe('POST /users/merge', () => {
  it("merges by the public API's field rules and deletes the merged user", async () => {
    await env.ctx.pool.query(
      `UPDATE profiles SET first_name = NULL, devices = '[{"device_id": "keep-dev"}]', custom_attributes = '{"tier": "gold"}',
                           apps = '[{"name": "App", "platform": "ios", "sessions": 2, "first_used": "2024-01-01T00:00:00.000Z", "last_used": "2024-02-01T00:00:00.000Z"}]'
        WHERE workspace_id = $1 AND external_id = 'ext-36'`,
      [env.ws.workspaceId],
    );
    await env.ctx.pool.query(
      `UPDATE profiles SET first_name = 'FromMerged', devices = '[{"device_id": "merged-dev"}, {"device_id": "keep-dev", "model": "dup"}]', custom_attributes = '{"tier": "silver", "extra": true}',
                           apps = '[{"name": "App", "platform": "ios", "sessions": 3, "first_used": "2023-06-01T00:00:00.000Z", "last_used": "2024-03-01T00:00:00.000Z"}]',
                           total_revenue = 10
        WHERE workspace_id = $1 AND external_id = 'ext-37'`,
      [env.ws.workspaceId],
    );
    const before = await profileOf('ext-36');
    const r = await post('/users/merge', {
      merge_updates: [
        { identifier_to_merge: { external_id: 'ext-37' }, identifier_to_keep: { external_id: 'ext-36' } },
      ],
    });
    expect(r.status, r.raw).toBe(202);
    expect(r.body).toEqual({ message: 'success' });
    await applyStaged();
    expect(await profileOf('ext-37')).toBeUndefined();
    const kept = (await profileOf('ext-36'))!;
    expect(kept.first_name).toBe('FromMerged');
    expect(kept.email).toBe(before!.email);
    expect(kept.custom_attributes).toEqual({ tier: 'gold', extra: true });
    expect(kept.devices).toEqual([{ device_id: 'keep-dev' }, { device_id: 'merged-dev' }]);
    expect(kept.apps).toEqual([
      {
        name: 'App',
        platform: 'ios',
        sessions: 5,
        first_used: '2023-06-01T00:00:00.000Z',
        last_used: '2024-03-01T00:00:00.000Z',
      },
    ]);
    expect(kept.total_revenue).toBe(54 + 10);
    expect(entries(kept.custom_events as never)!.find((e) => e.name === 'old_event')!.count).toBe(14);
    const tomb = await env.ctx.pool.query(`SELECT 1 FROM profile_tombstones WHERE external_id = 'ext-37'`);
    expect(tomb.rowCount).toBe(1);
  });

  it("refuses bodies with the public API's own messages", async () => {
    const cases: Array<[unknown, string]> = [
      [{ merge_updates: 'x' }, "'merge_updates' must be an array of objects"],
      [{ merge_updates: ['x'] }, "'merge_updates' must be an array of objects"],
      [
        {
          merge_updates: Array.from({ length: 51 }, () => ({
            identifier_to_merge: { external_id: 'a' },
            identifier_to_keep: { external_id: 'b' },
          })),
        },
        'a single request may not contain more than 50 merge updates',
      ],
      [
        { merge_updates: [{ identifier_to_merge: { external_id: 1.5 }, identifier_to_keep: { external_id: 'b' } }] },
        "identifiers must be objects with an 'external_id' property that is a string, 'user_alias' property that is an object, 'email' property that is a string, or 'phone' property that is a string",
      ],
      [
        {
          merge_updates: [
            { identifier_to_merge: { external_id: 'a' }, identifier_to_keep: { external_id: 'b' }, extra: 1 },
          ],
        },
        "'merge_updates' must only have 'identifier_to_merge' and 'identifier_to_keep'",
      ],
    ];
    for (const [body, message] of cases) {
      const r = await post('/users/merge', body);
      expect(r.status, JSON.stringify(body).slice(0, 80)).toBe(400);
      expect(String(r.body.message)).toContain(message);
    }
    expect(await stagedRows()).toBe(0);
  });
});

describe('POST /users/external_ids/rename and /remove', () => {
  it('renames, keeps the old id resolving for track and export, refuses what the rules refuse, and removes deprecated ids only', async () => {
    const r = await post('/users/external_ids/rename', {
      external_id_renames: [
        { current_external_id: 'ext-38', new_external_id: 'ext-38-v2' },
        { current_external_id: 'ext-38-v2', new_external_id: 'ext-38-v3' },
        { current_external_id: 'ext-39', new_external_id: 'ext-40' },
        { current_external_id: 'nobody', new_external_id: 'someone' },
        { current_external_id: 'ext-1', new_external_id: 'ext-1' },
      ],
    });
    expect(r.status, r.raw).toBe(202);
    expect(r.body).toEqual({
      message: 'success',
      external_ids: ['ext-38', 'ext-38-v2'],
      rename_errors: [
        [2, 'new_external_id is already in use'],
        [3, 'current_external_id does not name a user'],
        [4, 'current_external_id and new_external_id must differ'],
      ],
    });
    await applyStaged();
    const p = (await profileOf('ext-38-v3'))!;
    expect(p.external_id).toBe('ext-38-v3');
    expect(p.deprecated).toEqual(['ext-38', 'ext-38-v2']);
    // The deprecated id still names the user: a track by it lands on the same profile, and the export finds it.
    await track({ events: [{ external_id: 'ext-38', name: 'by_old_id', time: '2026-01-01T00:00:00Z' }] });
    await applyStaged();
    expect(entries((await profileOf('ext-38-v3'))!.custom_events as never)!.some((e) => e.name === 'by_old_id')).toBe(
      true,
    );
    expect((await exportIds({ external_ids: ['ext-38'], fields_to_export: ['external_id'] })).body.users).toEqual([
      { external_id: 'ext-38-v3' },
    ]);
    // A deprecated id is in use: renaming onto it is refused; a deprecated id cannot be renamed.
    const again = await post('/users/external_ids/rename', {
      external_id_renames: [
        { current_external_id: 'ext-1', new_external_id: 'ext-38' },
        { current_external_id: 'ext-38', new_external_id: 'x' },
      ],
    });
    expect(again.body.rename_errors).toEqual([
      [0, 'new_external_id is already in use'],
      [1, 'current_external_id is a deprecated external ID; rename the user by its primary external ID'],
    ]);

    const removed = await post('/users/external_ids/remove', { external_ids: ['ext-38', 'ext-38-v3', 'nobody'] });
    expect(removed.status).toBe(202);
    expect(removed.body).toEqual({
      message: 'success',
      removed_ids: ['ext-38'],
      removal_errors: [
        [1, 'external_id is a primary external ID; only deprecated external IDs can be removed'],
        [2, 'external_id is not a deprecated external ID of any user'],
      ],
    });
    await applyStaged();
    expect((await profileOf('ext-38-v3'))!.deprecated).toEqual(['ext-38-v2']);
    expect(
      (await exportIds({ external_ids: ['ext-38'], fields_to_export: ['external_id'] })).body.invalid_user_ids,
    ).toEqual(['ext-38']);
  });
});

describe('GET /email/unsubscribes', () => {
  it('lists each unsubscribed address once, newest first or oldest first, paged, and by address', async () => {
    await env.ctx.pool.query(
      `INSERT INTO email_subscriptions (workspace_id, email, state, updated_at) VALUES
         ($1, 'addr-a@example.com', 'unsubscribed', '2026-03-01T00:00:00Z'), ($1, 'addr-b@example.com', 'subscribed', '2026-03-02T00:00:00Z'),
         ($1, 'user2@example.com', 'unsubscribed', '2026-03-03T00:00:00Z')`,
      [env.ws.workspaceId],
    );
    await env.ctx.pool.query(
      `UPDATE profiles SET email_subscribe = 'unsubscribed', attribute_times = attribute_times || jsonb_build_object('email_subscribe', CASE external_id WHEN 'ext-2' THEN '2026-03-05T00:00:00.000Z' ELSE '2026-03-04T00:00:00.000Z' END)
        WHERE workspace_id = $1 AND external_id IN ('ext-2', 'ext-3')`,
      [env.ws.workspaceId],
    );
    const get = async (query: string, key = env.ws.apiKey) => {
      const res = await env.app.inject({
        method: 'GET',
        url: `/email/unsubscribes?${query}`,
        headers: { ...bearer(key), 'content-type': 'application/json' },
      });
      return { status: res.statusCode, body: res.json() };
    };
    // edX's client: dates, limit 500, offset, sort_direction=desc.
    const all = await get('start_date=2026-01-01&end_date=2026-07-01&limit=500&offset=0&sort_direction=desc');
    expect(all.status).toBe(200);
    expect(all.body).toEqual({
      emails: [
        { email: 'user2@example.com', unsubscribed_at: '2026-03-05T00:00:00.000Z' },
        { email: 'user3@example.com', unsubscribed_at: '2026-03-04T00:00:00.000Z' },
        { email: 'addr-a@example.com', unsubscribed_at: '2026-03-01T00:00:00.000Z' },
      ],
      message: 'success',
    });
    expect(
      (await get('start_date=2026-01-01&end_date=2026-07-01&sort_direction=asc&limit=1&offset=1')).body.emails,
    ).toEqual([{ email: 'user3@example.com', unsubscribed_at: '2026-03-04T00:00:00.000Z' }]);
    expect((await get('end_date=2026-12-31&email=ADDR-A%40example.com')).body.emails).toEqual([
      { email: 'addr-a@example.com', unsubscribed_at: '2026-03-01T00:00:00.000Z' },
    ]);
    expect((await get('start_date=2026-03-04&end_date=2026-03-05')).body.emails).toEqual([
      { email: 'user3@example.com', unsubscribed_at: '2026-03-04T00:00:00.000Z' },
    ]);
    expect((await get('start_date=2026-01-01&end_date=2026-12-31', env.other.apiKey)).body.emails).toEqual([]);
    for (const bad of [
      'limit=501',
      'limit=0',
      'sort_direction=up',
      'start_date=2026-02-01&end_date=2026-01-01',
      'email=nope',
      'start_date=yesterday',
    ]) {
      expect((await get(bad)).status, bad).toBe(400);
    }
  });
});

describe('every user-data endpoint refuses what it must, and changes nothing', () => {
  const endpoints: Array<[string, string, unknown]> = [
    ['/users/export/ids', 'users.export.ids', { external_ids: ['ext-1'] }],
    ['/users/delete', 'users.delete', { external_ids: ['ext-1'] }],
    ['/users/alias/new', 'users.alias.new', { user_aliases: [{ alias_name: 'n', alias_label: 'l' }] }],
    [
      '/users/identify',
      'users.identify',
      { aliases_to_identify: [{ external_id: 'ext-1', user_alias: { alias_name: 'n', alias_label: 'l' } }] },
    ],
    [
      '/users/merge',
      'users.merge',
      {
        merge_updates: [
          { identifier_to_merge: { external_id: 'ext-1' }, identifier_to_keep: { external_id: 'ext-2' } },
        ],
      },
    ],
    [
      '/users/external_ids/rename',
      'users.external_ids.rename',
      { external_id_renames: [{ current_external_id: 'ext-1', new_external_id: 'ext-1-new' }] },
    ],
    ['/users/external_ids/remove', 'users.external_ids.remove', { external_ids: ['ext-1'] }],
  ];

  it('malformed JSON, wrong types, missing fields, over-limit arrays and strings, no credentials, no permission: 4xx, nothing staged', async () => {
    const before = await stagedRows();
    const profiles = (await env.ctx.pool.query(`SELECT md5(string_agg(p::text, '' ORDER BY id)) AS h FROM profiles p`))
      .rows[0].h;
    for (const [url, permission, good] of endpoints) {
      const field = Object.keys(good as object)[0]!;
      expect((await post(url, '{"oops": ')).status, url).toBe(400);
      expect((await post(url, '[]')).status, url).toBe(400);
      expect((await post(url, { [field]: 42 })).status, url).toBe(400);
      expect((await post(url, {})).status, url).toBe(400);
      expect(
        (await post(url, { [field]: Array.from({ length: 51 }, () => (good as Record<string, unknown[]>)[field]![0]) }))
          .status,
        url,
      ).toBe(400);
      const long = JSON.stringify(good).replace(/"(ext-1|n)"/, JSON.stringify('x'.repeat(600)));
      expect(long).toContain('x'.repeat(600));
      expect((await post(url, long)).status, url).toBe(400);
      const anonymous = await env.app.inject({
        method: 'POST',
        url,
        headers: { 'content-type': 'application/json' },
        payload: JSON.stringify(good),
      });
      expect(anonymous.statusCode, url).toBe(401);
      const bare = await post(url, good, env.ws.bareKey);
      expect(bare.status, url).toBe(401);
      expect(String(bare.body.message)).toContain(permission);
      // A key with just this permission gets in.
      const only = await createKey(env.ctx.pool, env.ws.workspaceId, `only-${permission}`, [permission]);
      expect((await post(url, { [field]: 42 }, only)).status, url).toBe(400);
    }
    expect(await stagedRows()).toBe(before);
    expect(
      (await env.ctx.pool.query(`SELECT md5(string_agg(p::text, '' ORDER BY id)) AS h FROM profiles p`)).rows[0].h,
    ).toBe(profiles);
  });

  it('an Idempotency-Key replays the first answer and stages the commands once', async () => {
    const before = await stagedRows();
    const first = await post('/users/delete', { external_ids: ['ext-39'] }, env.ws.apiKey, {
      'idempotency-key': 'delete-39',
    });
    const second = await post('/users/delete', { external_ids: ['ext-39'] }, env.ws.apiKey, {
      'idempotency-key': 'delete-39',
    });
    expect(first.status).toBe(202);
    expect(second.status).toBe(202);
    expect(second.body).toEqual(first.body);
    expect(await stagedRows()).toBe(before + 1);
    await applyStaged();
  });
});
