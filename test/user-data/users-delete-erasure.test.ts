import { execFile } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { promisify } from 'node:util';
import { beforeAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { bearer } from '../helpers/seed.js';

/**
 * GDPR article 17 as a data team would check it: after POST /users/delete has been applied, a pg_dump of everything
 * this install stores holds the person's email address only in the records docs/privacy.md names as kept on purpose
 * (the suppression lists: an unsubscribed address, a hard bounce), and their external id only in the tombstone a
 * warehouse needs to delete its row and in the event log's `users.Deleted` event, which tells an event stream's. Every other place that held them (the profile and its aliases, a deprecated
 * external id, consent given per address, a dead letter, a live activity token, a cached idempotency answer) holds
 * nothing of them.
 */

const run = promisify(execFile);
const env = useTestEnv({ workspaces: ['ws'] });
const tag = randomUUID().slice(0, 8);
const EMAIL = `Erase.Me.${tag}@Example.com`;
const OTHER_EMAIL = `stays.${tag}@example.com`;
const EXTERNAL_ID = `gdpr-${tag}`;
const PUSH_TOKEN = `${tag}${tag}`;

async function post(url: string, body: unknown, headers: Record<string, string> = {}) {
  const res = await env.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json', ...headers },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, `${url}: ${res.body}`).toBeLessThan(300);
  return res.json();
}

async function staged() {
  return (await env.ctx.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM ingest_staging')).rows[0]!.n;
}

/** The lines of a plain pg_dump of this test's schema that mention `needle` (case-insensitive), by table. */
async function dumpMentions(needle: string): Promise<Record<string, number>> {
  const url = new URL(env.config.DATABASE_URL);
  const { stdout } = await run(
    'pg_dump',
    ['--no-owner', '--schema', env.config.DATABASE_SCHEMA, '--dbname', url.toString()],
    { maxBuffer: 256 * 1024 * 1024 },
  );
  const found: Record<string, number> = {};
  let table = '(schema)';
  for (const line of stdout.split('\n')) {
    const copy = /^COPY [^.]+\.(\S+) /.exec(line);
    // The event log's day partitions count as the log.
    if (copy) table = copy[1]!.replace(/^event_log_\d{8}$/, 'event_log');
    else if (line === '\\.') table = '(schema)';
    else if (line.toLowerCase().includes(needle.toLowerCase())) found[table] = (found[table] ?? 0) + 1;
  }
  return found;
}

beforeAll(async () => {
  env.startWorkers([trackIngestJob]);
  const app = await env.ctx.pool.query<{ id: string }>(
    `INSERT INTO apps (workspace_id, api_id, name) VALUES ($1, 'gdpr-app', 'A') RETURNING id`,
    [env.ws.workspaceId],
  );
  await env.ctx.pool.query(
    `INSERT INTO live_activities (app_id, activity_id, content_state_shape) VALUES ($1, 'match', '{}')`,
    [app.rows[0]!.id],
  );
});

describe('POST /users/delete, then pg_dump', () => {
  it("holds the person's address only in the suppression lists, their external id only in the tombstone and the Deleted event", async () => {
    // Everything a busy integration would have stored about one person.
    await post(
      '/users/track',
      {
        attributes: [
          { external_id: EXTERNAL_ID, email: EMAIL, first_name: 'Erin', phone: '+15550001234', favourite_email: EMAIL },
          { external_id: `neighbour-${tag}`, email: OTHER_EMAIL, first_name: 'Nina' },
        ],
        events: [
          { external_id: EXTERNAL_ID, name: 'signed_up', time: '2026-01-01T00:00:00Z', properties: { email: EMAIL } },
        ],
      },
      { 'idempotency-key': `track-${tag}` },
    );
    await waitFor(async () => (await staged()) === 0, 20_000);
    // An alias named by the address, as edX's client names them.
    await post('/users/alias/new', {
      user_aliases: [{ external_id: EXTERNAL_ID, alias_name: EMAIL, alias_label: 'Enterprise' }],
    });
    // A rename: the old id is deprecated but still names the person; its answer is cached under an Idempotency-Key.
    await post(
      '/users/external_ids/rename',
      { external_id_renames: [{ current_external_id: EXTERNAL_ID, new_external_id: `${EXTERNAL_ID}-v2` }] },
      { 'idempotency-key': `rename-${tag}` },
    );
    // Registered by the API as a device would (`post` fails the test on any refusal): an ActivityKit token is hex.
    await post('/messages/live_activity/register', {
      app_id: 'gdpr-app',
      activity_id: 'match',
      push_token: PUSH_TOKEN,
      external_id: `${EXTERNAL_ID}-v2`,
    });
    expect((await env.ctx.pool.query(`SELECT external_id FROM live_activity_tokens`)).rows).toEqual([
      { external_id: `${EXTERNAL_ID}-v2` },
    ]);
    // Consent per address (goes), an unsubscribe of another address of the same person (stays), a hard bounce (stays).
    await post('/email/status', { email: EMAIL, subscription_state: 'opted_in' });
    await post('/internal/records/hard_bounces', { records: [{ email: EMAIL.toLowerCase() }] });
    // A refused object of theirs, beside another user's, in a dead letter.
    const payload = {
      events: [
        {
          identity: { type: 'email', value: EMAIL.toLowerCase() },
          create: false,
          name: 'bad\u0000name',
          time: '2026-01-01T00:00:00.000Z',
        },
        {
          identity: { type: 'external_id', value: `neighbour-${tag}` },
          create: true,
          name: 'bad\u0000name',
          time: '2026-01-01T00:00:00.000Z',
        },
      ],
      purchases: [],
      attributes: [],
    };
    await env.ctx.pool.query(
      `INSERT INTO ingest_dead_letters (source, workspace_id, staged_id, part, accepted_at, objects, payload, error_code, error_message)
       VALUES ('track', $1, 1, 0, now(), 2, $2, '22P05', $3)`,
      [
        env.ws.workspaceId,
        JSON.stringify(payload).replace(/\\u0000/g, '\\\\u0000'),
        `invalid input near ${EMAIL.toLowerCase()}`,
      ],
    );
    await waitFor(async () => (await staged()) === 0, 20_000);

    const before = await dumpMentions(EMAIL);
    expect(Object.keys(before).sort()).toEqual(
      expect.arrayContaining([
        'email_subscriptions',
        'hard_bounces',
        'ingest_dead_letters',
        'profile_aliases',
        'profiles',
      ]),
    );

    // Their active day (the signed_up event's) is stamped, and counted in the day's active users.
    const stamps = `SELECT count(*)::int AS n FROM active_user_days d JOIN profiles p ON p.id = d.profile_id
                     WHERE p.external_id = $1`;
    const dau = `SELECT dau::int FROM user_kpi_daily WHERE workspace_id = $1 AND app_id = '' AND day = '2026-01-01'`;
    expect((await env.ctx.pool.query(stamps, [`${EXTERNAL_ID}-v2`])).rows).toEqual([{ n: 1 }]);
    expect((await env.ctx.pool.query(dau, [env.ws.workspaceId])).rows).toEqual([{ dau: 1 }]);

    await post('/users/delete', { external_ids: [EXTERNAL_ID] });
    await waitFor(async () => (await staged()) === 0, 20_000);

    // The address: only the two suppression lists (docs/privacy.md, "Kept on purpose").
    expect(await dumpMentions(EMAIL)).toEqual({ email_subscriptions: 1, hard_bounces: 1 });
    const kept = await env.ctx.pool.query(`SELECT state FROM email_subscriptions WHERE email = lower($1)`, [EMAIL]);
    expect(kept.rows).toEqual([{ state: 'unsubscribed' }]);
    // The external ids (primary and deprecated): only the tombstone, for the warehouse's delete, and the deletion's
    // users.Deleted event in the event log, for the event stream's (its signed_up event, which held the address in
    // its properties, is gone: the address is in no event).
    expect(await dumpMentions(EXTERNAL_ID)).toEqual({ profile_tombstones: 1, event_log: 1 });
    const logged = await env.ctx.pool.query(
      `SELECT type, name, properties FROM event_log WHERE external_user_id LIKE $1`,
      [`${EXTERNAL_ID}%`],
    );
    expect(logged.rows).toEqual([{ type: 'users.Deleted', name: null, properties: null }]);
    // No activity stamp of theirs is left (no profile holds one: the neighbour sent no event); the count stays.
    expect((await env.ctx.pool.query(`SELECT count(*)::int AS n FROM active_user_days`)).rows).toEqual([{ n: 0 }]);
    expect((await env.ctx.pool.query(dau, [env.ws.workspaceId])).rows).toEqual([{ dau: 1 }]);
    expect(await dumpMentions('Erin')).toEqual({});
    expect(await dumpMentions('+15550001234')).toEqual({});
    expect(await dumpMentions(PUSH_TOKEN)).toEqual({});
    // The neighbour is untouched, their dead-letter object kept.
    expect(await dumpMentions(OTHER_EMAIL)).toEqual({ profiles: 1 });
    expect((await dumpMentions(`neighbour-${tag}`)).ingest_dead_letters).toBe(1);
  }, 60_000);
});
