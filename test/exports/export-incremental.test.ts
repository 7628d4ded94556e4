import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, beforeAll } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { forgetExportBases } from '../../src/pipelines/exports/incremental.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import {
  createSegment,
  insertProfiles,
  readPartFile,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';

// Three shards, so that a base's snapshots and member lists are per range.
const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '3334' }, workspaces: ['ws', 'other'] });
const FIELDS = ['external_id', 'service_id', 'first_name', 'custom_events'];

beforeAll(async () => {
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'us');
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'everyone', { all: [] });
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 3_000);
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 10_001, 500, false);
  env.startWorkers([segmentExportJob, exportShardJob]);
}, 120_000);

interface ExportLines {
  manifest: ExportManifest;
  users: Array<Record<string, unknown>>;
  removed: Array<Record<string, unknown>>;
}

async function runExport(body: Record<string, unknown>): Promise<ExportLines> {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: 'us',
    fields_to_export: FIELDS,
    output_format: 'gzip',
    ...body,
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const status = await waitForExport(env, env.ws.apiKey, res.body.object_prefix as string);
  expect(status.status, JSON.stringify(status)).toBe('ready');
  const file = (key: string) => path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), key);
  const manifest = JSON.parse(await readFile(file(status.manifest_key as string), 'utf8')) as ExportManifest;
  const out: ExportLines = { manifest, users: [], removed: [] };
  for (const part of manifest.parts) {
    expect(part.file.startsWith('removed-')).toBe(part.kind === 'removed');
    for (const line of await readPartFile(file(part.key))) out[part.kind].push(JSON.parse(line));
  }
  return out;
}

const ids = (lines: Array<Record<string, unknown>>) => lines.map((l) => l.external_id as string).sort();
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => `ext-${from + i}`);

