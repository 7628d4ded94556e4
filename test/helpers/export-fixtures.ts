import { execFile } from 'node:child_process';
import { readdir } from 'node:fs/promises';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';
import type { Pool } from '../../src/platform/db/pool.js';
import type { TestEnv } from './context.js';
import { bearer } from './seed.js';

const run = promisify(execFile);

export const RECENT = new Date(Date.now() - 5 * 86_400_000).toISOString();
export const OLD = new Date(Date.now() - 200 * 86_400_000).toISOString();

/**
 * Inserts `count` profiles numbered from `from`: members of the `country = 'US'` segment when `member`, others
 * ('CA') otherwise. Every profile has events inside and outside the 90-day window, and a few absent fields.
 */
export async function insertProfiles(
  pool: Pool,
  workspaceId: string,
  from: number,
  count: number,
  member = true,
): Promise<void> {
  await pool.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, first_name, email, country, dob, total_revenue,
                           custom_attributes, custom_events, purchases, devices, campaigns_received, created_at)
     SELECT $1, 'svc-' || g, 'ext-' || g, ((g::bigint * 7919) % 10000)::int,
            CASE WHEN g % 10 = 0 THEN NULL ELSE 'Name\\' || g || ' "q"' END,
            'user' || g || '@example.com', $4, DATE '1990-01-01' + (g % 1000), g * 1.5,
            jsonb_build_object('tier', g % 3, 'score', g, 'nested', jsonb_build_object('k', NULL)),
            jsonb_build_object(
              'recent_event', jsonb_build_object('name', 'recent_event', 'first', $5::text, 'last', $6::text, 'count', 3),
              'old_event', jsonb_build_object('name', 'old_event', 'first', $5::text, 'last', $5::text, 'count', 7)),
            jsonb_build_object('old_purchase', jsonb_build_object('name', 'old_purchase', 'first', $5::text, 'last', $5::text, 'count', 1)),
            CASE WHEN g % 2 = 0 THEN '[]'::jsonb ELSE jsonb_build_array(jsonb_build_object('model', 'Pixel', 'carrier', NULL, 'device_id', 'd' || g)) END,
            jsonb_build_array(
              jsonb_build_object('name', 'c-new', 'api_campaign_id', 'c1', 'last_received', $6::text),
              jsonb_build_object('name', 'c-old', 'api_campaign_id', 'c2', 'last_received', $5::text)),
            timestamptz '2025-01-01T00:00:00Z'
       FROM generate_series($2::int, $2::int + $3::int - 1) g`,
    [workspaceId, from, count, member ? 'US' : 'CA', OLD, RECENT],
  );
}

export async function createSegment(
  pool: Pool,
  workspaceId: string,
  apiId: string,
  filter: unknown = { attribute: 'country', op: 'eq', value: 'US' },
  archived = false,
) {
  await pool.query(`INSERT INTO segments (workspace_id, api_id, name, filter, archived) VALUES ($1, $2, $3, $4, $5)`, [
    workspaceId,
    apiId,
    `Segment ${apiId}`,
    JSON.stringify(filter),
    archived,
  ]);
}

export async function requestExport(env: TestEnv, key: string, body: unknown) {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/export/segment',
    headers: { ...bearer(key), 'content-type': 'application/json' },
    payload: typeof body === 'string' ? body : JSON.stringify(body),
  });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> };
}

export async function exportStatus(env: TestEnv, key: string, objectPrefix: string) {
  const res = await env.app.inject({
    method: 'GET',
    url: `/users/export/status?object_prefix=${objectPrefix}`,
    headers: bearer(key),
  });
  return { status: res.statusCode, body: res.json() as Record<string, unknown> };
}

/** Polls the status read until the export is ready or failed. */
export async function waitForExport(
  env: TestEnv,
  key: string,
  objectPrefix: string,
  timeoutMs = 60_000,
): Promise<Record<string, unknown>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { body } = await exportStatus(env, key, objectPrefix);
    if (body.status === 'ready' || body.status === 'failed') return body;
    if (Date.now() > deadline)
      throw new Error(`export ${objectPrefix} still ${String(body.status)} after ${timeoutMs} ms`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** The NDJSON lines of one part file on disk, read with the real `unzip` / `gunzip` command-line tools. */
export async function readPartFile(file: string): Promise<string[]> {
  const { stdout } = file.endsWith('.zip')
    ? await run('unzip', ['-p', file], { maxBuffer: 512 * 1024 * 1024 })
    : await run('gunzip', ['-c', file], { maxBuffer: 512 * 1024 * 1024 });
  const text = stdout.toString();
  expectEndsWithNewline(text);
  return text.split('\n').slice(0, -1);
}

function expectEndsWithNewline(text: string): void {
  if (text.length > 0 && !text.endsWith('\n')) throw new Error('part does not end with a newline');
}

/** Lists entries of a zip file with `unzip -l`. */
export async function zipEntries(file: string): Promise<string[]> {
  const { stdout } = await run('unzip', ['-Z1', file]);
  return stdout.split('\n').filter(Boolean);
}

/** A real HTTP receiver of export callbacks on a free loopback port: every body it got, answered 204. */
export async function startCallbackReceiver(): Promise<{
  url: string;
  received: Array<Record<string, unknown>>;
  close(): void;
}> {
  const received: Array<Record<string, unknown>> = [];
  const server = createServer((req, res) => {
    let data = '';
    req.on('data', (c) => (data += c));
    req.on('end', () => {
      received.push(JSON.parse(data));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/cb`,
    received,
    close: () => server.close(),
  };
}

/** How many times each external_id appears in the parts a manifest lists (every member once: every count 1). */
export async function exportedIdCounts(dir: string, parts: { file: string }[]): Promise<Map<string, number>> {
  const count = new Map<string, number>();
  for (const p of parts) {
    for (const line of await readPartFile(path.join(dir, p.file))) {
      const id = JSON.parse(line).external_id as string;
      count.set(id, (count.get(id) ?? 0) + 1);
    }
  }
  return count;
}

/** What an export writes beside its parts: the schema, the manifest and, last, the completion marker. */
export const CONTROL_FILES = ['schema.json', 'manifest.json', '_SUCCESS'];

/** The external_id of every line of every part in a local export directory (the control files aside). */
export async function exportedExternalIds(dir: string): Promise<string[]> {
  const ids: string[] = [];
  for (const name of await readdir(dir)) {
    if (CONTROL_FILES.includes(name)) continue;
    for (const line of await readPartFile(path.join(dir, name))) ids.push(JSON.parse(line).external_id);
  }
  return ids;
}
