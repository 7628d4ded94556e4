#!/usr/bin/env node
import { Command } from 'commander';
import { ConfigError, loadConfig } from './config.js';
import { reachDependencies } from './context.js';
import { createPool } from './db/pool.js';
import { migrate } from './db/migrate.js';
import { createLogger } from './logger.js';
import { run, runWithWorkerProcess, serveParent, stopOnSignals } from './runtime.js';
import { registerCommands } from './cli/index.js';

/** `ces`: the one command line of the service. Each command loads the configuration itself. */
const program = new Command('ces').description('Customer engagement service: API, workers and operations');

function config() {
  try {
    return loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(2);
    }
    throw err;
  }
}

program
  .command('serve')
  .description('run the HTTP API')
  .action(async () => stopOnSignals(await run(config(), { api: true, worker: false })));

program
  .command('worker')
  .description('run the queue processors')
  .option('--queues <names>', 'comma-separated queues to process (default: all)')
  .action(async (opts: { queues?: string }) => {
    const running = await run(config(), { api: false, worker: true, queues: opts.queues?.split(',').map((s) => s.trim()) });
    stopOnSignals(running);
    serveParent(running);
  });

program
  .command('start')
  .description('run the API, and the queue processors in a child process')
  .option('--single-process', 'run the API and the queue processors on one Node thread')
  .action(async (opts: { singleProcess?: boolean }) =>
    stopOnSignals(opts.singleProcess ? await run(config(), { api: true, worker: true }) : await runWithWorkerProcess(config())),
  );

program
  .command('migrate')
  .description('apply pending database migrations')
  .action(async () => {
    const cfg = config();
    const log = createLogger(cfg.LOG_LEVEL);
    const pool = createPool(cfg, 1);
    try {
      await reachDependencies(cfg, pool);
      const applied = await migrate(pool, cfg.DATABASE_SCHEMA, log);
      console.log(applied.length ? `applied ${applied.length} migration(s): ${applied.join(', ')}` : 'database is up to date');
    } finally {
      await pool.end();
    }
  });

registerCommands(program, config);

program.parseAsync(process.argv).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
