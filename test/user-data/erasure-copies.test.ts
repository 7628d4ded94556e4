import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import type { PoolClient } from '../../src/platform/db/pool.js';
import { insertDeadLetters } from '../../src/pipelines/ingest/apply/dead-letters.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

/**
 * Copies of a person outside their profile that POST /users/delete erases (docs/privacy.md), each against what a
 * data team would look at: the rows left in the table, and what the endpoints that read them answer.
 */

const env = useTestEnv({ workspaces: ['ws'] });

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await env.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, `${url}: ${res.body}`).toBeLessThan(300);
  return res.json() as Record<string, unknown>;
}

async function applyStaged() {
  await drainThrough(env.ctx.pool, undefined, {
    maxRows: 100,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });
}

async function track(body: unknown) {
  await post('/users/track', body);
  await applyStaged();
}

async function erase(body: unknown) {
  await post('/users/delete', body);
  await applyStaged();
}

const q = async <T extends object>(sql: string, params: unknown[] = []) =>
  (await env.ctx.pool.query<T & Record<string, unknown>>(sql, params)).rows;

beforeAll(async () => {
  await env.ctx.pool.query(
    `INSERT INTO canvases (workspace_id, api_id, name, status, api_triggered) VALUES ($1, 'welcome', 'Welcome', 'active', true)`,
    [env.ws.workspaceId],
  );
});

describe('scheduled canvas sends (canvas_schedules.recipients)', () => {
  it("lose the person's recipient entries; a schedule left with none is cancelled", async () => {
    const t = randomUUID().slice(0, 6);
    const [p, m, n] = ['p', 'm', 'n'].map((x) => `${x}-sched-${t}`) as [string, string, string];
    await track({ attributes: [p, m, n].map((id) => ({ external_id: id })) });
    await post('/users/alias/new', { user_aliases: [{ external_id: p, alias_name: `crm-${t}`, alias_label: 'crm' }] });
    await applyStaged();
    const time = new Date(Date.now() + 3_600_000).toISOString();
    const schedule = async (recipients: unknown[]) =>
      String(
        (await post('/canvas/trigger/schedule/create', { canvas_id: 'welcome', recipients, schedule: { time } }))
          .schedule_id,
      );
    const shared = await schedule([
      { external_user_id: p, trigger_properties: { coupon: `p-${t}`, email: `${p}@example.com` } },
      { external_user_id: m, canvas_entry_properties: { note: `m-${t}` } },
      { external_user_id: n, trigger_properties: { coupon: `n-${t}` } },
    ]);
    const theirs = await schedule([
      { user_alias: { alias_name: `crm-${t}`, alias_label: 'crm' }, canvas_entry_properties: { seat: '12A' } },
      { external_user_id: p },
    ]);
    // m is merged into p: m's entry names the person too.
    await post('/users/merge', {
      merge_updates: [{ identifier_to_merge: { external_id: m }, identifier_to_keep: { external_id: p } }],
    });
    await applyStaged();

    await erase({ external_ids: [p] });
    const rows = await q<{ schedule_id: string; state: string; recipients: unknown }>(
      `SELECT schedule_id, state, recipients FROM canvas_schedules WHERE schedule_id = ANY($1) ORDER BY schedule_id = $2`,
      [[shared, theirs], shared],
    );
    expect(rows).toEqual([
      { schedule_id: theirs, state: 'cancelled', recipients: [] },
      {
        schedule_id: shared,
        state: 'scheduled',
        recipients: [{ external_user_id: n, trigger_properties: { coupon: `n-${t}` } }],
      },
    ]);
    expect(JSON.stringify(await q(`SELECT * FROM canvas_schedules`))).not.toMatch(
      new RegExp(`[pm]-sched-${t}|crm-${t}|12A`),
    );
  });
});

