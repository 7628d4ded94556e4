import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { describe, expect, it, beforeAll } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import { forgetExportBases } from '../../src/pipelines/exports/incremental.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { MAX_MEMBER_LAYERS } from '../../src/pipelines/exports/member-layers.js';
import { drainThrough } from '../../src/pipelines/ingest/apply/drain-staging.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { bearer } from '../helpers/seed.js';
import { captureLogs, useTestEnv } from '../helpers/context.js';
import {
  createSegment,
  insertProfiles,
  readPartFile,
  requestExport,
  waitForExport,
} from '../helpers/export-fixtures.js';

// Deltas that read the change log (migration 0240) and record their members as layers: exact through a chain longer
// than MAX_MEMBER_LAYERS, whatever path wrote the profile; compared in full where the log cannot tell; pruned to what
// kept exports need. Three shards, so that bases' snapshots are per range.
const logs = captureLogs();
const env = useTestEnv({
  config: { EXPORT_SHARD_BUCKETS: '3334', LOG_LEVEL: 'info' },
  workspaces: ['ws'],
  logDestination: logs.destination,
});
const FIELDS = ['external_id', 'service_id', 'first_name', 'country'];
/** ext-1..400 start in the segment (US), ext-401..600 outside it (CA). */
const model = new Map<string, { country: string; firstName: string | null; deleted: boolean }>();

beforeAll(async () => {
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'us');
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 400);
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 401, 200, false);
  const { rows } = await env.ctx.pool.query(
    `SELECT external_id, country, first_name FROM profiles WHERE workspace_id = $1`,
    [env.ws.workspaceId],
  );
  for (const r of rows) model.set(r.external_id, { country: r.country, firstName: r.first_name, deleted: false });
  env.startWorkers([segmentExportJob, exportShardJob]);
}, 120_000);

interface ExportLines {
  id: string;
  manifest: ExportManifest;
  users: Array<Record<string, unknown>>;
  removed: Array<Record<string, unknown>>;
}

async function runExport(segment: string, changesSince?: string): Promise<ExportLines> {
  const res = await requestExport(env, env.ws.apiKey, {
    segment_id: segment,
    fields_to_export: FIELDS,
    ...(changesSince ? { changes_since: changesSince } : {}),
  });
  expect(res.status, JSON.stringify(res.body)).toBe(201);
  const status = await waitForExport(env, env.ws.apiKey, res.body.object_prefix as string);
  expect(status.status, JSON.stringify(status)).toBe('ready');
  const file = (key: string) => path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), key);
  const manifest = JSON.parse(await readFile(file(status.manifest_key as string), 'utf8')) as ExportManifest;
  const { rows } = await env.ctx.pool.query<{ id: string }>(`SELECT id FROM exports WHERE object_prefix = $1`, [
    manifest.object_prefix,
  ]);
  const out: ExportLines = { id: rows[0]!.id, manifest, users: [], removed: [] };
  for (const part of manifest.parts)
    for (const line of await readPartFile(file(part.key))) out[part.kind].push(JSON.parse(line));
  return out;
}

/** The method each shard of an export chose, from the worker's log. */
function methodsOf(exportId: string): Array<{ method: string; reason: string }> {
  return logs.lines
    .map((l) => JSON.parse(l) as { msg?: string; exportId?: string; method?: string; reason?: string })
    .filter((l) => l.msg === 'incremental export shard method chosen' && l.exportId === exportId)
    .map((l) => ({ method: l.method!, reason: l.reason! }));
}

const ids = (lines: Array<Record<string, unknown>>) => lines.map((l) => l.external_id as string).sort();
const isMember = (id: string) => {
  const p = model.get(id);
  return !!p && !p.deleted && p.country === 'US';
};

async function track(attributes: Array<Record<string, unknown>>): Promise<void> {
  const res = await env.app.inject({
    method: 'POST',
    url: '/users/track',
    headers: { ...bearer(env.ws.apiKey), 'content-type': 'application/json' },
    payload: JSON.stringify({ attributes }),
  });
  expect(res.statusCode, res.body).toBe(201);
  await drainThrough(env.ctx.pool, undefined, {
    maxRows: 500,
    partitions: env.config.INGEST_PARTITIONS,
    log: env.ctx.log,
    metrics: env.ctx.metrics,
  });
}

