import { beforeAll, describe, expect, it } from 'vitest';
import { exportShardJob } from '../jobs/export-shard.js';
import { scheduledExportJob } from '../jobs/scheduled-export.js';
import { segmentExportJob } from '../jobs/segment-export.js';
import { SCHEDULED_EXPORT_QUEUE } from '../src/queues/scheduled-export.js';
import { syncExportSchedules } from '../src/exports/schedules.js';
import { useTestEnv } from './helpers/context.js';
import { createSegment, insertProfiles } from './helpers/export-fixtures.js';

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

async function schedulerIds(): Promise<string[]> {
  return (await env.ctx.queues.get(SCHEDULED_EXPORT_QUEUE).getJobSchedulers(0, -1)).map((s) => s.key).sort();
}

describe('scheduled exports from the workspace file', () => {
  it('become job schedulers when the worker starts, and each run exports the segment like the API would', async () => {
    env.startWorkers([scheduledExportJob, segmentExportJob, exportShardJob]);
    const deadline = Date.now() + 30_000;
    let rows: Array<{ status: string; users_done: number; request: { fields: string[]; outputFormat: string } }> = [];
    while (Date.now() < deadline) {
      rows = (await env.ctx.pool.query(`SELECT status, users_done, request FROM exports WHERE scheduled_by = 'nightly-crm' AND status = 'ready'`)).rows;
      if (rows.length > 0) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(rows.length).toBeGreaterThan(0);
    expect(rows[0]).toMatchObject({ status: 'ready', users_done: 1_200, request: { fields: ['external_id', 'email'], outputFormat: 'gzip' } });
    // The enabled row has its scheduler, the disabled one none; the re-sync has its own.
    expect(await schedulerIds()).toEqual([`export-schedule-${scheduleId}`, 'scheduled-exports-sync']);
  });

  it('a disabled or removed schedule loses its scheduler at the next sync', async () => {
    await env.ctx.pool.query(`UPDATE scheduled_exports SET enabled = false WHERE id = $1`, [scheduleId]);
    expect(await syncExportSchedules(env.ctx)).toEqual({ active: 0, removed: 1 });
    expect(await schedulerIds()).toEqual(['scheduled-exports-sync']);
    // Exports already started finish; no new run begins.
    await new Promise((r) => setTimeout(r, 1_500));
    const count = async () => Number((await env.ctx.pool.query(`SELECT count(*) AS n FROM exports WHERE scheduled_by = 'nightly-crm'`)).rows[0].n);
    const before = await count();
    await new Promise((r) => setTimeout(r, 2_000));
    expect(await count()).toBe(before);
  });
});
