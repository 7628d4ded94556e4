import { copyFile, mkdir, stat } from 'node:fs/promises';
import path from 'node:path';
import cliProgress from 'cli-progress';
import type { Config } from '../platform/config.js';
import { createPool } from '../platform/db/pool.js';
import { AppError } from '../platform/errors.js';
import { runImport, type ImportProgress } from '../pipelines/ingest/import/run-import.js';
import { createImport, ImportRequest, type ImportStatus } from '../pipelines/ingest/import/imports.js';
import { enqueueImport } from '../platform/queues/bulk-import.js';
import { createCommandLogger } from '../platform/logger.js';
import { Metrics } from '../platform/metrics.js';
import { Queues } from '../platform/queues/index.js';
import { createRedis, redisKeyPrefix } from '../platform/redis.js';
import { localKeyProblem, localWorkspaceDir } from '../platform/storage/local-store.js';
import { findWorkspace, type FoundWorkspace } from './workspace-lookup.js';

/**
 * With the built-in store, the file may be given as a path on this machine: a key the workspace's store holds wins;
 * otherwise an existing file is copied into the store (imports/cli/...), where the import reads it and writes its
 * rejects beside it, and its key is used.
 */
async function localFileAsKey(cfg: Config, workspace: FoundWorkspace, given: string): Promise<string> {
  const storeDir = localWorkspaceDir(cfg.LOCAL_STORE_DIR, {
    companyId: workspace.companyId,
    workspaceId: workspace.id,
  });
  if (await isFile(path.join(storeDir, given))) return given;
  const file = path.resolve(given);
  if (!(await isFile(file))) {
    // Not a file here, and not a key the store could hold either (./events.ndjson, /tmp/x): say so, rather than
    // what the key's rules say of it.
    if (localKeyProblem(given))
      throw new Error(
        `no file ${file} on this machine, and ${JSON.stringify(given)} is not a key of the workspace's built-in store`,
      );
    return given;
  }
  const safeName = path.basename(file).replace(/[^A-Za-z0-9._-]/g, '_');
  const key = `imports/cli/${new Date().toISOString().replace(/[:.]/g, '-')}-${safeName}`;
  await mkdir(path.dirname(path.join(storeDir, key)), { recursive: true });
  await copyFile(file, path.join(storeDir, key));
  console.log(`copied ${file} into the built-in store of workspace ${workspace.name} as ${key}`);
  return key;
}

const isFile = (p: string) =>
  stat(p).then(
    (s) => s.isFile(),
    () => false,
  );

export interface ImportOptions {
  workspace?: string;
  source: 'local' | 'bucket';
  format?: 'ndjson' | 'json';
  enqueue?: boolean;
  resume?: string;
}

const mb = (n: number) => (n / 1e6).toFixed(1);
/** `1 record`, `3 records`. */
const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

/**
 * A bar on a terminal; a line every 10% (or every batch when the size is unknown) otherwise. `appliedBefore` is what
 * was applied when this run began (0 for a new import; unknown for a resumed one, taken from the first report), so
 * that a file applied in one batch does not show 0 events/s.
 */
