import { spawn } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { repoRoot, waitFor } from '../helpers/cli.js';
import { useTestEnv } from '../helpers/context.js';
import { insertProfiles } from '../helpers/export-fixtures.js';
import { bearer } from '../helpers/seed.js';

/**
 * The user-data endpoints as two third-party Python Braze clients use them: scripts/braze-clients-replay.py sends,
 * over real HTTP, the exact requests of edX's client (edx-braze-client 1.1.3) and of the PyPI braze-client 2.3.3,
 * and the documented bodies of /users/merge and /users/external_ids/rename and /remove, to this service listening on
 * a free port, and checks each answer holds what that client reads. Then the staged writes are applied by a running
 * track-ingest worker, and what a user of the clients would see next is checked through /users/export/ids.
 */

const env = useTestEnv({ workspaces: ['ws'] });

interface Line {
  client: 'edx' | 'pypi' | 'docs';
  call: string;
  method: string;
  path: string;
  status: number | null;
  body: Record<string, unknown>;
  request: unknown;
}

interface Replay {
  code: number | null;
  stdout: string;
  stderr: string;
  lines: Line[];
}

const LEARNER = 'learner@example.com'; // no profile: create_braze_alias makes an alias-only user, create_recipients identifies it
const LMS_USER_ID = 4242; // sent as a JSON integer, as edX's callers pass their LMS user ids
const UNSUBSCRIBED = 501; // one more than a page of edX's listing: two GETs

let replay: Replay;
let base: string;

