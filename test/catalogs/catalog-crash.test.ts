import type { ChildProcess } from 'node:child_process';
import { afterAll, describe, expect, it } from 'vitest';
import { catalogBatchJob } from '../../jobs/catalog-batch.js';
import { useTestEnv } from '../helpers/context.js';
import { QUICK_STALLED_CHECK, spawnCli, waitFor } from '../helpers/cli.js';
import { callApi } from '../helpers/http.js';
import { drainCatalogQueue } from '../helpers/catalogs.js';

const env = useTestEnv({
  config: { RATE_LIMIT_CATALOG_SYNC_PER_MINUTE: '100000', ...QUICK_STALLED_CHECK },
  workspaces: ['ws'],
});
let child: ChildProcess | undefined;

afterAll(async () => {
  child?.kill('SIGKILL');
});

const ITEMS = 50;
const BATCHES = 120;
const itemIds = Array.from({ length: ITEMS }, (_, i) => `dish-${String(i).padStart(2, '0')}`);

async function appliedEdits(): Promise<number> {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM catalog_batches WHERE workspace_id = $1 AND op = 'update' AND applied_at IS NOT NULL`,
    [env.ws.workspaceId],
  );
  return rows[0]!.n;
}

/** True while another backend is inside an edit batch's transaction with its item rows locked or written. */
async function editInFlight(): Promise<boolean> {
  const { rows } = await env.ctx.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM pg_stat_activity
      WHERE pid <> pg_backend_pid() AND state <> 'idle'
        AND (query LIKE 'SELECT item_id, data FROM catalog_items%FOR UPDATE%'
             OR query LIKE 'UPDATE catalog_items AS ci SET data = u.data%'
             OR query LIKE 'UPDATE catalog_batches SET applied_at%')`,
  );
  return rows[0]!.n > 0;
}

describe('a catalog worker killed mid-batch', () => {
  it('applies every accepted $add exactly once', async () => {
    const post = (method: 'POST' | 'PATCH', url: string, body: unknown) =>
      callApi(env.app, method, url, { key: env.ws.apiKey, body });
    const created = await post('POST', '/catalogs', {
      catalogs: [
        {
          name: 'menu',
          description: 'dishes',
          fields: [
            { name: 'id', type: 'string' },
            { name: 'Tags', type: 'array' },
          ],
        },
      ],
    });
    expect(created.status).toBe(201);
    expect(
      (await post('POST', '/catalogs/menu/items', { items: itemIds.map((id) => ({ id, Tags: ['start'] })) })).status,
    ).toBe(202);
    await drainCatalogQueue(env);

    // Every batch edits every item: a batch lost, or applied twice, shows in every item's tags.
    for (let b = 0; b < BATCHES; b++) {
      const res = await post('PATCH', '/catalogs/menu/items', {
        items: itemIds.map((id) => ({ id, Tags: { $add: [`t${b}`], $remove: ['start'] } })),
      });
      expect(res.status).toBe(202);
    }

    const workerEnv = {
      DATABASE_URL: env.config.DATABASE_URL,
      DATABASE_SCHEMA: env.config.DATABASE_SCHEMA,
      REDIS_URL: env.config.REDIS_URL,
      ...(env.config.REDIS_CLUSTER_NODES ? { REDIS_CLUSTER_NODES: env.config.REDIS_CLUSTER_NODES } : {}),
      REDIS_PREFIX: env.config.REDIS_PREFIX,
      MIGRATE_ON_START: 'false',
      LOG_LEVEL: 'warn',
      ...QUICK_STALLED_CHECK,
    };
    child = spawnCli(['worker', '--queues', 'catalog-batch'], workerEnv);
    let stderr = '';
    child.stderr!.on('data', (d) => (stderr += d));
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child!.on('exit', (_code, signal) => resolve(signal)),
    );
    await waitFor(async () => (await appliedEdits()) >= 5, 60_000, 20);
    await waitFor(editInFlight, 30_000, 1);
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    child = undefined;
    const applied = await appliedEdits();
    expect(applied, stderr).toBeGreaterThan(0);
    expect(applied).toBeLessThan(BATCHES);

    // Another worker finishes: the killed batch's job is taken again once its lock lapses, after those behind it.
    env.startWorkers([catalogBatchJob]);
    await waitFor(async () => (await appliedEdits()) === BATCHES, 120_000, 100);

    const { rows } = await env.ctx.pool.query<{ item_id: string; data: { Tags: string[] } }>(
      `SELECT i.item_id, i.data FROM catalog_items i JOIN catalogs c ON c.id = i.catalog_id
        WHERE c.workspace_id = $1 AND c.name = 'menu' ORDER BY i.item_id`,
      [env.ws.workspaceId],
    );
    expect(rows.map((r) => r.item_id)).toEqual(itemIds);
    const expected = Array.from({ length: BATCHES }, (_, b) => `t${b}`).sort();
    for (const r of rows) expect([...r.data.Tags].sort(), r.item_id).toEqual(expected);
    // BullMQ takes the killed job back when its lock lapses and the stalled check runs: seconds here
    // (QUICK_STALLED_CHECK), up to a minute and a half with the queue's own timings.
  }, 180_000);
});
