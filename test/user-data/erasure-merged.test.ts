import { randomUUID } from 'node:crypto';
import { beforeAll, describe, expect, it } from 'vitest';
import { stageObjects } from '../../src/pipelines/ingest/accept/staging-writer.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

/**
 * Erasure follows the person through merges (docs/privacy.md, "Merged identities"): after /users/merge or
 * /users/identify folds `a` into `b`, deleting `b` erases what named `a` too (live activity tokens, consent of a's
 * address, dead letters, cached Idempotency-Key answers), however many merges lie between. What names `a` after the
 * merge (its external id freed and taken by a new user) belongs to that new user and stays.
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

/** Applies everything staged, as an apply job does. */
async function applyStaged() {
  await drainThrough(env.ctx.pool, undefined, {
    maxRows: 100,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });
}

/** Users by external id, each with an address of its own (`<id>@example.com`). */
async function users(...externalIds: string[]) {
  await post('/users/track', {
    attributes: externalIds.map((id) => ({ external_id: id, email: `${id}@example.com`, first_name: 'F' })),
  });
  await applyStaged();
}

async function merge(from: string, into: string) {
  await post('/users/merge', {
    merge_updates: [{ identifier_to_merge: { external_id: from }, identifier_to_keep: { external_id: into } }],
  });
  await applyStaged();
}

async function erase(externalId: string) {
  await post('/users/delete', { external_ids: [externalId] });
  await applyStaged();
}

const q = async <T extends object>(sql: string, params: unknown[] = []) =>
  (await env.ctx.pool.query<T & Record<string, unknown>>(sql, params)).rows;

/** A 16-hex-digit ActivityKit push token of this test. */
const token = () => randomUUID().replace(/-/g, '').slice(0, 16);

async function register(pushToken: string, externalId: string) {
  await post('/messages/live_activity/register', {
    app_id: 'merge-app',
    activity_id: 'match',
    push_token: pushToken,
    external_id: externalId,
    content_state_shape: { score: 'string' },
  });
}

const tokens = async () =>
  (await q<{ push_token: string }>(`SELECT push_token FROM live_activity_tokens ORDER BY push_token`)).map(
    (r) => r.push_token,
  );

beforeAll(async () => {
  await env.ctx.pool.query(`INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'merge-app', 'A')`, [
    env.ws.workspaceId,
  ]);
});

