import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { exportCallbackJob } from '../../jobs/export-callback.js';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { captureLogs, createTestEnv, type TestEnv } from '../helpers/context.js';
import { createSegment, insertProfiles, requestExport, waitForExport } from '../helpers/export-fixtures.js';
import { startS3rver, type RunningS3 } from '../helpers/s3rver.js';
import { scimHeaders } from '../helpers/scim.js';
import { bearer, createScimToken, seedWorkspace, type SeededWorkspace } from '../helpers/seed.js';

// Every line the process logs, at info, as the service writes it.
const { lines: logged, destination: capture } = captureLogs();

let env: TestEnv;
let ws: SeededWorkspace;
let scimToken: string;
let s3: RunningS3;

/** Every run of `size` characters of a secret's random part (after its public `ces_key_` / `ces_scim_` prefix). */
function fragments(secret: string, size: number): string[] {
  const random = secret.replace(/^ces_(key|scim)_/, '');
  return Array.from({ length: random.length - size + 1 }, (_, i) => random.slice(i, i + size));
}

/** In a short body: any 4 characters of the secret's random part. */
const leaks = (text: string, secret: string) => fragments(secret, 4).filter((f) => text.includes(f));
/**
 * In the logs, whose ids and hashes would match short random runs by chance: the first 12 characters (what refusals
 * used to repeat) and any 10 characters of the random part.
 */
const logLeaks = (text: string, secret: string) =>
  [secret.slice(0, 12), ...fragments(secret, 10)].filter((f) => text.includes(f));

beforeAll(async () => {
  [env, s3] = await Promise.all([
    createTestEnv(
      { LOG_LEVEL: 'info', EXPORT_SHARD_BUCKETS: '10000', EXPORT_SHARD_ATTEMPTS: '1' },
      { logDestination: capture },
    ),
    startS3rver(),
  ]);
  ws = await seedWorkspace(env.ctx.pool);
  scimToken = await createScimToken(env.ctx.pool, ws.companyId);
  env.startWorkers([segmentExportJob, exportShardJob, exportCallbackJob]);
});
afterAll(async () => {
  await env?.close();
  await s3?.close();
});

describe('refusals repeat nothing of a presented secret', () => {
  it('an unknown API key: 401 without any fragment of it, in the body or the log', async () => {
    const key = `ces_key_${randomBytes(24).toString('base64url')}`;
    const res = await env.app.inject({ method: 'GET', url: '/segments/list', headers: bearer(key) });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toEqual({ message: 'Invalid API key: it is unknown or has been revoked' });
    expect(leaks(res.body, key)).toEqual([]);
    expect(logLeaks(logged.join(''), key)).toEqual([]);
  });

  it('an unknown SCIM token: 401 without any fragment of it, in the body or the log', async () => {
    const token = `ces_scim_${randomBytes(24).toString('base64url')}`;
    const res = await env.app.inject({
      method: 'GET',
      url: '/scim/v2/Users?filter=userName eq "x@example.com"',
      headers: scimHeaders(token),
    });
    expect(res.statusCode).toBe(401);
    expect(res.json().detail).toBe('Invalid SCIM token: it is unknown or has been revoked');
    expect(leaks(res.body, token)).toEqual([]);
    expect(logLeaks(logged.join(''), token)).toEqual([]);
  });

  it('a secret of any shape (not ours) is not echoed either', async () => {
    const key = randomBytes(30).toString('hex');
    const res = await env.app.inject({ method: 'GET', url: '/segments/list', headers: bearer(key) });
    expect(res.statusCode).toBe(401);
    expect(leaks(res.body, key)).toEqual([]);
    expect(logLeaks(logged.join(''), key)).toEqual([]);
  });

  it('valid keys and tokens used on every request never reach a log line', async () => {
    const ok = await env.app.inject({
      method: 'GET',
      url: '/scim/v2/Users?filter=userName eq "x@example.com"',
      headers: scimHeaders(scimToken),
    });
    expect(ok.statusCode).toBe(200);
    const text = logged.join('');
    expect(logLeaks(text, ws.apiKey)).toEqual([]);
    expect(logLeaks(text, scimToken)).toEqual([]);
  });
});

