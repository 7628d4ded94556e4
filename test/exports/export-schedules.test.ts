import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../../jobs/export-shard.js';
import { scheduledExportJob } from '../../jobs/scheduled-export.js';
import { segmentExportJob } from '../../jobs/segment-export.js';
import type { ExportManifest } from '../../src/pipelines/exports/finish/manifest.js';
import { SCHEDULED_EXPORT_QUEUE } from '../../src/platform/queues/scheduled-export.js';
import { runScheduledExport, syncExportSchedules } from '../../src/pipelines/exports/request/schedules.js';
import { localWorkspaceDir } from '../../src/platform/storage/local-store.js';
import { useTestEnv } from '../helpers/context.js';
import { createSegment, insertProfiles, readPartFile, waitForExport } from '../helpers/export-fixtures.js';

const env = useTestEnv({ config: { EXPORT_SHARD_BUCKETS: '5000' }, workspaces: ['ws'] });
let scheduleId: string;

beforeAll(async () => {
  await createSegment(env.ctx.pool, env.ws.workspaceId, 'nightly');
  await insertProfiles(env.ctx.pool, env.ws.workspaceId, 1, 1_200);
  const segment = (await env.ctx.pool.query(`SELECT id FROM segments WHERE api_id = 'nightly'`)).rows[0].id;
  // Every second (BullMQ cron patterns take an optional seconds field), so the test does not wait for a minute.
  scheduleId = (
    await env.ctx.pool.query(
      `INSERT INTO scheduled_exports (workspace_id, name, segment_id, cron, fields_to_export, output_format)
       VALUES ($1, 'nightly-crm', $2, '* * * * * *', ARRAY['external_id', 'email'], 'gzip') RETURNING id`,
      [env.ws.workspaceId, segment],
    )
  ).rows[0].id;
  await env.ctx.pool.query(
    `INSERT INTO scheduled_exports (workspace_id, name, segment_id, cron, fields_to_export, enabled)
     VALUES ($1, 'disabled-one', $2, '0 3 * * *', ARRAY['email'], false)`,
    [env.ws.workspaceId, segment],
  );
});

let workersStarted = false;
/** The scheduled-export worker (it syncs the schedulers when it starts) and the export workers, once per file. */
function startWorkersOnce(): void {
  if (workersStarted) return;
  workersStarted = true;
  env.startWorkers([scheduledExportJob, segmentExportJob, exportShardJob]);
}

async function schedulerIds(): Promise<string[]> {
  return (await env.ctx.queues.get(SCHEDULED_EXPORT_QUEUE).getJobSchedulers(0, -1)).map((s) => s.key).sort();
}