async function unsubscribes(email: string) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/email/unsubscribes?email=${encodeURIComponent(email)}`,
    headers: bearer(env.ws.apiKey),
  });
  expect(res.statusCode, res.body).toBe(200);
  return (res.json() as { emails: Array<{ email: string; unsubscribed_at: string }> }).emails;
}

describe('an unsubscribe set through attributes (email_subscribe on the profile)', () => {
  it('outlives the deletion as the address suppression: still listed, and a new user with the address is unsubscribed', async () => {
    const t = randomUUID().slice(0, 6);
    const email = `Quiet.${t}@Example.com`;
    const at = '2026-03-01T10:00:00.000Z';
    await track({
      attributes: [{ external_id: `quiet-${t}`, email, email_subscribe: 'unsubscribed', first_name: 'Q' }],
    });
    await env.ctx.pool.query(
      `UPDATE profiles SET attribute_times = attribute_times || jsonb_build_object('email_subscribe', $2::text) WHERE external_id = $1`,
      [`quiet-${t}`, at],
    );
    const listed = [{ email: email.toLowerCase(), unsubscribed_at: at }];
    expect(await unsubscribes(email)).toEqual(listed);

    await erase({ external_ids: [`quiet-${t}`] });
    expect(await q(`SELECT 1 FROM profiles WHERE external_id = $1`, [`quiet-${t}`])).toEqual([]);
    expect(await unsubscribes(email)).toEqual(listed);
    // The address comes back with a new sign-up: it is not mailable.
    await track({ attributes: [{ external_id: `again-${t}`, email }] });
    expect(await q(`SELECT email_subscribe FROM profiles WHERE external_id = $1`, [`again-${t}`])).toEqual([
      { email_subscribe: 'unsubscribed' },
    ]);
  });

  it('outlives a merge that drops the address (the kept user has its own)', async () => {
    const t = randomUUID().slice(0, 6);
    const [a, b] = [`qa-${t}`, `qb-${t}`];
    await track({
      attributes: [
        { external_id: a, email: `${a}@example.com`, email_subscribe: 'unsubscribed' },
        { external_id: b, email: `${b}@example.com`, email_subscribe: 'opted_in' },
      ],
    });
    const before = await unsubscribes(`${a}@example.com`);
    expect(before).toHaveLength(1);
    await post('/users/merge', {
      merge_updates: [{ identifier_to_merge: { external_id: a }, identifier_to_keep: { external_id: b } }],
    });
    await applyStaged();
    expect(await q(`SELECT email FROM profiles WHERE external_id = $1`, [b])).toEqual([{ email: `${b}@example.com` }]);
    expect(await unsubscribes(`${a}@example.com`)).toEqual(before);
  });
});

describe('rows a CDI run refused (cdi_sync_rejects)', () => {
  it("go when they name the person in an identifier column; other users' rows stay", async () => {
    const t = randomUUID().slice(0, 6);
    const person = `cdi-${t}`;
    await track({ attributes: [{ external_id: person, email: `${person}@example.com`, phone: '+15550002222' }] });
    await post('/users/alias/new', {
      user_aliases: [{ external_id: person, alias_name: `wh-${t}`, alias_label: 'dw' }],
    });
    await applyStaged();
    const integration = randomUUID();
    await env.ctx.pool.query(
      `INSERT INTO cdi_integrations (id, workspace_id, name, source) VALUES ($1, $2, 'users', '{"type": "bucket", "prefix": "cdi/"}')`,
      [integration, env.ws.workspaceId],
    );
    const job = (
      await q<{ id: string }>(
        `INSERT INTO cdi_sync_jobs (integration_id, workspace_id, trigger) VALUES ($1, $2, 'api') RETURNING id`,
        [integration, env.ws.workspaceId],
      )
    )[0]!.id;
    // Lines as a run records them (src/pipelines/cdi/batch-apply.ts): why, where, and the source row verbatim.
    const line = (row: Record<string, unknown>) =>
      JSON.stringify({ reason: 'PAYLOAD is not a JSON object', key: 'cdi/users.csv', line: 2, row });
    const theirs = [
      { external_id: person, payload: 'x' },
      { email: `CDI-${t}@Example.com`, payload: 'x' },
      { alias_name: `wh-${t}`, alias_label: 'dw', payload: '{"first_name": "P"}' },
      { phone: '+15550002222', payload: 'x' },
      { external_id: person, email: 'other@example.com', payload: '{}' },
    ];
    const others = [
      { external_id: `${person}0`, payload: 'x' },
      { external_id: `x${person}`, payload: 'x' },
      { alias_name: `wh-${t}`, alias_label: 'other', payload: 'x' },
      { email: `${person}@example.org`, payload: 'x' },
    ];
    await env.ctx.pool.query(`INSERT INTO cdi_sync_rejects (job_id, line) SELECT $1, unnest($2::text[])`, [
      job,
      [...theirs, ...others].map(line),
    ]);

    await erase({ external_ids: [person] });
    const left = await q<{ line: string }>(`SELECT line FROM cdi_sync_rejects WHERE job_id = $1 ORDER BY seq`, [job]);
    expect(left.map((r) => (JSON.parse(r.line) as { row: unknown }).row)).toEqual(others);
  });
});

describe('dead letters (ingest_dead_letters)', () => {
  /** Inserts a dead letter as the apply writes one; returns its id. */
  async function letter(payload: unknown, message: string, objects = 1): Promise<number> {
    const text = typeof payload === 'string' ? payload : JSON.stringify(payload);
    const { rows } = await env.ctx.pool.query<{ id: number }>(
      `INSERT INTO ingest_dead_letters (source, workspace_id, staged_id, part, accepted_at, objects, payload, error_code, error_message)
       VALUES ('track', $1, 1, $2, now(), $3, $4, '22P05', $5) RETURNING id`,
      [env.ws.workspaceId, text.includes('"commands"') ? -1 : 0, objects, text, message],
    );
    return rows[0]!.id;
  }
  const event = (externalId: string) => ({
    identity: { type: 'external_id', value: externalId },
    create: true,
    name: 'x',
    time: '2026-01-01T00:00:00.000Z',
  });
  const objects = (...events: unknown[]) => ({ events, purchases: [], attributes: [] });

  it("compare parsed references exactly: erasing '42' leaves another user's letters naming '1042' whole", async () => {
    const t = randomUUID().slice(0, 6);
    const [person, other] = [`42-${t}`, `1042-${t}`];
    await track({ attributes: [{ external_id: person }, { external_id: other }] });
    const ref = (value: string) => ({ kind: 'external_id', value });
    const kept = [
      // A command row of the other user's (a failed delete), a rename to a longer id, an alias whose name holds it.
      await letter({ commands: [{ kind: 'delete', target: ref(other) }] }, 'x'),
      await letter({ commands: [{ kind: 'rename', renames: [{ current: other, next: `${other}-v2` }] }] }, 'x'),
      await letter(
        { commands: [{ kind: 'alias_new', label: 'crm', name: `${person}0` }] },
        `duplicate key value (crm, ${person}0)`,
      ),
      // The other user's object, with a message that quotes their id.
      await letter(objects(event(other)), `invalid input near "${other}"`),
      // Not JSON: only the value as a whole JSON string would name the person.
      await letter(`{"events": [{"identity": {"type": "external_id", "value": "${other}"}`, 'not JSON'),
    ];
    const theirs = [
      await letter({ commands: [{ kind: 'delete', target: ref(person) }] }, 'x'),
      await letter(`{"events": [{"identity": {"type": "external_id", "value": "${person}"}`, 'not JSON'),
    ];
    const mixed = await letter(
      {
        commands: [
          { kind: 'merge', merge: ref(person), keep: ref(other) },
          { kind: 'remove', externalIds: [`${other}-old`] },
        ],
      },
      `near ${person}`,
      2,
    );
    const snapshot = async (ids: number[]) =>
      q<{ id: number; payload: string; error_message: string; objects: number }>(
        `SELECT id, payload, error_message, objects FROM ingest_dead_letters WHERE id = ANY($1) ORDER BY id`,
        [ids],
      );
    const before = await snapshot(kept);

    await erase({ external_ids: [person] });
    expect(await snapshot(kept)).toEqual(before);
    expect(await snapshot(theirs)).toEqual([]);
    // A row of several commands loses theirs only, and a message that quotes them.
    const [left] = await snapshot([mixed]);
    expect(JSON.parse(left!.payload)).toEqual({ commands: [{ kind: 'remove', externalIds: [`${other}-old`] }] });
    expect(left!.objects).toBe(1);
    expect(left!.error_message).not.toContain(person);
  });

  it('are found by index once named: a letter the writer made is named, one found unnamed is named by the erasure, an edited one is unnamed again', async () => {
    const t = randomUUID().slice(0, 6);
    const [person, other] = [`idx-${t}`, `idx-other-${t}`];
    await track({ attributes: [{ external_id: person }, { external_id: other }] });
    // Written by the apply's own writer.
    await insertDeadLetters(env.ctx.pool as unknown as PoolClient, [
      {
        source: 'track',
        workspaceId: env.ws.workspaceId,
        stagedId: 7,
        part: 0,
        acceptedAt: new Date(),
        objects: 1,
        payload: JSON.stringify(objects({ ...event(other), name: 'bad\u0000' })),
        error: { code: '22P05', message: 'x' },
      },
    ]);
    const legacy = await letter(objects(event(other)), 'x');
    const names = async () =>
      (
        await q<{ payload: string; named: boolean }>(
          `SELECT payload, names IS NOT NULL AND names <> '{}' AS named FROM ingest_dead_letters WHERE payload LIKE $1 ORDER BY id`,
          [`%${other}%`],
        )
      ).map((r) => r.named);
    expect(await names()).toEqual([true, false]);

    await erase({ external_ids: [person] });
    // Both kept (not theirs); the one found unnamed was read whole and named, so the next erasure finds it by index.
    expect(await names()).toEqual([true, true]);
    await env.ctx.pool.query(`UPDATE ingest_dead_letters SET payload = payload || ' ' WHERE id = $1`, [legacy]);
    expect(await names()).toEqual([true, false]);
  });
});
