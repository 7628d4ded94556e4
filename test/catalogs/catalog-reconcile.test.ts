import { describe, expect, it } from 'vitest';
import { CATALOG_BATCH_QUEUE, batchJobId } from '../../src/platform/queues/catalog-batch.js';
import { repairCatalogBatches } from '../../src/runtime/reconcile/repairs.js';
import { useTestEnv } from '../helpers/context.js';
import { callApi, type Method } from '../helpers/http.js';
import { CREATE_RESTAURANTS, CREATE_SELECTION, drainCatalogQueue } from '../helpers/catalogs.js';

/**
 * A 202 of the catalog lifecycle is work of record like an item batch: when Redis loses the job of a field or selection
 * change, the reconciler queues it again from its record, and it is applied.
 */
const env = useTestEnv({ config: { RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '100000' }, workspaces: ['ws'] });

const call = (method: Method, url: string, body?: unknown) =>
  callApi(env.app, method, url, { key: env.ws.apiKey, body });

describe('the reconciler and the lifecycle changes', () => {
  it('queues again a field change and a selection whose jobs Redis lost, and they are applied', async () => {
    expect((await call('POST', '/catalogs', CREATE_RESTAURANTS)).status).toBe(201);
    expect(
      (await call('POST', '/catalogs/restaurants/fields', { fields: [{ name: 'Open', type: 'boolean' }] })).status,
    ).toBe(202);
    expect((await call('POST', '/catalogs/restaurants/selections', CREATE_SELECTION)).status).toBe(202);
    const { rows } = await env.ctx.pool.query<{ version: number; op: 'add_fields' | 'create_selection' }>(
      `SELECT version::int AS version, op FROM catalog_batches WHERE workspace_id = $1 ORDER BY version`,
      [env.ws.workspaceId],
    );
    expect(rows.map((r) => r.op)).toEqual(['add_fields', 'create_selection']);
    // Redis loses both jobs; the records are older than the reconciler's grace period.
    const queue = env.ctx.queues.get(CATALOG_BATCH_QUEUE);
    for (const r of rows) await queue.remove(batchJobId(r));
    expect(await queue.getJobCounts('waiting')).toEqual({ waiting: 0 });
    await env.ctx.pool.query(
      `UPDATE catalog_batches SET created_at = now() - interval '1 minute' WHERE workspace_id = $1`,
      [env.ws.workspaceId],
    );

    const deps = {
      config: env.config,
      pool: env.ctx.pool,
      redis: env.ctx.redis,
      queues: env.ctx.queues,
      log: env.ctx.log,
    };
    expect(await repairCatalogBatches(deps)).toBe(2);
    await drainCatalogQueue(env);
    const list = await call('GET', '/catalogs');
    expect(list.body.catalogs[0].fields.map((f: { name: string }) => f.name)).toContain('Open');
    const selections = await env.ctx.pool.query(`SELECT name FROM catalog_selections`);
    expect(selections.rows).toEqual([{ name: 'favorite-restaurants' }]);
    // Applied: nothing is queued again.
    expect(await repairCatalogBatches(deps)).toBe(0);
  });
});