function progressReporter(appliedBefore?: number): { update(p: ImportProgress): void; stop(): void } {
  const started = Date.now();
  const rate = (p: ImportProgress) =>
    Math.round((p.eventsApplied - first) / Math.max(0.001, (Date.now() - started) / 1000));
  let first = appliedBefore ?? -1;
  if (process.stdout.isTTY) {
    const bar = new cliProgress.SingleBar(
      {
        format:
          'import [{bar}] {percentage}% | {mb}/{mbTotal} MB | {records} records | {applied} applied | {rejected} rejected | {rate} events/s',
        hideCursor: true,
      },
      cliProgress.Presets.shades_classic,
    );
    let begun = false;
    return {
      update(p) {
        if (first < 0) first = p.eventsApplied;
        const payload = {
          mb: mb(p.bytesRead),
          mbTotal: mb(p.bytesTotal ?? 0),
          records: p.recordsHandled,
          applied: p.eventsApplied,
          rejected: p.rejected,
          rate: rate(p),
        };
        if (!begun) {
          bar.start(p.bytesTotal ?? 0, 0, payload);
          begun = true;
        }
        bar.update(Math.min(p.bytesRead, p.bytesTotal ?? p.bytesRead), payload);
      },
      stop: () => bar.stop(),
    };
  }
  let lastTenth = -1;
  return {
    update(p) {
      if (first < 0) first = p.eventsApplied;
      const tenth = p.bytesTotal ? Math.floor((10 * p.bytesRead) / p.bytesTotal) : lastTenth + 1;
      if (tenth === lastTenth) return;
      lastTenth = tenth;
      console.log(
        `import: ${count(p.recordsHandled, 'record')}, ${p.eventsApplied} applied, ${p.rejected} rejected, ${mb(p.bytesRead)} MB read, ${rate(p)} events/s`,
      );
    },
    stop: () => {},
  };
}

function summary(s: ImportStatus): string {
  return [
    `import ${s.import_id}: ${s.status}`,
    `  records handled:  ${s.records_handled}`,
    `  events applied:   ${s.events_applied}`,
    `  events unmatched: ${s.events_unmatched} (their user does not exist and may not be created)`,
    `  rejected:         ${s.rejected} (see ${s.rejects_key})`,
  ].join('\n');
}

/** What `ces import` does, loaded only when it runs (so that `ces --help` stays fast). */
export async function runImportCommand(
  config: () => Config,
  key: string | undefined,
  opts: ImportOptions,
): Promise<void> {
  const cfg = config();
  const pool = createPool(cfg, 3);
  const log = createCommandLogger(cfg.LOG_LEVEL === 'info' ? 'warn' : cfg.LOG_LEVEL);
  let importId = opts.resume;
  try {
    if (!importId) {
      if (!key || !opts.workspace)
        throw new Error('give the file (a path, or a key of the store) and --workspace (or --resume <import-id>)');
      const workspace = await findWorkspace(pool, opts.workspace);
      if (opts.source === 'local') key = await localFileAsKey(cfg, workspace, key);
      const request = ImportRequest.safeParse({ source: opts.source, key, format: opts.format });
      if (!request.success) throw new Error(request.error.issues[0]?.message ?? 'invalid import');
      const ws = workspace.id;
      const status = await createImport(
        { pool, config: cfg },
        ws,
        request.data,
        `cli:${process.env.USER ?? 'unknown'}`,
        { viaQueue: !!opts.enqueue },
      );
      importId = status.import_id;
      console.log(
        `import ${importId}: ${status.key} (${status.format}, ${status.bytes_total ?? '?'} bytes) into workspace ${opts.workspace}`,
      );
    }
    if (opts.enqueue) {
      const redis = createRedis(cfg, 'producer', { enableOfflineQueue: true });
      const queues = new Queues(redis, redisKeyPrefix(cfg));
      try {
        // From now on the workers own it: the reconciler queues it again if Redis loses the job.
        await pool.query('UPDATE imports SET via_queue = true WHERE id = $1', [importId]);
        await enqueueImport(queues, importId);
      } finally {
        await queues.close();
        await redis.quit();
      }
      console.log(`queued; follow it with GET /users/import/${importId}`);
      return;
    }
    const reporter = progressReporter(opts.resume ? undefined : 0);
    const status = await runImport({ pool, config: cfg, log, metrics: new Metrics(false) }, importId, {
      onProgress: (p) => reporter.update(p),
    }).finally(() => reporter.stop());
    console.log(summary(status));
    if (status.status !== 'completed') process.exitCode = 1;
  } catch (err) {
    console.error(`import failed: ${err instanceof AppError || err instanceof Error ? err.message : String(err)}`);
    // Only a recorded import can be resumed: a wrong argument gets no such hint.
    if (importId) console.error(`an interrupted import continues with: ces import --resume ${importId}`);
    process.exitCode = 1;
  } finally {
    await pool.end();
  }
}