describe('deleting a profile that others were merged into', () => {
  it("erases the merged users' live activity tokens, through a chain of merges", async () => {
    const t = randomUUID().slice(0, 6);
    const [a, b, c, n] = ['a', 'b', 'c', 'n'].map((x) => `${x}-tok-${t}`) as [string, string, string, string];
    await users(a, b, c, n);
    const [ta, tb, tn] = [token(), token(), token()];
    await register(ta, a);
    await register(tb, b);
    await register(tn, n);
    await merge(a, b);
    await merge(b, c);
    // A merge erases nothing: the person lives on in the kept profile.
    expect(await tokens()).toEqual([ta, tb, tn].sort());

    await erase(c);
    expect(await tokens()).toEqual([tn]);
  });

  it("erases consent given to a merged user's address (POST /users/identify of an alias-only user)", async () => {
    const t = randomUUID().slice(0, 6);
    const b = `b-consent-${t}`;
    const merged = `alias-only-${t}@example.com`;
    await users(b);
    await post('/users/alias/new', { user_aliases: [{ alias_name: `anon-${t}`, alias_label: 'web' }] });
    await applyStaged();
    await post('/users/track', {
      attributes: [{ user_alias: { alias_name: `anon-${t}`, alias_label: 'web' }, email: merged }],
    });
    await applyStaged();
    await post('/email/status', { email: [merged, `${b}@example.com`], subscription_state: 'opted_in' });
    await post('/users/identify', {
      aliases_to_identify: [{ external_id: b, user_alias: { alias_name: `anon-${t}`, alias_label: 'web' } }],
    });
    await applyStaged();
    // b kept its own address; the alias-only user's went with its profile, its consent did not.
    expect(await q(`SELECT email FROM profiles WHERE external_id = $1`, [b])).toEqual([{ email: `${b}@example.com` }]);
    expect(await q(`SELECT state FROM email_subscriptions WHERE email = $1`, [merged])).toEqual([
      { state: 'opted_in' },
    ]);

    await erase(b);
    expect(
      await q(`SELECT email FROM email_subscriptions WHERE email = ANY($1)`, [[merged, `${b}@example.com`]]),
    ).toEqual([]);
  });

  it("takes a merged user's objects out of dead letters, and keeps another user's", async () => {
    const t = randomUUID().slice(0, 6);
    const [a, b, n] = ['a', 'b', 'n'].map((x) => `${x}-dl-${t}`) as [string, string, string];
    await users(a, b, n);
    // One staged row of two events that PostgreSQL refuses (a lone surrogate in the name): one dead letter.
    const bad = (id: string) => ({
      identity: { type: 'external_id' as const, value: id },
      create: true,
      name: 'played\ud800',
      time: '2026-01-01T00:00:00.000Z',
    });
    await stageObjects(
      env.ctx.pool,
      env.ws.workspaceId,
      { events: [bad(a), bad(n)], purchases: [], attributes: [] },
      1,
    );
    await applyStaged();
    const letters = () =>
      q<{ objects: number; payload: string }>(
        `SELECT objects, payload FROM ingest_dead_letters WHERE payload LIKE $1`,
        [`%-dl-${t}%`],
      );
    expect((await letters()).map((l) => l.objects)).toEqual([2]);
    await merge(a, b);

    await erase(b);
    const [letter, ...more] = await letters();
    expect(more).toEqual([]);
    expect(letter!.objects).toBe(1);
    expect(letter!.payload).not.toContain(a);
    expect(letter!.payload).toContain(n);
  });

  it('forgets cached Idempotency-Key answers that name a merged user (a rename of its external id)', async () => {
    const t = randomUUID().slice(0, 6);
    const [a, b, n] = ['a', 'b', 'n'].map((x) => `${x}-idem-${t}`) as [string, string, string];
    await users(a, b, n);
    const renamed = await post(
      '/users/external_ids/rename',
      { external_id_renames: [{ current_external_id: a, new_external_id: `${a}-v2` }] },
      { 'idempotency-key': `rename-a-${t}` },
    );
    expect(renamed.external_ids).toEqual([a]);
    await post(
      '/users/external_ids/rename',
      { external_id_renames: [{ current_external_id: n, new_external_id: `${n}-v2` }] },
      { 'idempotency-key': `rename-n-${t}` },
    );
    await applyStaged();
    await merge(`${a}-v2`, b);
    const keys = async () =>
      (await q<{ key: string }>(`SELECT key FROM idempotency_keys WHERE key LIKE $1 ORDER BY key`, [`%-${t}`])).map(
        (r) => r.key,
      );
    expect(await keys()).toEqual([`rename-a-${t}`, `rename-n-${t}`]);

    await erase(b);
    expect(await keys()).toEqual([`rename-n-${t}`]);
  });

  it("keeps what names a merged user's freed external id once a new user has taken it", async () => {
    const t = randomUUID().slice(0, 6);
    const [a, b] = ['a', 'b'].map((x) => `${x}-freed-${t}`) as [string, string];
    await users(a, b);
    const before = token();
    await register(before, a);
    await merge(a, b);
    // The merge freed `a`: a later write with it creates a new user, whose token this is.
    await users(a);
    const after = token();
    await register(after, a);

    await erase(b);
    const left = await tokens();
    expect(left).toContain(after);
    expect(left).not.toContain(before);
    expect(await q(`SELECT external_id FROM profiles WHERE external_id = $1`, [a])).toEqual([{ external_id: a }]);
  });
});