describe('scheduled exports from the workspace file', () => {
  it('become job schedulers when the worker starts, and each run exports the segment like the API would', async () => {
    startWorkersOnce();
    const deadline = Date.now() + 30_000;
    let rows: Array<{ status: string; users_done: number; request: { fields: string[]; outputFormat: string } }> = [];
    while (Date.now() < deadline) {
      rows = (
        await env.ctx.pool.query(
          `SELECT status, users_done, request FROM exports WHERE scheduled_by = 'nightly-crm' AND status = 'ready'`,
        )
      ).rows;
      if (rows.length > 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(rows.length).toBeGreaterThan(0);
    expect(rows[0]).toMatchObject({
      status: 'ready',
      users_done: 1_200,
      request: { fields: ['external_id', 'email'], outputFormat: 'gzip' },
    });
    // The enabled row has its scheduler, the disabled one none; the re-sync has its own.
    expect(await schedulerIds()).toEqual([`export-schedule-${scheduleId}`, 'scheduled-exports-sync']);
  });

  it('a disabled or removed schedule loses its scheduler at the next sync', async () => {
    await env.ctx.pool.query(`UPDATE scheduled_exports SET enabled = false WHERE id = $1`, [scheduleId]);
    expect(await syncExportSchedules(env.ctx)).toEqual({ active: 0, removed: 1 });
    expect(await schedulerIds()).toEqual(['scheduled-exports-sync']);
    // Exports already started finish; no new run begins.
    await new Promise((r) => setTimeout(r, 1_500));
    const count = async () =>
      Number(
        (await env.ctx.pool.query(`SELECT count(*) AS n FROM exports WHERE scheduled_by = 'nightly-crm'`)).rows[0].n,
      );
    const before = await count();
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await count()).toBe(before);
  });
});

interface ExportLines {
  manifest: ExportManifest;
  users: Array<Record<string, unknown>>;
  removed: Array<Record<string, unknown>>;
}

/** Waits for the export and reads its manifest and every line of its parts, by kind. */
async function readExport(objectPrefix: string): Promise<ExportLines> {
  const status = await waitForExport(env, env.ws.apiKey, objectPrefix);
  expect(status.status, JSON.stringify(status)).toBe('ready');
  const file = (key: string) => path.join(localWorkspaceDir(env.config.LOCAL_STORE_DIR, env.ws), key);
  const manifest = JSON.parse(await readFile(file(status.manifest_key as string), 'utf8')) as ExportManifest;
  const out: ExportLines = { manifest, users: [], removed: [] };
  for (const part of manifest.parts) {
    const lines = await readPartFile(file(part.key));
    expect(lines).toHaveLength(part.users);
    for (const line of lines) out[part.kind].push(JSON.parse(line));
  }
  return out;
}

const ids = (lines: Array<Record<string, unknown>>) => lines.map((l) => l.external_id as string).sort();
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => `ext-${from + i}`);

