import { findIntegration, allIntegrations } from '../pipelines/cdi/integrations.js';
import { readJob, recordSyncJob, type SyncJob } from '../pipelines/cdi/sync-runs.js';
import { startSync } from '../pipelines/cdi/schedules.js';
import { runSync } from '../pipelines/cdi/sync.js';
import type { Config } from '../platform/config.js';
import { createPool, type Pool } from '../platform/db/pool.js';
import { createCommandLogger } from '../platform/logger.js';
import { Metrics } from '../platform/metrics.js';
import { Queues } from '../platform/queues/index.js';
import { closeRedis, createRedis, redisKeyPrefix } from '../platform/redis.js';
import { findWorkspace } from './workspace-lookup.js';

const describe = (j: SyncJob) =>
  `${j.status}: ${j.rowsSynced.toLocaleString('en-US')} row(s) synced, ${j.rowsFailed.toLocaleString('en-US')} refused` +
  (j.lastTimestampSynced ? `, last UPDATED_AT ${j.lastTimestampSynced.toISOString()}` : '');

/** `ces cdi list`. */
export async function listCommand(config: () => Config, opts: { workspace?: string }): Promise<void> {
  const cfg = config();
  const pool = createPool(cfg, 1);
  try {
    const ws = opts.workspace ? await findWorkspace(pool, opts.workspace) : undefined;
    const integrations = await allIntegrations(pool, ws?.id);
    if (integrations.length === 0)
      console.log('no CDI integrations (declare them under cdi_integrations in the workspace file)');
    // Over every workspace, each line says whose integration it is: workspace names repeat across companies.
    const owners = ws
      ? undefined
      : await workspaceOwners(
          pool,
          integrations.map((i) => i.workspaceId),
        );
    for (const i of integrations) {
      const last = await pool.query<{ id: string }>(
        `SELECT id FROM cdi_sync_jobs WHERE integration_id = $1 ORDER BY started_at DESC, id DESC LIMIT 1`,
        [i.id],
      );
      const job = last.rows[0] ? await readJob(pool, last.rows[0].id) : undefined;
      const source =
        i.source.type === 'postgres'
          ? `table ${i.source.table} (${i.source.url_env})`
          : `${i.source.format} files under ${i.source.prefix}`;
      const schedule = i.schedule
        ? 'every_minutes' in i.schedule
          ? `every ${i.schedule.every_minutes} min`
          : `cron "${i.schedule.cron}" ${i.schedule.time_zone}`
        : 'on demand';
      const owner = owners ? `  ${owners.get(i.workspaceId) ?? `workspace ${i.workspaceId}`}` : '';
      console.log(
        `${i.id}  ${i.name}${owner}  ${source}  ${schedule}  last run: ${job ? `${job.startedAt.toISOString()} ${describe(job)}` : 'never'}`,
      );
    }
  } catch (err) {
    console.error(`cdi list failed: ${(err as Error).message}`);
    process.exitCode = 1;
  } finally {
    await pool.end();
  }
}

/** `workspace "<name>" of "<company>"` by workspace id. */
async function workspaceOwners(pool: Pool, workspaceIds: string[]): Promise<Map<string, string>> {
  const { rows } = await pool.query<{ id: string; name: string; company: string }>(
    `SELECT w.id::text, w.name, c.name AS company FROM workspaces w JOIN companies c ON c.id = w.company_id
      WHERE w.id = ANY($1::uuid[])`,
    [[...new Set(workspaceIds)]],
  );
  return new Map(rows.map((r) => [r.id, `workspace ${JSON.stringify(r.name)} of ${JSON.stringify(r.company)}`]));
}

/** The options of `ces cdi sync` (src/cli/cdi.ts declares them). */
export interface CdiSyncOptions {
  workspace?: string;
  wait?: boolean;
  failOnPartial?: boolean;
}

/** `ces cdi sync <integration> [--wait]`. */
export async function syncCommand(config: () => Config, ref: string, opts: CdiSyncOptions): Promise<void> {
  const cfg = config();
  const pool = createPool(cfg, 3);
  const redis = createRedis(cfg, 'producer', { enableOfflineQueue: true });
  const queues = new Queues(redis, redisKeyPrefix(cfg));
  const log = createCommandLogger(cfg.LOG_LEVEL === 'info' ? 'warn' : cfg.LOG_LEVEL);
  try {
    const ws = opts.workspace ? await findWorkspace(pool, opts.workspace) : undefined;
    const integration = await findIntegration(pool, ref, ws?.id);
    if (!integration)
      throw new Error(`no CDI integration ${JSON.stringify(ref)}${ws ? ` in workspace ${ws.name}` : ''}`);
    if (!opts.wait) {
      const job = await startSync({ pool, queues, log }, integration.workspaceId, integration.id, 'cli');
      console.log(`sync ${job.id} of ${integration.name} (${integration.id}): started`);
      console.log(`the workers run it; follow it with GET /cdi/integrations/${integration.id}/job_sync_status`);
      return;
    }
    // Run here, not queued: if this process dies, the reconciler queues the run for the workers, which resume it.
    const job = await recordSyncJob(pool, integration.workspaceId, integration.id, 'cli');
    console.log(`sync ${job.id} of ${integration.name} (${integration.id}): started`);
    let shown = 0;
    const timer = setInterval(() => {
      void readJob(pool, job.id).then((j) => {
        if (j && j.rowsSynced + j.rowsFailed !== shown) {
          shown = j.rowsSynced + j.rowsFailed;
          console.log(`  ${describe(j)}`);
        }
      });
    }, 2_000);
    let end: SyncJob | undefined;
    try {
      end = await runSync({ pool, config: cfg, log, metrics: new Metrics(false) }, job.id);
    } finally {
      clearInterval(timer);
    }
    if (!end) throw new Error('the run is gone');
    console.log(`sync ${job.id}: ${describe(end)}`);
    if (end.rejectsKey) console.log(`refused rows, with why: ${end.rejectsKey} (in the workspace's store)`);
    if (end.error) console.error(`reason: ${end.error}`);
    if (end.status === 'error' || end.status === 'config_error' || (end.status === 'partial' && opts.failOnPartial))
      process.exitCode = 1;
  } catch (err) {
    console.error(`cdi sync failed: ${(err as Error).message}`);
    process.exitCode = 1;
  } finally {
    await queues.close().catch(() => {});
    await closeRedis(redis);
    await pool.end();
  }
}