/** Deterministic picks of live profiles, different each round. */
function pick(round: number, salt: number, count: number, where: (id: string) => boolean): string[] {
  const live = [...model.keys()].filter((id) => !model.get(id)!.deleted && where(id)).sort();
  const out: string[] = [];
  for (let i = 0; out.length < count && i < live.length * 3; i++) {
    const id = live[(round * 131 + salt * 17 + i * 37) % live.length]!;
    if (!out.includes(id)) out.push(id);
  }
  return out;
}

/**
 * One round of writes by every path that writes profiles: SQL UPDATE, /users/track through the ingestion worker's
 * apply, INSERT ... ON CONFLICT DO UPDATE, INSERT of new profiles, DELETE. Returns the profiles it wrote.
 */
async function writeRound(round: number, nextId: { n: number }): Promise<Set<string>> {
  const db = env.ctx.pool;
  const ws = env.ws.workspaceId;
  const touched = new Set<string>();
  const edited = pick(round, 1, 8, () => true);
  await db.query(`UPDATE profiles SET first_name = $3 WHERE workspace_id = $1 AND external_id = ANY($2)`, [
    ws,
    edited,
    `round-${round}`,
  ]);
  for (const id of edited) {
    model.get(id)!.firstName = `round-${round}`;
    touched.add(id);
  }

  const leaving = pick(round, 2, 5, (id) => isMember(id) && !touched.has(id));
  const joining = pick(round, 3, 5, (id) => !isMember(id) && !touched.has(id));
  const loggedRows = async () =>
    (
      await db.query(
        `SELECT count(*)::int AS n FROM profile_changes c JOIN profiles p ON p.id = c.profile_id WHERE p.external_id = ANY($1)`,
        [[...leaving, ...joining]],
      )
    ).rows[0].n as number;
  const loggedBefore = await loggedRows();
  await track([
    ...leaving.map((external_id) => ({ external_id, country: 'CA' })),
    ...joining.map((external_id) => ({ external_id, country: 'US' })),
  ]);
  // Ingestion's apply logs its rows itself, with the row trigger quiet: once each, not twice.
  expect((await loggedRows()) - loggedBefore).toBe(leaving.length + joining.length);
  for (const [list, country] of [
    [leaving, 'CA'],
    [joining, 'US'],
  ] as const) {
    for (const id of list) {
      model.get(id)!.country = country;
      touched.add(id);
    }
  }

  const flipped = pick(round, 4, 1, (id) => !touched.has(id))[0]!;
  const to = isMember(flipped) ? 'CA' : 'US';
  await db.query(
    `INSERT INTO profiles (workspace_id, service_id, external_id, random_bucket, country) VALUES ($1, $2, $3, 0, $4)
     ON CONFLICT (workspace_id, service_id) DO UPDATE SET country = excluded.country`,
    [ws, `svc-${flipped.slice(4)}`, flipped, to],
  );
  model.get(flipped)!.country = to;
  touched.add(flipped);

  const deleted = pick(round, 5, 2, (id) => !touched.has(id));
  await db.query(`DELETE FROM profiles WHERE workspace_id = $1 AND external_id = ANY($2)`, [ws, deleted]);
  for (const id of deleted) {
    model.get(id)!.deleted = true;
    touched.add(id);
  }

  for (const member of [true, false]) {
    const n = nextId.n++;
    await insertProfiles(db, ws, n, 1, member);
    const { rows } = await db.query(`SELECT first_name FROM profiles WHERE workspace_id = $1 AND external_id = $2`, [
      ws,
      `ext-${n}`,
    ]);
    model.set(`ext-${n}`, { country: member ? 'US' : 'CA', firstName: rows[0].first_name, deleted: false });
    touched.add(`ext-${n}`);
  }
  return touched;
}