describe('signed download links are bearer credentials: never logged', () => {
  it('logs the request for a download link (and for a tampered one) without its signature', async () => {
    await createSegment(env.ctx.pool, ws.workspaceId, 'all-us');
    await insertProfiles(env.ctx.pool, ws.workspaceId, 1, 20);
    const started = await requestExport(env, ws.apiKey, { segment_id: 'all-us', fields_to_export: ['external_id'] });
    const done = await waitForExport(env, ws.apiKey, String(started.body.object_prefix));
    const url = new URL(String(done.url));
    const signature = url.searchParams.get('signature')!;
    expect(signature).toMatch(/^[0-9a-f]{64}$/);

    const before = logged.length;
    const res = await env.app.inject({ method: 'GET', url: url.pathname + url.search });
    expect(res.statusCode).toBe(200);
    const tampered = `${signature.slice(0, 63)}${signature[63] === '0' ? '1' : '0'}`;
    const bad = await env.app.inject({
      method: 'GET',
      url: `${url.pathname}?signature=${tampered}&token=abcdef123456`,
    });
    expect(bad.statusCode).toBe(404);

    const lines = logged.slice(before).join('');
    // The requests were logged, with their route and the names of their query parameters, but no signature and no
    // other credential parameter.
    expect(lines).toContain('"url":"/downloads/segment-export/:file","query":["signature"]');
    expect(lines).toContain('"query":["signature","token"]');
    expect(lines).not.toContain(signature);
    expect(lines).not.toContain(tampered);
    expect(lines).not.toContain(signature.slice(0, 16));
    expect(lines).not.toContain('abcdef123456');
    // Nor any earlier line (the status read returned the link; the export's own lines must not carry it).
    expect(logged.join('')).not.toContain(signature);
  });

  it('keeps the signature out of metric labels', async () => {
    const res = await env.app.inject({ method: 'GET', url: '/metrics' });
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('route="/downloads/segment-export/:file"');
    expect(res.body).not.toMatch(/signature=[0-9a-f]/);
  });
});

describe('request bodies are JSON in UTF-8 only', () => {
  const post = (contentType: string, payload: Buffer | string) =>
    env.app.inject({
      method: 'POST',
      url: '/users/track',
      headers: { ...bearer(ws.apiKey), 'content-type': contentType },
      payload,
    });
  const body = JSON.stringify({ attributes: [{ external_id: 'charset-user', first_name: 'Zoë' }] });

  it.each(['utf-16', 'UTF-16LE', 'iso-8859-1', 'latin1', '"utf-16"', 'bogus'])(
    'answers 415 for charset=%s and stores nothing',
    async (charset) => {
      const payload = charset.toLowerCase().includes('utf-16')
        ? Buffer.from(body, 'utf16le')
        : Buffer.from(body, 'latin1');
      const res = await post(`application/json; charset=${charset}`, payload);
      expect(res.statusCode).toBe(415);
      expect(res.json().message).toMatch(/UTF-8/);
      const { rowCount } = await env.ctx.pool.query(
        'SELECT 1 FROM profiles WHERE workspace_id = $1 AND external_id = $2',
        [ws.workspaceId, 'charset-user'],
      );
      expect(rowCount).toBe(0);
    },
  );

  it.each([
    'application/json',
    'application/json; charset=utf-8',
    'application/json;charset="UTF-8"',
    'application/json; charset=utf8',
  ])('accepts %s', async (contentType) => {
    const res = await post(contentType, body);
    expect(res.statusCode).toBe(201);
  });

  it('applies the same rule to SCIM bodies', async () => {
    const res = await env.app.inject({
      method: 'POST',
      url: '/scim/v2/Users',
      headers: { ...scimHeaders(scimToken), 'content-type': 'application/scim+json; charset=utf-16' },
      payload: Buffer.from('{}', 'utf16le'),
    });
    expect(res.statusCode).toBe(415);
  });
});

describe('bucket credentials', () => {
  it('stay out of logs, the export status and the callback error when the bucket refuses them', async () => {
    const other = await seedWorkspace(env.ctx.pool);
    const accessKeyId = `AKIA${randomBytes(8).toString('hex').toUpperCase()}`;
    const secretAccessKey = randomBytes(30).toString('base64url');
    const destination = { ...s3.destination, credentials: { accessKeyId, secretAccessKey } };
    await env.ctx.pool.query('UPDATE workspaces SET export_destination = $2 WHERE id = $1', [
      other.workspaceId,
      JSON.stringify(destination),
    ]);
    await createSegment(env.ctx.pool, other.workspaceId, 'to-s3');
    await insertProfiles(env.ctx.pool, other.workspaceId, 500, 10);
    const started = await requestExport(env, other.apiKey, { segment_id: 'to-s3', fields_to_export: ['external_id'] });
    expect(started.status).toBe(201);
    const done = await waitForExport(env, other.apiKey, String(started.body.object_prefix));
    expect(done.status).toBe('failed');
    const seen = `${JSON.stringify(done)}\n${logged.join('')}`;
    expect(seen).not.toContain(secretAccessKey);
    expect(seen).not.toContain(secretAccessKey.slice(0, 12));
    // S3 repeats the access key id in its refusal; the logs do not.
    expect(logged.join('')).not.toContain(accessKeyId);
  });
});
