import cliProgress from 'cli-progress';
import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../config.js';
import { createPool } from '../db/pool.js';
import { AppError } from '../errors.js';
import { runImport, type ImportProgress } from '../ingest/import-run.js';
import { createImport, ImportRequest, type ImportStatus } from '../ingest/imports.js';
import { enqueueImport } from '../queues/bulk-import.js';
import { createLogger } from '../logger.js';
import { Metrics } from '../metrics.js';
import { Queues } from '../queues/index.js';
import { createRedis, redisKeyPrefix } from '../redis.js';
import { findWorkspace } from './workspace-lookup.js';

interface ImportOptions {
  workspace?: string;
  source: 'local' | 'bucket';
  format?: 'ndjson' | 'json';
  enqueue?: boolean;
  resume?: string;
}


const mb = (n: number) => (n / 1e6).toFixed(1);

/** A bar on a terminal; a line every 10% (or every batch when the size is unknown) otherwise. */
function progressReporter(): { update(p: ImportProgress): void; stop(): void } {
  const started = Date.now();
  const rate = (p: ImportProgress) => Math.round((p.eventsApplied - first) / Math.max(0.001, (Date.now() - started) / 1000));
  let first = -1;
  if (process.stdout.isTTY) {
    const bar = new cliProgress.SingleBar(
      { format: 'import [{bar}] {percentage}% | {mb}/{mbTotal} MB | {records} records | {applied} applied | {rejected} rejected | {rate} events/s', hideCursor: true },
      cliProgress.Presets.shades_classic,
    );
    let begun = false;
    return {
      update(p) {
        if (first < 0) first = p.eventsApplied;
        const payload = { mb: mb(p.bytesRead), mbTotal: mb(p.bytesTotal ?? 0), records: p.recordsHandled, applied: p.eventsApplied, rejected: p.rejected, rate: rate(p) };
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
      console.log(`import: ${p.recordsHandled} records, ${p.eventsApplied} applied, ${p.rejected} rejected, ${mb(p.bytesRead)} MB read, ${rate(p)} events/s`);
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

/** `ces import <key>`: imports a file of event objects, here with a progress bar, or through the workers (--enqueue). */
export function registerImportCommand(program: Command, config: () => Config): void {
  program
    .command('import')
    .description('bulk-import a file of event objects (NDJSON or a JSON array, optionally .gz) into a workspace')
    .argument('[key]', 'object key of the file in the store (not needed with --resume)')
    .option('--workspace <name-or-id>', 'workspace to import into')
    .option('--source <store>', "'local' (the built-in store, LOCAL_STORE_DIR) or 'bucket' (the workspace's S3/GCS bucket)", (v) => {
      if (v !== 'local' && v !== 'bucket') throw new InvalidArgumentError("must be 'local' or 'bucket'");
      return v;
    }, 'local')
    .option('--format <format>', "'ndjson' or 'json' (default: from the file name)", (v) => {
      if (v !== 'ndjson' && v !== 'json') throw new InvalidArgumentError("must be 'ndjson' or 'json'");
      return v;
    })
    .option('--enqueue', 'hand the import to the bulk-import workers and return at once')
    .option('--resume <import-id>', 'continue an interrupted import from its last committed position')
    .action(async (key: string | undefined, opts: ImportOptions) => {
      const cfg = config();
      const pool = createPool(cfg, 3);
      const log = createLogger(cfg.LOG_LEVEL === 'info' ? 'warn' : cfg.LOG_LEVEL);
      try {
        let importId = opts.resume;
        if (!importId) {
          if (!key || !opts.workspace) throw new Error('give the file key and --workspace (or --resume <import-id>)');
          const request = ImportRequest.safeParse({ source: opts.source, key, format: opts.format });
          if (!request.success) throw new Error(request.error.issues[0]?.message ?? 'invalid import');
          const ws = (await findWorkspace(pool, opts.workspace)).id;
          const status = await createImport({ pool, config: cfg }, ws, request.data, `cli:${process.env.USER ?? 'unknown'}`, { viaQueue: !!opts.enqueue });
          importId = status.import_id;
          console.log(`import ${importId}: ${status.key} (${status.format}, ${status.bytes_total ?? '?'} bytes) into workspace ${opts.workspace}`);
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
        const reporter = progressReporter();
        const status = await runImport({ pool, config: cfg, log, metrics: new Metrics(false) }, importId, { onProgress: (p) => reporter.update(p) }).finally(() =>
          reporter.stop(),
        );
        console.log(summary(status));
        if (status.status !== 'completed') process.exitCode = 1;
      } catch (err) {
        console.error(`import failed: ${err instanceof AppError || err instanceof Error ? err.message : String(err)}`);
        if (opts.resume || key) console.error('an interrupted import continues with: ces import --resume <import-id>');
        process.exitCode = 1;
      } finally {
        await pool.end();
      }
    });
}
