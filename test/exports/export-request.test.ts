import { beforeAll, describe, expect, it } from 'vitest';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, insertProfiles, requestExport } from '../helpers/export-fixtures.js';
import { bearer, createKey, seedWorkspace } from '../helpers/seed.js';

const COMPANY_CAP = 3;

// No worker runs in this file: every accepted export stays queued and keeps its locks.
const env = useTestEnv({
  config: { EXPORT_MAX_RUNNING_PER_COMPANY: String(COMPANY_CAP), CALLBACK_ALLOW_PRIVATE: 'false' },
  workspaces: ['ws'],
});

beforeAll(async () => {
  for (const id of ['seg-a', 'seg-b', 'seg-c', 'seg-d', 'seg-e'])
    await createSegment(env.ctx.pool, env.ws.workspaceId, id);
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'seg-archived', undefined, true);
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 10);
});

const valid = { segment_id: 'seg-a', fields_to_export: ['external_id', 'email'] };

async function exportsCount(): Promise<number> {
  return Number((await env.ctx.pool.query(`SELECT count(*) AS n FROM exports`)).rows[0].n);
}

describe('POST /users/export/segment: refusals', () => {
  const cases: Array<[string, unknown, RegExp]> = [
    ['malformed JSON', '{"segment_id": "seg-a", ', /Malformed JSON/],
    ['no body', '', /body/],
    ['a JSON array', [], /body/],
    ['missing segment_id', { fields_to_export: ['email'] }, /segment_id/],
    ['segment_id of the wrong type', { segment_id: 42, fields_to_export: ['email'] }, /segment_id/],
    [
      'unknown segment',
      { segment_id: 'nope', fields_to_export: ['email'] },
      /segment_id "nope" does not name a segment/,
    ],
    ['archived segment', { segment_id: 'seg-archived', fields_to_export: ['email'] }, /archived/],
    ['missing fields_to_export', { segment_id: 'seg-a' }, /fields_to_export is required/],
    [
      'empty fields_to_export',
      { segment_id: 'seg-a', fields_to_export: [] },
      /fields_to_export must name at least one field/,
    ],
    ['fields_to_export not an array', { segment_id: 'seg-a', fields_to_export: 'email' }, /fields_to_export/],
    ['fields_to_export with a number', { segment_id: 'seg-a', fields_to_export: ['email', 3] }, /fields_to_export/],
    [
      'unknown fields',
      { segment_id: 'seg-a', fields_to_export: ['email', 'shoe_size', 'braze_id'] },
      /unknown fields in fields_to_export: shoe_size, braze_id/,
    ],
    [
      'more than 500 custom attributes',
      { ...valid, custom_attributes_to_export: Array.from({ length: 501 }, (_, i) => `a${i}`) },
      /at most 500 custom attributes/,
    ],
    [
      'custom_attributes_to_export not strings',
      { ...valid, custom_attributes_to_export: [1, 2] },
      /custom_attributes_to_export/,
    ],
    ['bad output_format', { ...valid, output_format: 'tar' }, /output_format must be 'zip', 'gzip' or 'parquet'/],
    [
      'callback_endpoint not a URL',
      { ...valid, callback_endpoint: 'not a url' },
      /callback_endpoint must be an http or https URL/,
    ],
    [
      'callback_endpoint of another scheme',
      { ...valid, callback_endpoint: 'ftp://example.com/x' },
      /callback_endpoint must be an http or https URL/,
    ],
    ['callback_endpoint of the wrong type', { ...valid, callback_endpoint: 5 }, /callback_endpoint/],
    ['callback to a loopback address', { ...valid, callback_endpoint: 'http://127.0.0.1:9/cb' }, /private or loopback/],
    ['callback to a private address', { ...valid, callback_endpoint: 'http://10.1.2.3/cb' }, /private or loopback/],
    ['callback to localhost', { ...valid, callback_endpoint: 'http://localhost/cb' }, /private or loopback/],
    ['over-long segment_id', { segment_id: 'x'.repeat(300), fields_to_export: ['email'] }, /segment_id/],
  ];
  for (const [name, body, message] of cases) {
    it(`400 for ${name}, with nothing queued`, async () => {
      const before = await exportsCount();
      const res = await requestExport(env, env.ws.apiKey, body);
      expect(res.status).toBe(400);
      expect(res.body.message).toMatch(message);
      expect(await exportsCount()).toBe(before);
    });
  }

  it('401 without a key, with an unknown key, and with a key lacking users.export.segment', async () => {
    const none = await env.app.inject({
      method: 'POST',
      url: '/users/export/segment',
      headers: { 'content-type': 'application/json' },
      payload: valid,
    });
    expect(none.statusCode).toBe(401);
    expect(none.json().message).toMatch(/API key/);
    const unknown = await requestExport(env, 'key-not-a-real-key', valid);
    expect(unknown.status).toBe(401);
    const bare = await requestExport(env, env.ws.bareKey, valid);
    expect(bare.status).toBe(401);
    expect(bare.body.message).toMatch(/users\.export\.segment/);
    const statusOnly = await createKey(env.ctx.pool, env.ws.workspaceId, 'status-only', ['users.export.status']);
    expect((await requestExport(env, statusOnly, valid)).status).toBe(401);
    expect(await exportsCount()).toBe(0);
  });

  it('does not export a segment of another workspace', async () => {
    const other = await seedWorkspace(env.ctx.pool);
    const res = await requestExport(env, other.apiKey, valid);
    expect(res.status).toBe(400);
    expect(res.body.message).toMatch(/does not name a segment/);
  });
});