describe('incremental exports (changes_since)', () => {
  it('holds exactly the changed and joined members, and names those that left or were deleted, each once', async () => {
    const full = await runExport({});
    expect(full.users).toHaveLength(3_000);
    expect(full.removed).toHaveLength(0);
    expect(full.manifest.changes_since).toBeUndefined();

    const db = env.ctx.pool;
    const ws = env.ws.workspaceId;
    const extIn = (list: string[]) => [ws, list];
    await db.query(
      `UPDATE profiles SET first_name = 'Edited' WHERE workspace_id = $1 AND external_id = ANY($2)`,
      extIn(range(1, 10)),
    );
    await db.query(
      `UPDATE profiles SET custom_events = custom_events || jsonb_build_object('new_event', jsonb_build_object('name', 'new_event', 'first', '2026-11-01T00:00:00.000Z', 'last', '2026-11-01T00:00:00.000Z', 'count', 1))
        WHERE workspace_id = $1 AND external_id = ANY($2)`,
      extIn(range(101, 5)),
    );
    await db.query(
      `UPDATE profiles SET country = 'CA' WHERE workspace_id = $1 AND external_id = ANY($2)`,
      extIn(range(201, 20)),
    );
    await db.query(
      `UPDATE profiles SET country = 'US' WHERE workspace_id = $1 AND external_id = ANY($2)`,
      extIn(range(10_001, 15)),
    );
    await db.query(`DELETE FROM profiles WHERE workspace_id = $1 AND external_id = ANY($2)`, extIn(range(301, 7)));
    await insertProfiles(db, ws, 20_001, 12);
    // Another workspace's changes never show.
    await insertProfiles(db, env.other.workspaceId, 30_001, 5);

    const delta = await runExport({ changes_since: full.manifest.object_prefix });
    expect(delta.manifest.changes_since).toBe(full.manifest.object_prefix);
    expect(ids(delta.users)).toEqual(
      [...range(1, 10), ...range(101, 5), ...range(10_001, 15), ...range(20_001, 12)].sort(),
    );
    expect(delta.users.find((u) => u.external_id === 'ext-1')?.first_name).toBe('Edited');
    expect(ids(delta.removed)).toEqual([...range(201, 20), ...range(301, 7)].sort());
    for (const r of delta.removed)
      expect(r).toEqual({ external_id: r.external_id, service_id: `svc-${(r.external_id as string).slice(4)}` });
    expect(delta.manifest.users).toBe(42);
    expect(delta.manifest.removed).toBe(27);

    // Relative to the incremental one, nothing changed: an empty delta (its member list is the full one).
    const none = await runExport({ changes_since: delta.manifest.object_prefix });
    expect(none.users).toHaveLength(0);
    expect(none.removed).toHaveLength(0);
  }, 120_000);

  it('misses no write committed while it runs: each is in this export or the next', async () => {
    const base = await runExport({});
    const db = env.ctx.pool;
    const written = new Map<string, string>();
    let stop = false;
    let round = 0;
    const writer = (async () => {
      while (!stop) {
        round++;
        // Members only (the first test moved ext-201..307 out of the segment).
        const batch = range(1_000 + ((round * 37) % 1_975), 25);
        await db.query(`UPDATE profiles SET first_name = $3 WHERE workspace_id = $1 AND external_id = ANY($2)`, [
          env.ws.workspaceId,
          batch,
          `round-${round}`,
        ]);
        for (const id of batch) written.set(id, `round-${round}`);
        await new Promise((r) => setTimeout(r, 5));
      }
    })();
    const during = await runExport({ changes_since: base.manifest.object_prefix });
    stop = true;
    await writer;
    const after = await runExport({ changes_since: during.manifest.object_prefix });
    expect(written.size).toBeGreaterThan(25);
    const latest = new Map<string, unknown>();
    for (const u of [...during.users, ...after.users]) latest.set(u.external_id as string, u.first_name);
    for (const [id, name] of written) expect(latest.get(id), id).toBe(name);
    expect(new Set(ids(during.users)).size).toBe(during.users.length);
  }, 120_000);

  it('refuses a changes_since it cannot be relative to, naming it, and records nothing', async () => {
    const other = await requestExport(env, env.ws.apiKey, {
      segment_id: 'everyone',
      fields_to_export: ['external_id'],
    });
    expect(other.status).toBe(201);
    const otherPrefix = other.body.object_prefix as string;
    const before = await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports');
    const cases: Array<[unknown, RegExp]> = [
      ['no-such-prefix', /changes_since "no-such-prefix" does not name an export/],
      [otherPrefix, /another segment/],
      [42, /changes_since must be a string/],
      ['', /must not be empty/],
      // Hostile text reaches SQL only as a parameter, and is refused like any unknown prefix: never a 500.
      ['abc\u0000def', /changes_since/],
      ['../../etc/passwd', /changes_since "..\/..\/etc\/passwd" does not name an export/],
      ['\ud800', /changes_since/],
      ["x' OR '1'='1", /does not name an export/],
    ];
    for (const [changesSince, message] of cases) {
      const res = await requestExport(env, env.ws.apiKey, {
        segment_id: 'us',
        fields_to_export: FIELDS,
        changes_since: changesSince,
      });
      expect(res.status, String(changesSince)).toBe(400);
      expect(res.body.message).toMatch(message);
    }
    const unfinished = await requestExport(env, env.ws.apiKey, {
      segment_id: 'everyone',
      fields_to_export: ['external_id'],
      changes_since: otherPrefix,
    });
    expect([400, 429]).toContain(unfinished.status);
    await waitForExport(env, env.ws.apiKey, otherPrefix);
    const noKey = await requestExport(env, env.ws.apiKey, {
      segment_id: 'everyone',
      fields_to_export: ['first_name'],
      changes_since: otherPrefix,
    });
    expect(noKey.status).toBe(400);
    expect(noKey.body.message).toMatch(/external_id or service_id/);
    // Another workspace cannot name this one's export.
    const foreign = await requestExport(env, env.other.apiKey, {
      segment_id: 'everyone',
      fields_to_export: ['external_id'],
      changes_since: otherPrefix,
    });
    expect(foreign.status).toBe(400);
    const after = await env.ctx.pool.query('SELECT count(*)::int AS n FROM exports');
    expect(after.rows[0].n).toBe(before.rows[0].n);
  }, 120_000);

  it('forgets member lists past retention but the latest of each segment, and then refuses them as bases', async () => {
    const first = await runExport({});
    const latest = await runExport({});
    // Retention 0 days: every superseded ready export of the segment goes.
    const forgotten = await forgetExportBases(env.ctx.pool, 0, env.config.TOMBSTONE_RETENTION_DAYS);
    expect(forgotten.exports).toBeGreaterThan(0);
    const refused = await requestExport(env, env.ws.apiKey, {
      segment_id: 'us',
      fields_to_export: FIELDS,
      changes_since: first.manifest.object_prefix,
    });
    expect(refused.status).toBe(400);
    expect(refused.body.message).toMatch(/no longer kept/);
    const kept = await env.ctx.pool.query(
      'SELECT count(*)::int AS n FROM export_members m JOIN exports e ON e.id = m.export_id WHERE e.object_prefix = $1',
      [latest.manifest.object_prefix],
    );
    expect(kept.rows[0].n).toBeGreaterThan(0);
    const delta = await runExport({ changes_since: latest.manifest.object_prefix });
    expect(delta.users).toHaveLength(0);
  }, 120_000);
});
