import { readdir } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { cdiSyncJob } from '../../jobs/cdi-sync.js';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { putLocal, syncOnce } from '../helpers/cdi.js';
import { useTestEnv } from '../helpers/context.js';
import {
  CONTROL_FILES,
  createSegment,
  readPartFile,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';
import { callApi, statusAndBody } from '../helpers/http.js';

/**
 * Subscription groups beyond their own endpoints: the `subscription_groups` of a /users/track attributes object
 * (validated with the object, applied with it, last write wins against the set endpoints), the export field
 * (segment exports and /users/export/ids), merges and erasure.
 */

const env = useTestEnv({ workspaces: ['ws'] });
const ws = () => env.ws.workspaceId;
const NEWS = '0b7e6c1a-2f3d-4c5b-8a9e-1f2a3b4c5d6e';
const SMS = '1c8f7d2b-3a4e-4d6c-9b0f-2a3b4c5d6e7f';
const UNDECLARED = '9f9f9f9f-0000-4000-8000-000000000000';

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO subscription_groups (id, workspace_id, name, channel) VALUES ($1, $3, 'Newsletter', 'email'), ($2, $3, 'SMS', 'sms')`,
    [NEWS, SMS, ws()],
  );
});

const post = (url: string, body: unknown) =>
  callApi(env.app, 'POST', url, { key: env.ws.apiKey, body }).then(statusAndBody);

const apply = () =>
  drainThrough(env.ctx.pool, undefined, {
    maxRows: 100,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });

async function statesOf(externalId: string): Promise<Record<string, string>> {
  const { rows } = await env.ctx.pool.query<{ group_id: string; state: string }>(
    `SELECT s.group_id, s.state FROM subscription_group_states s JOIN profiles p ON p.id = s.profile_id
      WHERE p.workspace_id = $1 AND p.external_id = $2 ORDER BY s.group_id`,
    [ws(), externalId],
  );
  return Object.fromEntries(rows.map((r) => [r.group_id, r.state]));
}

describe('/users/track attributes', () => {
  it("Braze's example creates the user and subscribes them in one call; the change is logged once, keyed by the object", async () => {
    const r = await post('/users/track', {
      attributes: [
        {
          external_id: 'user3',
          subscription_groups: [{ subscription_group_id: NEWS, subscription_state: 'subscribed' }],
        },
      ],
    });
    expect(r).toEqual({ status: 201, body: { attributes_processed: 1, message: 'success' } });
    const { rows: staged } = await env.ctx.pool.query<{ id: string }>('SELECT id FROM ingest_staging');
    await apply();
    expect(await statesOf('user3')).toEqual({ [NEWS]: 'subscribed' });
    const { rows } = await env.ctx.pool.query(
      `SELECT id, external_user_id, data FROM event_log WHERE type = 'users.behaviors.subscriptiongroup.StateChange'`,
    );
    const key = `track:${staged[0]!.id}:a0:g:${NEWS}`;
    const id = (await env.ctx.pool.query(`SELECT md5($1 || ':' || $2)::uuid AS id`, [ws(), key])).rows[0].id;
    expect(rows).toEqual([
      {
        id,
        external_user_id: 'user3',
        data: {
          subscription_group_id: NEWS,
          subscription_status: 'subscribed',
          channel: 'email',
          state_change_source: 'api',
          email_address: null,
          phone_number: null,
        },
      },
    ]);
  });

  it('refuses a malformed subscription_groups with its object alone (201 with errors), and changes nothing of it', async () => {
    const bad: unknown[] = [
      'subscribed',
      [{ subscription_group_id: NEWS, subscription_state: 'opted_in' }],
      [{ subscription_group_id: 'pto81fff-734f-80e5', subscription_state: 'subscribed' }],
      [{ subscription_group_id: NEWS }],
      [{ subscription_group_id: NEWS, subscription_state: 'subscribed', extra: 1 }],
      Array.from({ length: 51 }, () => ({ subscription_group_id: NEWS, subscription_state: 'subscribed' })),
    ];
    const r = await post('/users/track', {
      attributes: [
        ...bad.map((g) => ({ external_id: 'refused', first_name: 'X', subscription_groups: g })),
        {
          external_id: 'accepted',
          subscription_groups: [{ subscription_group_id: SMS, subscription_state: 'unsubscribed' }],
        },
      ],
    });
    expect(r.status).toBe(201);
    expect(r.body.attributes_processed).toBe(1);
    expect(r.body.errors.map((e: { index: number }) => e.index)).toEqual([0, 1, 2, 3, 4, 5]);
    expect(r.body.errors.map((e: { type: string }) => e.type)).toEqual([
      expect.stringMatching(/must be an array/),
      expect.stringMatching(/subscribed or unsubscribed/),
      expect.stringMatching(/UUID/),
      expect.stringMatching(/subscribed or unsubscribed/),
      expect.stringMatching(/extra/),
      expect.stringMatching(/at most 50/),
    ]);
    await apply();
    const { rows } = await env.ctx.pool.query(
      `SELECT 1 FROM profiles WHERE workspace_id = $1 AND external_id = 'refused'`,
      [ws()],
    );
    expect(rows).toEqual([]);
    expect(await statesOf('accepted')).toEqual({ [SMS]: 'unsubscribed' });
  });

  it('drops a group the workspace does not declare and applies the others of the object', async () => {
    await post('/users/track', {
      attributes: [
        {
          external_id: 'mixed',
          subscription_groups: [
            { subscription_group_id: UNDECLARED, subscription_state: 'subscribed' },
            { subscription_group_id: SMS.toUpperCase(), subscription_state: 'subscribed' },
          ],
        },
      ],
    });
    await apply();
    expect(await statesOf('mixed')).toEqual({ [SMS]: 'subscribed' });
  });

  it('last write wins: an object accepted before a set call but applied after it does not undo the call', async () => {
    await post('/users/track', {
      attributes: [
        {
          external_id: 'racer',
          subscription_groups: [{ subscription_group_id: NEWS, subscription_state: 'subscribed' }],
        },
      ],
    });
    await apply();
    await post('/users/track', {
      attributes: [
        {
          external_id: 'racer',
          subscription_groups: [{ subscription_group_id: NEWS, subscription_state: 'subscribed' }],
        },
      ],
    });
    // Accepted (staged), not applied yet; then the call, later, unsubscribes.
    const set = await post('/subscription/status/set', {
      subscription_group_id: NEWS,
      subscription_state: 'unsubscribed',
      external_id: ['racer'],
    });
    expect(set.status).toBe(201);
    await apply();
    expect(await statesOf('racer')).toEqual({ [NEWS]: 'unsubscribed' });
  });
});

describe('export field', () => {
  it('/users/export/ids: the state per group in the shape an attributes object sets; absent when none', async () => {
    const r = await post('/users/export/ids', {
      external_ids: ['user3', 'mixed', 'refused-never-created'],
      fields_to_export: ['external_id', 'subscription_groups'],
    });
    expect(r.status).toBe(201);
    expect(r.body.users).toEqual([
      {
        external_id: 'user3',
        subscription_groups: [{ subscription_group_id: NEWS, subscription_state: 'subscribed' }],
      },
      { external_id: 'mixed', subscription_groups: [{ subscription_group_id: SMS, subscription_state: 'subscribed' }] },
    ]);
    const none = await post('/users/track', { attributes: [{ external_id: 'plain', first_name: 'P' }] });
    expect(none.status).toBe(201);
    await apply();
    const plain = await post('/users/export/ids', {
      external_ids: ['plain'],
      fields_to_export: ['external_id', 'subscription_groups'],
    });
    expect(plain.body.users).toEqual([{ external_id: 'plain' }]);
  });

  it('a segment export carries the field for every member', async () => {
    await createSegment(env.ctx.pool, ws(), 'everyone', { attribute: 'external_id', op: 'exists' });
    const res = await requestExport(env, env.ws.apiKey, {
      segment_id: 'everyone',
      fields_to_export: ['external_id', 'subscription_groups'],
      output_format: 'gzip',
    });
    expect(res.status, JSON.stringify(res.body)).toBe(201);
    env.startWorkers([segmentExportJob, exportShardJob, exportCallbackJob]);
    const done = await waitForExport(env, env.ws.apiKey, String(res.body.object_prefix));
    expect(done.status).toBe('ready');
    const dir = path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), String(done.key_prefix));
    const users: { external_id: string; subscription_groups?: unknown }[] = [];
    for (const f of (await readdir(dir)).filter((n) => !CONTROL_FILES.includes(n)))
      for (const l of await readPartFile(path.join(dir, f))) users.push(JSON.parse(l));
    const byId = Object.fromEntries(users.map((u) => [u.external_id, u.subscription_groups ?? null]));
    expect(byId).toEqual({
      user3: [{ subscription_group_id: NEWS, subscription_state: 'subscribed' }],
      accepted: [{ subscription_group_id: SMS, subscription_state: 'unsubscribed' }],
      mixed: [{ subscription_group_id: SMS, subscription_state: 'subscribed' }],
      racer: [{ subscription_group_id: NEWS, subscription_state: 'unsubscribed' }],
      plain: null,
    });
  });
});

describe('merge and erasure', () => {
  it("a merge hands the merged user's states to the kept user where it has none; a deletion takes the states", async () => {
    // racer: NEWS unsubscribed; accepted: SMS unsubscribed. Merge racer into accepted.
    const r = await post('/users/merge', {
      merge_updates: [
        { identifier_to_merge: { external_id: 'racer' }, identifier_to_keep: { external_id: 'accepted' } },
      ],
    });
    expect(r.status).toBe(202);
    await apply();
    expect(await statesOf('accepted')).toEqual({ [NEWS]: 'unsubscribed', [SMS]: 'unsubscribed' });

    expect((await post('/users/delete', { external_ids: ['accepted'] })).status).toBe(202);
    await apply();
    const { rows } = await env.ctx.pool.query(
      `SELECT count(*)::int AS n FROM subscription_group_states s WHERE NOT EXISTS (SELECT 1 FROM profiles p WHERE p.id = s.profile_id)`,
    );
    expect(rows[0].n).toBe(0);
    expect(await statesOf('accepted')).toEqual({});
    const left = await env.ctx.pool.query(
      `SELECT count(*)::int AS n FROM subscription_group_states WHERE workspace_id = $1`,
      [ws()],
    );
    expect(left.rows[0].n).toBe(2);
  });
});

describe('Cloud Data Ingestion', () => {
  it("a row's payload sets the user's states as an attributes object does; the change is logged as from cdi", async () => {
    const integration = '7c2e9f40-1a3b-4c5d-8e6f-0a1b2c3d4e5f';
    await env.ctx.pool.query(
      `INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'rows', $3)`,
      [integration, ws(), JSON.stringify({ type: 'bucket', prefix: 'cdi/rows/', format: 'ndjson' })],
    );
    env.startWorkers([cdiSyncJob]);
    const payload = {
      subscription_groups: [
        { subscription_group_id: NEWS, subscription_state: 'unsubscribed' },
        { subscription_group_id: SMS, subscription_state: 'subscribed' },
      ],
    };
    await putLocal(env, env.ws, 'cdi/rows/a.ndjson', JSON.stringify({ external_id: 'from-cdi', payload }));
    expect(await syncOnce(env, env.ws, integration)).toMatchObject({ job_status: 'success', rows_synced: 1 });
    expect(await statesOf('from-cdi')).toEqual({ [NEWS]: 'unsubscribed', [SMS]: 'subscribed' });
    const { rows } = await env.ctx.pool.query(
      `SELECT DISTINCT data->>'state_change_source' AS source FROM event_log
        WHERE type = 'users.behaviors.subscriptiongroup.StateChange' AND external_user_id = 'from-cdi'`,
    );
    expect(rows).toEqual([{ source: 'cdi' }]);
  });
});