describe('incremental exports from the change log', () => {
  it(`stay exact through a chain of deltas longer than ${MAX_MEMBER_LAYERS} layers, whatever wrote the profiles`, async () => {
    let base = await runExport('us');
    expect(ids(base.users)).toEqual([...model.keys()].filter(isMember).sort());
    const nextId = { n: 10_001 };
    const layerCounts: number[] = [];
    for (let round = 1; round <= MAX_MEMBER_LAYERS + 2; round++) {
      const memberBefore = new Map([...model.keys()].map((id) => [id, isMember(id)]));
      const touched = await writeRound(round, nextId);
      const delta = await runExport('us', base.manifest.object_prefix);
      const expectedUsers = [...touched].filter(isMember).sort();
      const expectedRemoved = [...touched].filter((id) => memberBefore.get(id) && !isMember(id)).sort();
      expect(ids(delta.users), `round ${round} users`).toEqual(expectedUsers);
      expect(ids(delta.removed), `round ${round} removed`).toEqual(expectedRemoved);
      for (const u of delta.users)
        expect(u.first_name ?? null, `${u.external_id as string} in round ${round}`).toBe(
          model.get(u.external_id as string)!.firstName,
        );
      const methods = methodsOf(delta.id);
      expect(methods.length).toBeGreaterThan(0);
      for (const m of methods) expect(m.method, m.reason).toBe('changes-log');
      const { rows } = await env.ctx.pool.query(
        `SELECT array_length(member_layers, 1) AS n FROM exports WHERE id = $1`,
        [delta.id],
      );
      layerCounts.push(rows[0].n);
      base = delta;
    }
    // Layers grow to the limit, then the next delta records its members whole again.
    expect(layerCounts).toEqual([2, 3, 4, 5, 6, 7, 8, 1, 2, 3]);
    // A delta records only membership changes: this chain's last delta holds one row per joiner and leaver.
    const changes = await env.ctx.pool.query(
      `SELECT count(*)::int AS n FROM export_member_changes WHERE export_id = $1`,
      [base.id],
    );
    expect(changes.rows[0].n).toBeLessThanOrEqual(base.users.length + base.removed.length);
    // Nothing changed since: an empty delta; and a full export holds exactly the model's members.
    const none = await runExport('us', base.manifest.object_prefix);
    expect(none.users).toHaveLength(0);
    expect(none.removed).toHaveLength(0);
    const full = await runExport('us');
    expect(ids(full.users)).toEqual([...model.keys()].filter(isMember).sort());
  }, 180_000);

  it("compares in full when the segment's filter changed since the base: members that joined without a write are there", async () => {
    await createSegment(env.ctx.pool, env.ws.workspaceId, 'edited');
    const base = await runExport('edited');
    await env.ctx.pool.query(`UPDATE segments SET filter = $2 WHERE workspace_id = $1 AND api_id = 'edited'`, [
      env.ws.workspaceId,
      JSON.stringify({ attribute: 'country', op: 'in', value: ['US', 'CA'] }),
    ]);
    const delta = await runExport('edited', base.manifest.object_prefix);
    const canadians = [...model.keys()]
      .filter((id) => !model.get(id)!.deleted && model.get(id)!.country === 'CA')
      .sort();
    expect(canadians.length).toBeGreaterThan(100);
    expect(ids(delta.users)).toEqual(canadians);
    expect(delta.removed).toHaveLength(0);
    for (const m of methodsOf(delta.id))
      expect(m).toEqual({ method: 'full-compare', reason: "the segment's filter changed since the base export" });
    // Relative to that delta the filter is the one it recorded: the log again, and nothing changed.
    const next = await runExport('edited', delta.manifest.object_prefix);
    expect(next.users).toHaveLength(0);
    expect(next.removed).toHaveLength(0);
    for (const m of methodsOf(next.id)) expect(m.method).toBe('changes-log');
  }, 120_000);

  it('compares in full when membership moves with time (within_days)', async () => {
    await createSegment(env.ctx.pool, env.ws.workspaceId, 'recent', { custom_event: 'recent_event', within_days: 365 });
    const base = await runExport('recent');
    expect(base.users.length).toBeGreaterThan(0);
    const delta = await runExport('recent', base.manifest.object_prefix);
    expect(delta.users).toHaveLength(0);
    const methods = methodsOf(delta.id);
    expect(methods.length).toBeGreaterThan(0);
    for (const m of methods)
      expect(m).toEqual({ method: 'full-compare', reason: "the segment's membership moves with time (within_days)" });
  }, 120_000);

  it('prunes the log below what kept exports may compare with, and keeps the layers a kept export is made of', async () => {
    const db = env.ctx.pool;
    const ws = env.ws.workspaceId;
    const [a, b, c] = [...model.keys()].filter(isMember).sort();
    const first = await runExport('us');
    await db.query(`UPDATE profiles SET first_name = 'pruned-1' WHERE workspace_id = $1 AND external_id = $2`, [ws, a]);
    const d1 = await runExport('us', first.manifest.object_prefix);
    await db.query(`UPDATE profiles SET first_name = 'pruned-2' WHERE workspace_id = $1 AND external_id = $2`, [ws, b]);
    const d2 = await runExport('us', d1.manifest.object_prefix);
    const logged = async () =>
      (await db.query(`SELECT count(*)::int AS n FROM profile_changes WHERE workspace_id = $1`, [ws])).rows[0]
        .n as number;
    const before = await logged();

    // Retention 0: every superseded export goes, but those d2's members are layered on (d1, first) stay.
    await forgetExportBases(db, 0, 30);
    const kept = await db.query<{ id: string }>(
      `SELECT id FROM exports WHERE workspace_id = $1 AND members_forgotten_at IS NULL ORDER BY created_at`,
      [ws],
    );
    const keptIds = kept.rows.map((r) => r.id);
    expect(keptIds).toEqual(expect.arrayContaining([first.id, d1.id, d2.id]));
    // What stays in the log is at or above the oldest snapshot a kept export holds, and less than before.
    const bound = await db.query(
      `SELECT min(pg_snapshot_xmin(d.snapshot)) AS xmin FROM export_shards_done d JOIN exports e ON e.id = d.export_id
        WHERE e.workspace_id = $1 AND e.members_forgotten_at IS NULL AND e.status <> 'failed'`,
      [ws],
    );
    const below = await db.query(
      `SELECT count(*)::int AS n FROM profile_changes WHERE workspace_id = $1 AND xid < $2::xid8`,
      [ws, bound.rows[0].xmin],
    );
    expect(below.rows[0].n).toBe(0);
    expect(await logged()).toBeLessThan(before);

    // A delta relative to the kept chain is still exact after pruning.
    await db.query(`UPDATE profiles SET first_name = 'pruned-3' WHERE workspace_id = $1 AND external_id = $2`, [ws, c]);
    const d3 = await runExport('us', d2.manifest.object_prefix);
    expect(ids(d3.users)).toEqual([c]);
    expect(d3.users[0]!.first_name).toBe('pruned-3');

    // A new full export supersedes the chain: the whole chain goes in one pass, each layer after the exports on it.
    const latest = await runExport('us');
    await forgetExportBases(db, 0, 30);
    const left = await db.query<{ id: string }>(
      `SELECT id FROM exports WHERE workspace_id = $1 AND segment_id = (SELECT segment_id FROM exports WHERE id = $2) AND members_forgotten_at IS NULL`,
      [ws, latest.id],
    );
    expect(left.rows.map((r) => r.id)).toEqual([latest.id]);
    for (const gone of [first.id, d1.id, d2.id, d3.id]) {
      const rows = await db.query(
        `SELECT (SELECT count(*) FROM export_members WHERE export_id = $1) + (SELECT count(*) FROM export_member_changes WHERE export_id = $1) AS n`,
        [gone],
      );
      expect(Number(rows.rows[0].n), gone).toBe(0);
    }
    // With no export of the workspace before it, the log keeps nothing older than the latest's snapshots.
    const delta = await runExport('us', latest.manifest.object_prefix);
    expect(delta.users).toHaveLength(0);
  }, 120_000);
});
