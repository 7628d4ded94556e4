import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../platform/config.js';
import { createPool, type Pool } from '../platform/db/pool.js';
import { AppError } from '../platform/errors.js';
import { createExport } from '../pipelines/exports/request/create-export.js';
import { latestBaseCandidate } from '../pipelines/exports/incremental.js';
import type { ExportLayout, OutputFormat } from '../pipelines/exports/key-layout.js';
import { ExportRequestSchema } from '../pipelines/exports/request/request-body.js';
import { exportStatus, type ExportStatus } from '../pipelines/exports/request/status.js';
import { Queues } from '../platform/queues/index.js';
import { EXPORT_SHARD_QUEUE } from '../platform/queues/export-shard.js';
import { closeRedis, createRedis, redisKeyPrefix } from '../platform/redis.js';
import { localWorkspaceDir } from '../platform/storage/local-store.js';
import { findWorkspace } from './workspace-lookup.js';
import { createCommandLogger } from '../platform/logger.js';

export interface ExportOptions {
  workspace: string;
  segment: string;
  fields: string[];
  customAttributes?: string[];
  format: OutputFormat;
  rowsPerPart?: number;
  partTargetMb?: number;
  layout?: ExportLayout;
  changesSince?: string;
  callback?: string;
  wait?: boolean;
  timeout: number;
}

const POLL_MS = 1_000;
/** `1 user`, `1,000 users`. */
const usersText = (n: number) => `${n.toLocaleString('en-US')} user${n === 1 ? '' : 's'}`;
const PLAIN_LINE_EVERY_MS = 10_000;

/** A line rewritten in place on a terminal; a line at each change of state, and every 10 s, otherwise. */
function progressPrinter(prefix: string): { show(s: ExportStatus): void; end(): void } {
  const started = Date.now();
  const describe = (s: ExportStatus) =>
    `export ${prefix}: ${s.status}, ${usersText(s.users_done)} in ${s.parts_done} part(s), ${Math.round((Date.now() - started) / 1000)} s`;
  if (process.stdout.isTTY) {
    return {
      show: (s) => process.stdout.write(`\r${describe(s)}\x1b[K`),
      end: () => process.stdout.write('\n'),
    };
  }
  let lastState = '';
  let lastAt = 0;
  return {
    show(s) {
      if (s.status === lastState && Date.now() - lastAt < PLAIN_LINE_EVERY_MS) return;
      lastState = s.status;
      lastAt = Date.now();
      console.log(describe(s));
    },
    end: () => {},
  };
}

async function follow(
  pool: Pool,
  cfg: Config,
  workspaceId: string,
  prefix: string,
  timeoutSeconds: number,
): Promise<ExportStatus> {
  const printer = progressPrinter(prefix);
  const deadline = timeoutSeconds > 0 ? Date.now() + timeoutSeconds * 1000 : Infinity;
  try {
    for (;;) {
      const status = await exportStatus(pool, cfg, workspaceId, prefix);
      printer.show(status);
      if (status.status === 'ready' || status.status === 'failed') return status;
      if (Date.now() > deadline)
        throw new Error(
          `the export is still ${status.status} after ${timeoutSeconds} s (it goes on; follow it with GET /users/export/status?object_prefix=${prefix})`,
        );
      await sleep(POLL_MS);
    }
  } finally {
    printer.end();
  }
}

/** `--changes-since last`: the object_prefix of the segment's latest ready export that can still be a base. */
async function lastReadyExport(
  pool: Pool,
  workspaceId: string,
  segmentApiId: string,
  tombstoneDays: number,
): Promise<string> {
  const base = await latestBaseCandidate(pool, workspaceId, segmentApiId, tombstoneDays);
  if (!base)
    throw new Error(
      `--changes-since last: segment ${segmentApiId} has no ready export to be relative to (or only ones older than TOMBSTONE_RETENTION_DAYS less a day); run a full export first`,
    );
  return base.objectPrefix;
}

