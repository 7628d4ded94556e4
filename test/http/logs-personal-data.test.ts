import { randomUUID } from 'node:crypto';
import type { InjectOptions } from 'fastify';
import { beforeAll, describe, expect, it } from 'vitest';
import { trackIngestJob } from '../../jobs/track-ingest.js';
import { redactLine } from '../../src/platform/logger.js';
import { waitFor } from '../helpers/cli.js';
import { captureLogs, useTestEnv } from '../helpers/context.js';
import { ORIGIN, USER_SCHEMA } from '../helpers/scim.js';
import { bearer, createScimToken } from '../helpers/seed.js';

/**
 * docs/security.md: personal data is not logged. An email address sent to every route that takes one, in every place
 * it can go (query, body, path, SCIM filter), accepted or refused, reaches no log line at the most verbose level, the
 * worker that applies tracked objects included. The request line says the route as registered and the names of
 * the query parameters; a refusal's reason says why without repeating what the request quoted.
 */

const logs = captureLogs();
const env = useTestEnv({ config: { LOG_LEVEL: 'trace' }, workspaces: ['ws'], logDestination: logs.destination });
let scimToken: string;

beforeAll(async () => {
  scimToken = await createScimToken(env.ctx.pool, env.ws.companyId);
  await env.ctx.pool.query(
    `INSERT INTO catalogs (workspace_id, name, fields) VALUES ($1, 'people', '[{"name": "Name", "type": "string"}]'::jsonb)`,
    [env.ws.workspaceId],
  );
});

/** A fresh address per request, so that each one found in the log names the request that leaked it. */
const address = (where: string) => `leak.${where}.${randomUUID().slice(0, 8)}@Example.com`;

const json = (
  method: InjectOptions['method'],
  url: string,
  body?: unknown,
  headers: Record<string, string> = bearer(env.ws.apiKey),
): InjectOptions => ({
  method,
  url,
  headers: { ...headers, 'content-type': 'application/json' },
  ...(body === undefined ? {} : { payload: typeof body === 'string' ? body : JSON.stringify(body) }),
});
const scim = (method: InjectOptions['method'], url: string, body?: unknown) =>
  json(method, url, body, { ...bearer(scimToken), 'x-request-origin': ORIGIN });
const enc = encodeURIComponent;

/** Each request with the address it carries and where; `refused` when the answer is an error. */
const cases: Array<{ name: string; request: (a: string) => InjectOptions }> = [
  { name: 'hard bounces lookup, query', request: (a) => json('GET', `/email/hard_bounces?email=${enc(a)}`) },
  {
    name: 'hard bounces lookup, bad query',
    request: (a) => json('GET', `/email/hard_bounces?email=${enc(a)}&limit=nope`),
  },
  {
    name: 'email status, body',
    request: (a) => json('POST', '/email/status', { email: a, subscription_state: 'subscribed' }),
  },
  {
    name: 'email status, refused body',
    request: (a) => json('POST', '/email/status', { email: a, subscription_state: 'maybe' }),
  },
  { name: 'email status, malformed body', request: (a) => json('POST', '/email/status', `{"email": "${a}", `) },
  {
    name: 'hard bounce records, body',
    request: (a) => json('POST', '/internal/records/hard_bounces', { records: [{ email: a }] }),
  },
  {
    name: 'track, attributes',
    request: (a) => json('POST', '/users/track', { attributes: [{ external_id: a, email: a }] }),
  },
  {
    name: 'track, refused attribute',
    request: (a) =>
      json('POST', '/users/track', { attributes: [{ external_id: 'x', email: a, email_subscribe: 'perhaps' }] }),
  },
  { name: 'template info, query', request: (a) => json('GET', `/templates/email/info?email_template_id=${enc(a)}`) },
  { name: 'export status, query', request: (a) => json('GET', `/users/export/status?object_prefix=${enc(a)}`) },
  { name: 'import status, path', request: (a) => json('GET', `/users/import/${enc(a)}`) },
  { name: 'catalog item, path', request: (a) => json('GET', `/catalogs/people/items/${enc(a)}`) },
  {
    name: 'catalog item write, path and body',
    request: (a) => json('PUT', `/catalogs/people/items/${enc(a)}`, { items: [{ Name: a }] }),
  },
  {
    name: 'preference center, path',
    request: (a) => json('GET', `/preference_center/v1/${enc(a)}?external_id=${enc(a)}`),
  },
  {
    name: 'alias update, body',
    request: (a) =>
      json('POST', '/users/alias/update', {
        alias_updates: [{ alias_label: 'email', old_alias_name: a, new_alias_name: `new.${a}` }],
      }),
  },
  { name: 'no such route, path and query', request: (a) => json('GET', `/users/${enc(a)}/profile?email=${enc(a)}`) },
  { name: 'no credentials', request: (a) => ({ method: 'GET', url: `/email/hard_bounces?email=${enc(a)}` }) },
  { name: 'SCIM create, body', request: (a) => scim('POST', '/scim/v2/Users', scimUser(a)) },
  {
    name: 'SCIM create, refused body',
    request: (a) => scim('POST', '/scim/v2/Users', { ...scimUser(a), name: { givenName: 'Ada' } }),
  },
  { name: 'SCIM filter', request: (a) => scim('GET', `/scim/v2/Users?filter=${enc(`userName eq "${a}"`)}`) },
  { name: 'SCIM bad filter', request: (a) => scim('GET', `/scim/v2/Users?filter=${enc(`userName sw "${a}"`)}`) },
  { name: 'SCIM path', request: (a) => scim('GET', `/scim/v2/Users/${enc(a)}`) },
  {
    name: 'SCIM patch path',
    request: (a) =>
      scim('PATCH', `/scim/v2/Users/${randomUUID()}`, {
        schemas: ['urn:ietf:params:scim:api:messages:2.0:PatchOp'],
        Operations: [{ op: 'replace', path: a, value: a }],
      }),
  },
];