describe('POST /users/export/segment: acceptance and locks', () => {
  it('answers 201 with object_prefix and a signed url, and queues the export without reading users', async () => {
    // api_key, the legacy body credential clients of the original still send, is ignored (an unknown key is refused).
    const res = await requestExport(env, env.ws.apiKey, { ...valid, output_format: 'gzip', api_key: 'legacy' });
    expect(res.status).toBe(201);
    expect(res.body.message).toBe('success');
    const prefix = String(res.body.object_prefix);
    expect(prefix).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}-\d{10}$/);
    const seconds = Number(prefix.slice(37));
    expect(Math.abs(seconds - Date.now() / 1000)).toBeLessThan(30);
    expect(String(res.body.url)).toMatch(
      new RegExp(`^http://127\\.0\\.0\\.1:3000/downloads/segment-export/${prefix}\\.zip\\?signature=[0-9a-f]{64}$`),
    );
    const row = (
      await env.ctx.pool.query(
        `SELECT status, destination, users_done, request FROM exports WHERE object_prefix = $1`,
        [prefix],
      )
    ).rows[0];
    expect(row).toMatchObject({ status: 'queued', destination: 'local', users_done: 0 });
    expect(row.request).toMatchObject({
      fields: ['external_id', 'email'],
      outputFormat: 'gzip',
      customAttributes: null,
      callbackEndpoint: null,
    });

    const status = await env.app.inject({
      method: 'GET',
      url: `/users/export/status?object_prefix=${prefix}`,
      headers: bearer(env.ws.apiKey),
    });
    expect(status.statusCode).toBe(200);
    expect(status.json()).toMatchObject({
      message: 'success',
      status: 'queued',
      segment_id: 'seg-a',
      users_done: 0,
      parts_done: 0,
    });
  });

  it('429 for a second export of a segment whose export is running, naming the limit', async () => {
    const before = await exportsCount();
    const res = await requestExport(env, env.ws.apiKey, valid);
    expect(res.status).toBe(429);
    expect(res.body.message).toMatch(/already running; only one export per segment/);
    expect(await exportsCount()).toBe(before);
  });

  it('download link of a queued export: 404 saying it is not ready; a forged signature: 404', async () => {
    const res = await requestExport(env, env.ws.apiKey, { segment_id: 'seg-b', fields_to_export: ['email'] });
    expect(res.status).toBe(201);
    const url = new URL(String(res.body.url));
    const early = await env.app.inject({ method: 'GET', url: `${url.pathname}${url.search}` });
    expect(early.statusCode).toBe(404);
    expect(early.json().message).toMatch(/not ready yet \(status: queued\)/);
    const forged = await env.app.inject({ method: 'GET', url: `${url.pathname}?signature=${'0'.repeat(64)}` });
    expect(forged.statusCode).toBe(404);
    expect(forged.json().message).toMatch(/signature is invalid/);
    const unsigned = await env.app.inject({ method: 'GET', url: url.pathname });
    expect(unsigned.statusCode).toBe(404);
  });

  it(`429 once ${COMPANY_CAP} exports of the company run, naming the company limit`, async () => {
    expect((await requestExport(env, env.ws.apiKey, { segment_id: 'seg-c', fields_to_export: ['email'] })).status).toBe(
      201,
    );
    const before = await exportsCount();
    const res = await requestExport(env, env.ws.apiKey, { segment_id: 'seg-d', fields_to_export: ['email'] });
    expect(res.status).toBe(429);
    expect(res.body.message).toMatch(new RegExp(`company already has ${COMPANY_CAP} segment exports running`));
    expect(await exportsCount()).toBe(before);
    // The cap is per company: a workspace of another company is unaffected.
    const other = await seedWorkspace(env.ctx.pool);
    await createSegment(env.ctx.pool, other.workspaceId, 'seg-d');
    expect((await requestExport(env, other.apiKey, { segment_id: 'seg-d', fields_to_export: ['email'] })).status).toBe(
      201,
    );
  });

  it('status read: 400 without object_prefix, 404 for an unknown one, 401 without the permission', async () => {
    const missing = await env.app.inject({
      method: 'GET',
      url: '/users/export/status',
      headers: bearer(env.ws.apiKey),
    });
    expect(missing.statusCode).toBe(400);
    expect(missing.json().message).toMatch(/object_prefix/);
    const unknown = await env.app.inject({
      method: 'GET',
      url: '/users/export/status?object_prefix=nope',
      headers: bearer(env.ws.apiKey),
    });
    expect(unknown.statusCode).toBe(404);
    const bare = await env.app.inject({
      method: 'GET',
      url: '/users/export/status?object_prefix=nope',
      headers: bearer(env.ws.bareKey),
    });
    expect(bare.statusCode).toBe(401);
  });
});
