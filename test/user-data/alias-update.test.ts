import { beforeAll, describe, expect, it } from 'vitest';
import type { z } from 'zod';
import type { AliasUpdateResponse } from '../../src/routes/users-alias.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';
import { entries } from '../helpers/aggregates.js';

const env = useTestEnv({ workspaces: ['ws', 'other'] });
const ids: Record<string, number> = {};

type AliasError = NonNullable<z.infer<typeof AliasUpdateResponse>['errors']>[number];

async function addProfile(workspaceId: string, externalId: string, aliases: [string, string][]) {
  const { rows } = await env.ctx.pool.query<{ id: number }>(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, user_aliases)
     VALUES ($1, $2, $3, 1, $4) RETURNING id`,
    [
      workspaceId,
      `sid-${externalId}`,
      externalId,
      JSON.stringify(aliases.map(([l, n]) => ({ alias_name: n, alias_label: l }))),
    ],
  );
  const id = rows[0]!.id;
  for (const [label, name] of aliases) {
    await env.ctx.pool.query(
      `INSERT INTO profile_aliases (workspace_id, alias_label, alias_name, profile_id) VALUES ($1, $2, $3, $4)`,
      [workspaceId, label, name, id],
    );
  }
  return id;
}

beforeAll(async () => {
  ids.ann = await addProfile(env.ws.workspaceId, 'ann', [
    ['crm', 'ann-1'],
    ['shop', 's-ann'],
  ]);
  ids.bob = await addProfile(env.ws.workspaceId, 'bob', [['crm', 'bob-1']]);
  ids.foreign = await addProfile(env.other.workspaceId, 'foreign', [['crm', 'f-1']]);
});

async function update(body: unknown, key = env.ws.apiKey) {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/alias/update',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json() };
}

async function aliasesOf(id: number) {
  const p = (await env.ctx.pool.query('SELECT user_aliases FROM profiles WHERE id = $1', [id])).rows[0].user_aliases;
  const table = (
    await env.ctx.pool.query(
      'SELECT alias_label, alias_name FROM profile_aliases WHERE profile_id = $1 ORDER BY 1, 2',
      [id],
    )
  ).rows;
  return { profile: p, table };
}

async function snapshot() {
  return (
    await env.ctx.pool.query(
      'SELECT workspace_id, alias_label, alias_name, profile_id FROM profile_aliases ORDER BY 1, 2, 3',
    )
  ).rows;
}

describe('POST /users/alias/update', () => {
  it('renames an existing alias in the lookup table and on the profile', async () => {
    const r = await update({
      alias_updates: [{ alias_label: 'crm', old_alias_name: 'ann-1', new_alias_name: 'ann-2' }],
    });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({ message: 'success', aliases_processed: 1 });
    const a = await aliasesOf(ids.ann!);
    expect(a.table).toEqual([
      { alias_label: 'crm', alias_name: 'ann-2' },
      { alias_label: 'shop', alias_name: 's-ann' },
    ]);
    expect(a.profile).toEqual([
      { alias_name: 'ann-2', alias_label: 'crm' },
      { alias_name: 's-ann', alias_label: 'shop' },
    ]);
  });

  it('does nothing for an alias that does not exist (still processed), nor in another workspace', async () => {
    const before = await snapshot();
    const r = await update({
      alias_updates: [
        { alias_label: 'crm', old_alias_name: 'nobody', new_alias_name: 'x' },
        { alias_label: 'crm', old_alias_name: 'f-1', new_alias_name: 'stolen' },
      ],
    });
    expect(r.body).toEqual({ message: 'success', aliases_processed: 2 });
    expect(await snapshot()).toEqual(before);
  });

  it('refuses, for that object only, a rename onto an alias another user holds', async () => {
    const r = await update({
      alias_updates: [
        { alias_label: 'crm', old_alias_name: 'bob-1', new_alias_name: 'ann-2' },
        { alias_label: 'shop', old_alias_name: 's-ann', new_alias_name: 's-ann-2' },
      ],
    });
    expect(r.status).toBe(201);
    expect(r.body).toEqual({
      message: 'success',
      aliases_processed: 1,
      errors: [
        {
          type: "alias 'ann-2' with label 'crm' already belongs to another user",
          input_array: 'alias_updates',
          index: 0,
        },
      ],
    });
    expect((await aliasesOf(ids.bob!)).table).toEqual([{ alias_label: 'crm', alias_name: 'bob-1' }]);
    expect((await aliasesOf(ids.ann!)).profile).toEqual([
      { alias_name: 'ann-2', alias_label: 'crm' },
      { alias_name: 's-ann-2', alias_label: 'shop' },
    ]);
  });

  it('applies entries in order: chains resolve, and a name freed earlier may be taken', async () => {
    const r = await update({
      alias_updates: [
        { alias_label: 'crm', old_alias_name: 'ann-2', new_alias_name: 'ann-3' },
        { alias_label: 'crm', old_alias_name: 'bob-1', new_alias_name: 'ann-2' },
        { alias_label: 'crm', old_alias_name: 'ann-3', new_alias_name: 'ann-4' },
      ],
    });
    expect(r.body).toEqual({ message: 'success', aliases_processed: 3 });
    expect((await aliasesOf(ids.ann!)).table).toEqual([
      { alias_label: 'crm', alias_name: 'ann-4' },
      { alias_label: 'shop', alias_name: 's-ann-2' },
    ]);
    expect((await aliasesOf(ids.bob!)).profile).toEqual([{ alias_name: 'ann-2', alias_label: 'crm' }]);
  });

  it('lists invalid entries by index and applies the valid ones', async () => {
    const r = await update({
      alias_updates: [
        { alias_label: 'crm', old_alias_name: 'ann-4' },
        'not an object',
        { alias_label: 'crm', old_alias_name: 'ann-4', new_alias_name: 'ann-5', extra: 1 },
        { alias_label: 'crm', old_alias_name: 'ann-4', new_alias_name: 'ann-5' },
      ],
    });
    expect(r.status).toBe(201);
    expect(r.body.aliases_processed).toBe(1);
    expect(r.body.errors.map((e: AliasError) => e.index)).toEqual([0, 1, 2]);
    expect(r.body.errors[0].type).toMatch(/'new_alias_name' is required/);
    expect(r.body.errors[2].type).toMatch(/'extra' is not a field/);
  });

  it('refuses bad requests as a whole and changes nothing', async () => {
    const before = await snapshot();
    const entry = { alias_label: 'crm', old_alias_name: 'ann-5', new_alias_name: 'zzz' };
    const cases: [unknown, RegExp][] = [
      [{}, /alias_updates is required/],
      [{ alias_updates: [] }, /at least one/],
      [{ alias_updates: 'x' }, /alias_updates/],
      [{ alias_updates: Array.from({ length: 51 }, () => entry) }, /at most 50/],
      [{ alias_updates: [{ alias_label: 'crm' }] }, /No valid alias update/],
      [{ alias_updates: [{ ...entry, new_alias_name: '' }] }, /must not be empty/],
      [{ alias_updates: [{ ...entry, new_alias_name: 'n'.repeat(513) }] }, /at most 512/],
      ['{"alias_updates": [', /Malformed JSON/],
    ];
    for (const [body, message] of cases) {
      const r = await update(body);
      expect(r.status, JSON.stringify(body).slice(0, 60)).toBe(400);
      expect(r.body.message).toMatch(message);
    }
    expect((await update({ alias_updates: [entry] }, env.ws.bareKey)).status).toBe(401);
    expect((await update({ alias_updates: [entry] }, 'nope')).status).toBe(401);
    expect(await snapshot()).toEqual(before);
    // 50 entries are accepted.
    const fifty = await update({
      alias_updates: Array.from({ length: 50 }, (_, i) => ({
        alias_label: 'none',
        old_alias_name: `n${i}`,
        new_alias_name: `m${i}`,
      })),
    });
    expect(fifty.body).toEqual({ message: 'success', aliases_processed: 50 });
  });

  it('renamed aliases identify users for ingestion', async () => {
    const r = await env.app.inject({
      method: 'POST',
      url: '/users/track',
      headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
      payload: {
        events: [{ user_alias: { alias_label: 'crm', alias_name: 'ann-5' }, name: 'after-rename', time: '2024-01-01' }],
      },
    });
    expect(r.statusCode).toBe(201);
    const { drainThrough } = await import('../../src/pipelines/ingest/apply/drain-staging.js');
    await drainThrough(env.ctx.pool, undefined, { maxRows: 10, log: env.ctx.log, metrics: env.ctx.metrics });
    const p = (await env.ctx.pool.query('SELECT custom_events FROM profiles WHERE id = $1', [ids.ann])).rows[0];
    expect(entries(p.custom_events)).toEqual([
      { name: 'after-rename', first: '2024-01-01T00:00:00.000Z', last: '2024-01-01T00:00:00.000Z', count: 1 },
    ]);
  });
});