function scimUser(userName: string) {
  return {
    schemas: [USER_SCHEMA],
    userName,
    name: { givenName: 'Ada', familyName: 'Lovelace' },
    department: 'finance',
    permissions: { companyPermissions: ['manage_company_settings'] },
  };
}

describe('email addresses and logs', () => {
  it('no route writes an address it was sent to any log line, accepted or refused, worker included', async () => {
    const sent: Array<{ name: string; address: string; status: number }> = [];
    for (const c of cases) {
      const a = address(c.name.replace(/[^a-z]+/gi, '-'));
      const res = await env.app.inject(c.request(a));
      sent.push({ name: c.name, address: a, status: res.statusCode });
    }
    // Both answers are among what was sent: accepted and refused requests.
    expect(sent.some((s) => s.status < 300)).toBe(true);
    expect(sent.some((s) => s.status >= 400 && s.status < 500)).toBe(true);
    // The tracked attributes are applied by the worker, which logs at trace too.
    const workers = env.startWorkers([trackIngestJob]);
    await waitFor(
      async () => (await env.ctx.pool.query(`SELECT 1 FROM ingest_staging LIMIT 1`)).rowCount === 0,
      20_000,
    );
    await workers.close(5_000);

    const text = logs.lines.join('');
    expect(logs.lines.length).toBeGreaterThan(cases.length * 2);
    for (const { name, address: a } of sent) {
      for (const form of [a, a.toLowerCase(), enc(a), a.split('@')[0]!]) {
        expect(text.includes(form), `${name}: ${form} is in the log`).toBe(false);
      }
    }
  });

  it('the request line names the route as registered and the query parameters, never their values', async () => {
    const a = address('request-line');
    logs.lines.length = 0;
    await env.app.inject(json('GET', `/email/hard_bounces?email=${enc(a)}&limit=5`));
    await env.app.inject(scim('GET', `/scim/v2/Users/${enc(a)}`));
    await env.app.inject(json('GET', `/nowhere/${enc(a)}/x?email=${enc(a)}`));
    const lines = logs.lines.map((l) => JSON.parse(l) as { msg: string; req?: { url?: string; query?: string[] } });
    const incoming = lines.filter((l) => l.msg === 'incoming request').map((l) => l.req);
    expect(incoming).toEqual([
      expect.objectContaining({ method: 'GET', url: '/email/hard_bounces', query: ['email', 'limit'] }),
      expect.objectContaining({ method: 'GET', url: '/scim/v2/Users/:id' }),
      expect.objectContaining({ method: 'GET', url: '/nowhere/:value/x', query: ['email'] }),
    ]);
    expect(JSON.stringify(lines)).not.toContain('Example.com');
  });

  it("a refusal's logged reason does not repeat what the request quoted; the client's answer does", async () => {
    const a = address('refusal');
    logs.lines.length = 0;
    const res = await env.app.inject(json('GET', `/templates/email/info?email_template_id=${enc(a)}`));
    expect(res.statusCode).toBe(404);
    expect(res.json().message).toContain(a);
    const refused = logs.lines
      .map((l) => JSON.parse(l) as { msg: string; reason?: string })
      .filter((l) => l.msg === 'request refused');
    expect(refused.map((l) => l.reason)).toEqual(['No email template with email_template_id "…"']);
  });

  it('the last net masks an address that any other line would carry', () => {
    expect(redactLine('{"msg":"x","to":"Ada.Lovelace+news@mail.example.co.uk","url":"/a?e=ada%40example.com"}')).toBe(
      '{"msg":"x","to":"[email]","url":"/a?e=[email]"}',
    );
  });
});