describe('incremental scheduled exports (mode: incremental)', () => {
  let weeklyId: string;

  beforeAll(async () => {
    // A segment of its own (the same members as nightly), so that no run of the schedule above holds its lock.
    await createSegment(env.ctx.pool, env.ws.workspaceId, 'weekly');
    const segment = (await env.ctx.pool.query(`SELECT id FROM segments WHERE api_id = 'weekly'`)).rows[0].id;
    // A cron that does not fire while the tests run: they start each run themselves, as the scheduler's job would.
    weeklyId = (
      await env.ctx.pool.query(
        `INSERT INTO scheduled_exports (workspace_id, name, segment_id, cron, fields_to_export, output_format, rows_per_part, layout, mode, enabled)
         VALUES ($1, 'weekly-warehouse', $2, '0 3 1 1 *', ARRAY['external_id', 'service_id', 'first_name'], 'gzip', 1000, 'hive', 'incremental', false)
         RETURNING id`,
        [env.ws.workspaceId, segment],
      )
    ).rows[0].id;
    startWorkersOnce();
  });

  // Enabled only while a test runs it, so that the other tests' syncs leave it alone.
  async function run(): Promise<{ objectPrefix?: string; changesSince?: string; skipped?: string }> {
    await env.ctx.pool.query(`UPDATE scheduled_exports SET enabled = true WHERE id = $1`, [weeklyId]);
    try {
      return await runScheduledExport(env.ctx, weeklyId);
    } finally {
      await env.ctx.pool.query(`UPDATE scheduled_exports SET enabled = false WHERE id = $1`, [weeklyId]);
    }
  }

  it('runs full first, then each run holds the changes since the last ready run, in parts of rows_per_part', async () => {
    const first = await run();
    expect(first.skipped).toBeUndefined();
    expect(first.changesSince).toBeUndefined();
    const full = await readExport(first.objectPrefix!);
    expect(full.manifest.changes_since).toBeUndefined();
    expect(full.manifest.rows_per_part).toBe(1_000);
    // Every run in the layout its schedule declares.
    expect(full.manifest.layout).toBe('hive');
    expect(full.manifest.parts[0]!.key).toMatch(
      /^segment-export\/segment_id=weekly\/export_date=\d{4}-\d{2}-\d{2}\/export_id=[^/]+\/part-\d{5,}\.gz$/,
    );
    expect(full.users).toHaveLength(1_200);
    expect(full.removed).toHaveLength(0);
    for (const part of full.manifest.parts) expect(part.users).toBeLessThanOrEqual(1_000);
    expect(full.manifest.parts.length).toBeGreaterThan(1);

    const db = env.ctx.pool;
    const ws = env.ws.workspaceId;
    await db.query(`UPDATE profiles SET first_name = 'Edited' WHERE workspace_id = $1 AND external_id = ANY($2)`, [
      ws,
      range(1, 5),
    ]);
    // A write to a field the schedule does not export is a change all the same.
    await db.query(
      `UPDATE profiles SET custom_attributes = custom_attributes || '{"tier": 9}' WHERE workspace_id = $1 AND external_id = ANY($2)`,
      [ws, range(501, 3)],
    );
    await db.query(`DELETE FROM profiles WHERE workspace_id = $1 AND external_id = 'ext-900'`, [ws]);

    const second = await run();
    expect(second.changesSince).toBe(first.objectPrefix);
    const delta = await readExport(second.objectPrefix!);
    expect(delta.manifest.changes_since).toBe(first.objectPrefix);
    expect(ids(delta.users)).toEqual([...range(1, 5), ...range(501, 3)].sort());
    expect(delta.users.find((u) => u.external_id === 'ext-1')?.first_name).toBe('Edited');
    expect(delta.removed).toEqual([{ external_id: 'ext-900', service_id: 'svc-900' }]);

    const recorded = await db.query(
      `SELECT object_prefix, request FROM exports WHERE scheduled_by = 'weekly-warehouse' ORDER BY created_at`,
    );
    expect(recorded.rows.map((r) => r.object_prefix)).toEqual([first.objectPrefix, second.objectPrefix]);
    expect(recorded.rows[1].request).toMatchObject({
      rowsPerPart: 1_000,
      changesSince: { objectPrefix: first.objectPrefix },
    });
  }, 120_000);

  it('runs full, not skipped, when its base is refused at creation (pruned since it was chosen)', async () => {
    // A base whose shards recorded no snapshot is refused by createExport, as a base pruned meanwhile would be.
    const last = (
      await env.ctx.pool.query(
        `SELECT id FROM exports WHERE scheduled_by = 'weekly-warehouse' ORDER BY created_at DESC LIMIT 1`,
      )
    ).rows[0].id;
    await env.ctx.pool.query(`UPDATE export_shards_done SET snapshot = NULL WHERE export_id = $1`, [last]);
    const fallback = await run();
    expect(fallback.skipped).toBeUndefined();
    expect(fallback.changesSince).toBeUndefined();
    const full = await readExport(fallback.objectPrefix!);
    expect(full.manifest.changes_since).toBeUndefined();
    expect(full.users).toHaveLength(1_199);
  }, 120_000);

  it('runs full when every earlier run was pruned, or when the fields changed since the last run', async () => {
    await env.ctx.pool.query(`UPDATE exports SET members_forgotten_at = now() WHERE scheduled_by = 'weekly-warehouse'`);
    const pruned = await run();
    expect(pruned.changesSince).toBeUndefined();
    expect((await readExport(pruned.objectPrefix!)).users).toHaveLength(1_199);

    // The runs before exported no email: only a full run gives every loaded row the new column.
    await env.ctx.pool.query(
      `UPDATE scheduled_exports SET fields_to_export = ARRAY['external_id', 'service_id', 'first_name', 'email'] WHERE id = $1`,
      [weeklyId],
    );
    const widened = await run();
    expect(widened.changesSince).toBeUndefined();
    const full = await readExport(widened.objectPrefix!);
    expect(full.users).toHaveLength(1_199);
    expect(full.users[0]).toHaveProperty('email');

    // With the same fields again, the next run is relative to that one.
    const next = await run();
    expect(next.changesSince).toBe(widened.objectPrefix);
    expect((await readExport(next.objectPrefix!)).users).toHaveLength(0);
  }, 120_000);
});