/** What `ces export` does, loaded only when it runs (so that `ces --help` stays fast). */
export async function runExportCommand(config: () => Config, opts: ExportOptions): Promise<void> {
  const cfg = config();
  const pool = createPool(cfg, 2);
  const redis = createRedis(cfg, 'producer', { enableOfflineQueue: true });
  const queues = new Queues(redis, redisKeyPrefix(cfg));
  try {
    // The body the API would take, checked by the schema the API checks it with.
    const body = ExportRequestSchema.safeParse({
      segment_id: opts.segment,
      fields_to_export: opts.fields,
      ...(opts.customAttributes ? { custom_attributes_to_export: opts.customAttributes } : {}),
      output_format: opts.format,
      ...(opts.rowsPerPart !== undefined ? { rows_per_part: opts.rowsPerPart } : {}),
      ...(opts.partTargetMb !== undefined ? { part_target_mb: opts.partTargetMb } : {}),
      ...(opts.layout !== undefined ? { layout: opts.layout } : {}),
      ...(opts.callback ? { callback_endpoint: opts.callback } : {}),
      ...(opts.changesSince && opts.changesSince !== 'last' ? { changes_since: opts.changesSince } : {}),
    });
    if (!body.success)
      throw new Error(body.error.issues.map((i) => `${i.path.join('.') || 'request'}: ${i.message}`).join('; '));
    const ws = await findWorkspace(pool, opts.workspace);
    if (opts.changesSince === 'last')
      body.data.changes_since = await lastReadyExport(pool, ws.id, opts.segment, cfg.TOMBSTONE_RETENTION_DAYS);
    const created = await createExport(
      { config: cfg, pool, redis, queues, log: createCommandLogger(cfg.LOG_LEVEL === 'info' ? 'warn' : cfg.LOG_LEVEL) },
      { workspaceId: ws.id, companyId: ws.companyId },
      body.data,
    );
    const relative = created.full
      ? `, full: ${created.full}`
      : body.data.changes_since
        ? `, incremental: the changes since export ${body.data.changes_since}${opts.changesSince === 'last' ? " (--changes-since last: the segment's latest ready export)" : ''}`
        : '';
    console.log(`export ${created.objectPrefix} of segment ${opts.segment} in workspace ${ws.name}: queued${relative}`);
    const listening = await queues
      .get(EXPORT_SHARD_QUEUE)
      .getWorkers()
      .then((w) => w.length)
      .catch(() => 0);
    if (listening === 0)
      console.error(
        'no worker is running for exports: start `ces worker` (or `ces start`); the export waits in the queue until one does',
      );
    if (!opts.wait) {
      console.log(`follow it with: GET /users/export/status?object_prefix=${created.objectPrefix}`);
      return;
    }
    const end = await follow(pool, cfg, ws.id, created.objectPrefix, opts.timeout);
    if (end.status === 'failed') {
      console.error(`export ${created.objectPrefix} failed: ${end.error ?? 'no reason recorded'}`);
      process.exitCode = 1;
      return;
    }
    console.log(`ready: ${usersText(end.users_done)} in ${end.parts_done} part(s)`);
    console.log(`manifest: ${end.manifest_key}`);
    // The built-in store (an export with a download URL has no bucket): where its files are on this machine.
    if (end.url && end.manifest_key) {
      const dir = path.dirname(
        path.join(
          localWorkspaceDir(cfg.LOCAL_STORE_DIR, { companyId: ws.companyId, workspaceId: ws.id }),
          end.manifest_key,
        ),
      );
      console.log(`files: ${dir} (the built-in store)`);
    }
    if (end.url) console.log(`download url: ${end.url}`);
  } catch (err) {
    console.error(`export failed: ${err instanceof AppError || err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  } finally {
    await queues.close().catch(() => {});
    await closeRedis(redis);
    await pool.end();
  }
}