function runReplay(extraEnv: Record<string, string>): Promise<Replay> {
  return new Promise((resolve, reject) => {
    const child = spawn('python3', [path.join(repoRoot, 'scripts/braze-clients-replay.py')], {
      cwd: repoRoot,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', ...extraEnv },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => child.kill('SIGKILL'), 90_000);
    child.on('error', (err) =>
      reject(new Error(`python3 is required to run scripts/braze-clients-replay.py: ${err.message}`)),
    );
    child.on('close', (code) => {
      clearTimeout(timer);
      try {
        const lines = stdout
          .split('\n')
          .filter(Boolean)
          .map((l) => JSON.parse(l) as Line);
        resolve({ code, stdout, stderr, lines });
      } catch (err) {
        reject(
          new Error(`the replay printed a line that is not JSON (${(err as Error).message}):\n${stdout}\n${stderr}`),
        );
      }
    });
  });
}

async function post(url: string, body: unknown) {
  const res = await env.app.inject({
    method: 'POST',
    url,
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
    payload: JSON.stringify(body),
  });
  expect(res.statusCode, `${url} ${res.body}`).toBeLessThan(300);
  return res.json() as Record<string, unknown>;
}

const exportIds = (body: Record<string, unknown>) =>
  post('/users/export/ids', {
    fields_to_export: ['external_id', 'email', 'user_aliases', 'first_name', 'custom_attributes'],
    ...body,
  });

const staged = async () =>
  (
    await env.ctx.pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM ingest_staging WHERE workspace_id = $1`, [
      env.ws.workspaceId,
    ])
  ).rows[0]!.n;

const linesOf = (call: string) => replay.lines.filter((l) => l.call === call);

beforeAll(async () => {
  const { pool } = env.ctx;
  const ws = env.ws.workspaceId;
  // ext-N, userN@example.com, svc-N; ext-10 has no first_name.
  await insertProfiles(pool, ws, 1, 12);
  await env.ctx.pool.query(
    `INSERT INTO email_subscriptions (workspace_id, email, state, updated_at)
     SELECT $1::uuid, 'gone' || g || '@example.com', 'unsubscribed', timestamptz '2026-03-01T00:00:00Z' + g * interval '1 minute' FROM generate_series(1, $2::int) g
     UNION ALL SELECT $1::uuid, 'before-range@example.com', 'unsubscribed', timestamptz '2025-12-31T00:00:00Z'
     UNION ALL SELECT $1::uuid, 'subscribed@example.com', 'subscribed', timestamptz '2026-03-01T00:00:00Z'`,
    [ws, UNSUBSCRIBED],
  );
  // Through the API, as a client would have earlier: ext-1 already holds the Enterprise alias of its own address
  // (create_braze_alias finds it), ext-9 and an alias-only user have aliases labelled "email" as in Braze's merge
  // example, and ext-11 was renamed, so ext-11 is a deprecated id to remove.
  await post('/users/alias/new', {
    user_aliases: [
      { external_id: 'ext-1', alias_name: 'user1@example.com', alias_label: 'Enterprise' },
      { external_id: 'ext-9', alias_name: 'user9@example.com', alias_label: 'email' },
      { alias_name: 'anon@example.com', alias_label: 'email' },
    ],
  });
  await post('/users/track', {
    attributes: [{ user_alias: { alias_label: 'email', alias_name: 'anon@example.com' }, plan: 'trial' }],
  });
  await post('/users/external_ids/rename', {
    external_id_renames: [{ current_external_id: 'ext-11', new_external_id: 'ext-11-v2' }],
  });
  await drainThrough(pool, undefined, {
    maxRows: 100,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });
  expect(await staged()).toBe(0);

  env.startWorkers([trackIngestJob]);
  await env.app.listen({ host: '127.0.0.1', port: 0 });
  base = `http://127.0.0.1:${(env.app.server.address() as AddressInfo).port}`;

  replay = await runReplay({
    BASE_URL: base,
    API_KEY: env.ws.apiKey,
    // The clients' own timeout is 2 s; a loaded CI machine should not fail the run on latency alone.
    REPLAY_TIMEOUT: '15',
    REPLAY_EMAIL: 'user2@example.com',
    REPLAY_ALIAS_LABEL: 'Enterprise',
    REPLAY_ALIAS_EMAILS: `${LEARNER},user1@example.com`,
    REPLAY_IDENTIFY: `${LEARNER}=${LMS_USER_ID}`,
    REPLAY_UNSUBSCRIBES_START: '2026-01-01',
    REPLAY_UNSUBSCRIBES_END: '2026-07-01',
    REPLAY_EXPORT_EXTERNAL_IDS: 'ext-3,ext-4',
    REPLAY_DELETE_EXTERNAL_IDS: 'ext-5',
    REPLAY_MERGE: 'ext-6:ext-10',
    REPLAY_MERGE_ALIASES: 'anon@example.com:user9@example.com',
    REPLAY_RENAME: 'ext-7:ext-7-renamed',
    REPLAY_REMOVE: 'ext-11',
  });
  // Everything accepted is applied by the running worker (dead letters are checked below).
  await waitFor(async () => (await staged()) === 0, 60_000);
});

describe('the clients, replayed against the service', () => {
  it('every request is answered 2xx with what its client reads; the script exits 0', () => {
    expect(replay.code, `${replay.stderr}\n${replay.stdout}`).toBe(0);
    expect(replay.stderr).not.toMatch(/^FAIL/m);
    expect(replay.lines.map((l) => `${l.client} ${l.method} ${l.path}`)).toEqual([
      'edx POST /users/export/ids',
      'edx POST /users/alias/new',
      'edx POST /users/track',
      'edx POST /users/identify',
      'edx POST /users/export/ids',
      'edx GET /email/unsubscribes',
      'edx GET /email/unsubscribes',
      'pypi POST /users/export/ids',
      'pypi POST /users/export/ids',
      'pypi POST /users/delete',
      'docs POST /users/merge',
      'docs POST /users/external_ids/rename',
      'docs POST /users/external_ids/remove',
    ]);
    for (const l of replay.lines) {
      expect(l.status, `${l.path} ${JSON.stringify(l.body)}`).toBeGreaterThanOrEqual(200);
      expect(l.status, `${l.path} ${JSON.stringify(l.body)}`).toBeLessThan(300);
      expect(l.body.message, l.path).toBe('success');
    }
  });

  it("nothing was refused, edX's track object whose user_alias carries the found external_id included; nothing was dead-lettered", async () => {
    // create_braze_alias puts the same user_alias dict in /users/alias/new and /users/track, so for a user the export
    // found, the track object's user_alias has an external_id key: taken and ignored
    // (src/profiles/validation/validate-rules.ts).
    for (const l of replay.lines) expect(l.body.errors, `${l.path} ${JSON.stringify(l.body)}`).toBeUndefined();
    expect(linesOf('create_braze_alias/track_user')[0]!.request).toEqual({
      attributes: [
        { user_alias: { alias_label: 'Enterprise', alias_name: LEARNER }, email: LEARNER },
        {
          user_alias: { alias_label: 'Enterprise', alias_name: 'user1@example.com', external_id: 'ext-1' },
          email: 'user1@example.com',
        },
      ],
    });
    expect(linesOf('create_braze_alias/track_user')[0]!.body).toEqual({ message: 'success', attributes_processed: 2 });
    expect(replay.stderr).toBe('');
    const letters = await env.ctx.pool.query(`SELECT error_message FROM ingest_dead_letters WHERE workspace_id = $1`, [
      env.ws.workspaceId,
    ]);
    expect(letters.rows).toEqual([]);
  });

  it("edX create_braze_alias: finds the user holding the alias, sends its external_id with the alias, creates the unknown one's alias", async () => {
    const [lookup, aliasNew, track] = linesOf('create_braze_alias/get_braze_external_id_batch').concat(
      linesOf('create_braze_alias'),
      linesOf('create_braze_alias/track_user'),
    );
    expect(lookup!.body.users).toEqual([{ external_id: 'ext-1', email: 'user1@example.com' }]);
    expect(lookup!.body.invalid_user_ids).toEqual([`Enterprise:${LEARNER}`]);
    expect(aliasNew!.request).toEqual({
      user_aliases: [
        { alias_label: 'Enterprise', alias_name: LEARNER },
        { alias_label: 'Enterprise', alias_name: 'user1@example.com', external_id: 'ext-1' },
      ],
    });
    expect(aliasNew!.status).toBe(201);
    expect(track!.status).toBe(201);
    // The found user keeps its alias, and no second, alias-only user holds it.
    const found = await exportIds({ user_aliases: [{ alias_label: 'Enterprise', alias_name: 'user1@example.com' }] });
    expect(found.users).toEqual([
      expect.objectContaining({
        external_id: 'ext-1',
        email: 'user1@example.com',
        user_aliases: [{ alias_name: 'user1@example.com', alias_label: 'Enterprise' }],
      }),
    ]);
    const holders = await env.ctx.pool.query(
      `SELECT count(*)::int AS n FROM profile_aliases WHERE workspace_id = $1 AND alias_name = 'user1@example.com'`,
      [env.ws.workspaceId],
    );
    expect(holders.rows[0].n).toBe(1);
  });

  it('edX create_recipients: the new alias-only user is identified with the integer LMS user id, and keeps the email the track set', async () => {
    const [identify] = linesOf('create_recipients/identify_users');
    expect(identify!.request).toEqual({
      aliases_to_identify: [
        { external_id: LMS_USER_ID, user_alias: { alias_label: 'Enterprise', alias_name: LEARNER } },
      ],
    });
    expect(identify!.status).toBe(201);
    const byAlias = await exportIds({ user_aliases: [{ alias_label: 'Enterprise', alias_name: LEARNER }] });
    expect(byAlias.users).toEqual([
      expect.objectContaining({
        external_id: String(LMS_USER_ID),
        email: LEARNER,
        user_aliases: [{ alias_name: LEARNER, alias_label: 'Enterprise' }],
      }),
    ]);
    // edX's send flow then finds the learner by address.
    const byEmail = await post('/users/export/ids', { email_address: LEARNER, fields_to_export: ['external_id'] });
    expect(byEmail).toEqual({ users: [{ external_id: String(LMS_USER_ID) }], message: 'success' });
  });

  it("edX send-flow lookup and the PyPI client's exports find the users by address and by external_id", () => {
    expect(linesOf('get_braze_external_id')[0]!.body).toEqual({
      users: [{ external_id: 'ext-2' }],
      message: 'success',
    });
    const [byIds, byEmail] = linesOf('user_export');
    expect(byIds!.request).toEqual({ external_ids: ['ext-3', 'ext-4'], fields_to_export: ['external_id', 'email'] });
    expect(byIds!.body).toEqual({
      users: [
        { external_id: 'ext-3', email: 'user3@example.com' },
        { external_id: 'ext-4', email: 'user4@example.com' },
      ],
      message: 'success',
    });
    // No fields_to_export: every field, as Braze answers.
    expect(byEmail!.request).toEqual({ email_address: 'user2@example.com' });
    expect(byEmail!.body.users).toEqual([
      expect.objectContaining({ external_id: 'ext-2', service_id: 'svc-2', email: 'user2@example.com' }),
    ]);
  });

  it('edX retrieve_unsubscribed_emails pages by 500 until a short page, and gets every unsubscribed address in range once', () => {
    const pages = linesOf('retrieve_unsubscribed_emails');
    expect(pages.map((p) => p.request)).toEqual(
      [0, 500].map((offset) => [
        ['start_date', '2026-01-01'],
        ['end_date', '2026-07-01'],
        ['limit', 500],
        ['offset', offset],
        ['sort_direction', 'desc'],
      ]),
    );
    const emails = pages.flatMap((p) => p.body.emails as Array<{ email: string; unsubscribed_at: string }>);
    expect(pages.map((p) => (p.body.emails as unknown[]).length)).toEqual([500, 1]);
    expect(new Set(emails.map((e) => e.email)).size).toBe(UNSUBSCRIBED);
    expect(emails[0]).toEqual({
      email: `gone${UNSUBSCRIBED}@example.com`,
      unsubscribed_at: new Date(Date.parse('2026-03-01T00:00:00Z') + UNSUBSCRIBED * 60_000).toISOString(),
    });
    expect(emails.at(-1)!.email).toBe('gone1@example.com');
  });

  it('PyPI user_delete: the user is gone from /users/export/ids', async () => {
    expect(linesOf('user_delete')[0]!.body).toEqual({ deleted: 1, message: 'success' });
    expect(await exportIds({ external_ids: ['ext-5'] })).toEqual({
      users: [],
      invalid_user_ids: ['ext-5'],
      message: 'success',
    });
  });

  it("Braze's documented merge (by external_id and by user_alias) is applied: the merged users are gone, the kept ones have what they lacked", async () => {
    const byId = await exportIds({ external_ids: ['ext-6', 'ext-10'] });
    expect(byId.invalid_user_ids).toEqual(['ext-6']);
    expect(byId.users).toEqual([expect.objectContaining({ external_id: 'ext-10', first_name: 'Name\\6 "q"' })]);
    const byAlias = await exportIds({
      user_aliases: [
        { alias_label: 'email', alias_name: 'anon@example.com' },
        { alias_label: 'email', alias_name: 'user9@example.com' },
      ],
    });
    expect(byAlias.invalid_user_ids).toEqual(['email:anon@example.com']);
    expect(byAlias.users).toEqual([
      expect.objectContaining({ external_id: 'ext-9', custom_attributes: expect.objectContaining({ plan: 'trial' }) }),
    ]);
  });

  it("Braze's documented rename and remove: the old id resolves to the renamed user; the removed deprecated id resolves no more", async () => {
    expect(linesOf('external_ids/rename')[0]!.body).toEqual({
      message: 'success',
      external_ids: ['ext-7'],
      rename_errors: [],
    });
    expect(linesOf('external_ids/remove')[0]!.body).toEqual({
      message: 'success',
      removed_ids: ['ext-11'],
      removal_errors: [],
    });
    const renamed = await exportIds({ external_ids: ['ext-7', 'ext-7-renamed'], fields_to_export: ['external_id'] });
    expect(renamed).toEqual({ users: [{ external_id: 'ext-7-renamed' }], message: 'success' });
    expect(await exportIds({ external_ids: ['ext-11', 'ext-11-v2'], fields_to_export: ['external_id'] })).toEqual({
      users: [{ external_id: 'ext-11-v2' }],
      invalid_user_ids: ['ext-11'],
      message: 'success',
    });
  });

  it('the PyPI client before 2.3.2 (api_key in the body, no Authorization header) is refused with 401 and a message it can raise', async () => {
    const res = await env.app.inject({
      method: 'POST',
      url: '/users/export/ids',
      headers: { 'content-type': 'application/json', 'user-agent': 'python-requests/2.34.2' },
      payload: JSON.stringify({ email_address: 'user2@example.com', api_key: env.ws.apiKey }),
    });
    expect(res.statusCode).toBe(401);
    expect(typeof res.json().message).toBe('string');
  });
});
