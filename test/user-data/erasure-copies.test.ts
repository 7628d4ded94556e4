import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { drainThrough } from '../../src/ingest/apply/drain-staging.js';
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
