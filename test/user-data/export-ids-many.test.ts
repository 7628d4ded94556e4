import { beforeAll, describe, expect, it } from 'vitest';
import { candidatesSql } from '../../src/profiles/lookup.js';
import { useTestEnv } from '../helpers/context.js';
import { insertProfiles } from '../helpers/export-fixtures.js';
import { callApi } from '../helpers/http.js';

/**
 * /users/export/ids by an identifier many profiles share (a device id, an email address, a phone number): the answer
 * holds at most 50 of them, the most recently updated first, and says which identifier it cut short; and a device id
 * is found through an index, not by reading the workspace's profiles.
 */

const env = useTestEnv({ workspaces: ['ws'] });
const SHARED = 60;

beforeAll(async () => {
  const pool = env.ctx.pool;
  await insertProfiles(pool, env.ws.workspaceId, 1, 100);
  // ext-1..ext-60 share a device, an address and a number; ext-61..ext-110 (50 of them) share another device.
  await insertProfiles(pool, env.ws.workspaceId, 101, 10);
  await pool.query(
    `UPDATE profiles SET
        devices = jsonb_build_array(jsonb_build_object('device_id', 'own-' || external_id),
                                    jsonb_build_object('device_id', CASE WHEN n <= $2 THEN 'shared-dev' ELSE 'fifty-dev' END, 'model', 'x')),
        email = CASE WHEN n <= $2 THEN 'Family@Example.com' ELSE email END,
        phone = CASE WHEN n <= $2 THEN '+15550001111' ELSE NULL END,
        -- ext-1 is the most recently updated, ext-60 the least.
        updated_at = timestamptz '2026-01-01T00:00:00Z' - n * interval '1 minute'
       FROM (SELECT id AS pid, substring(external_id FROM 5)::int AS n FROM profiles WHERE workspace_id = $1) o
      WHERE id = o.pid`,
    [env.ws.workspaceId, SHARED],
  );
  await pool.query('ANALYZE profiles');
});

const exportIds = (body: unknown) =>
  callApi(env.app, 'POST', '/users/export/ids', { key: env.ws.apiKey, body: { ...(body as object) } });

const newestFirst = (count: number, from = 1) => Array.from({ length: count }, (_, i) => `ext-${from + i}`);

describe('POST /users/export/ids: an identifier many users share', () => {
  for (const [name, body] of [
    ['device_id', { device_id: 'shared-dev' }],
    ['email_address', { email_address: 'family@example.com' }],
    ['phone', { phone: '+15550001111' }],
  ] as const) {
    it(`${name}: the 50 most recently updated of the ${SHARED}, and the identifier named in truncated_user_ids`, async () => {
      const r = await exportIds({ ...body, fields_to_export: ['external_id'] });
      expect(r.status, JSON.stringify(r.body)).toBe(201);
      expect(r.body).toEqual({
        users: newestFirst(50).map((external_id) => ({ external_id })),
        truncated_user_ids: [Object.values(body)[0]],
        message: 'success',
      });
    });
  }

  it('exactly 50 users: all of them, nothing said', async () => {
    const r = await exportIds({ device_id: 'fifty-dev', fields_to_export: ['external_id'] });
    expect(r.body).toEqual({ users: newestFirst(50, 61).map((external_id) => ({ external_id })), message: 'success' });
  });

  it('beside external ids, the cut applies to the shared identifier alone', async () => {
    const r = await exportIds({
      external_ids: ['ext-105', 'nobody'],
      device_id: 'shared-dev',
      fields_to_export: ['external_id'],
    });
    expect(r.body).toEqual({
      users: [{ external_id: 'ext-105' }, ...newestFirst(50).map((external_id) => ({ external_id }))],
      invalid_user_ids: ['nobody'],
      truncated_user_ids: ['shared-dev'],
      message: 'success',
    });
  });

  it('a device id of one user still finds it', async () => {
    const r = await exportIds({ device_id: 'own-ext-7', fields_to_export: ['external_id'] });
    expect(r.body).toEqual({ users: [{ external_id: 'ext-7' }], message: 'success' });
  });
});

describe('the device id lookup', () => {
  it('can be served by an index of the device ids (never a read of the workspace)', async () => {
    const client = await env.ctx.pool.connect();
    try {
      // With sequential scans priced out, a plan without an index on the expression still reads the table.
      await client.query('SET enable_seqscan = off');
      const { rows } = await client.query<{ 'QUERY PLAN': string }>(
        `EXPLAIN ${candidatesSql('device_id', { limit: true })}`,
        [env.ws.workspaceId, ['shared-dev'], 51],
      );
      const plan = rows.map((r) => r['QUERY PLAN']).join('\n');
      expect(plan).toContain('profiles_device_ids');
      expect(plan).not.toMatch(/Seq Scan on profiles/);
    } finally {
      client.release();
    }
  });
});
