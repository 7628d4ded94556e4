#!/usr/bin/env node
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { Command } from 'commander';
import { ConfigError, loadConfig } from './platform/config.js';
import { registerCommands } from './cli/index.js';
import { quietOnBrokenPipe } from './cli/output.js';

/**
 * `ces`: the one command line of the service. Each command loads the configuration itself, and what it runs only
 * when it runs (dynamic imports): `ces --help` and `ces --version` load commander and the config schema, nothing more.
 */

/** The package's version, from the package.json above this file (src/ under tsx, dist/src/ when built). */
function packageVersion(): string {
  for (let dir = import.meta.dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    const file = path.join(dir, 'package.json');
    if (existsSync(file)) return (JSON.parse(readFileSync(file, 'utf8')) as { version: string }).version;
  }
  return 'unknown';
}

quietOnBrokenPipe(process.stdout);
quietOnBrokenPipe(process.stderr);

const program = new Command('ces')
  .description('Customer engagement service: API, workers and operations')
  .version(packageVersion(), '-V, --version');
const runtime = () => import('./runtime/run.js');

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
  .action(async () => {
    const { run, stopOnSignals } = await runtime();
    stopOnSignals(await run(config(), { api: true, worker: false }));
  });

program
  .command('worker')
  .description('run the queue processors')
  .option('--queues <names>', 'comma-separated queues to process (default: all)')
  .action(async (opts: { queues?: string }) => {
    const { run, serveParent, stopOnSignals } = await runtime();
    const running = await run(config(), {
      api: false,
      worker: true,
      queues: opts.queues?.split(',').map((s) => s.trim()),
    });
    stopOnSignals(running);
    serveParent(running);
  });

program
  .command('start')
  .description('run the API, and the queue processors in a child process')
  .option('--single-process', 'run the API and the queue processors on one Node thread')
  .action(async (opts: { singleProcess?: boolean }) => {
    const { run, runWithWorkerProcess, stopOnSignals } = await runtime();
    stopOnSignals(
      opts.singleProcess ? await run(config(), { api: true, worker: true }) : await runWithWorkerProcess(config()),
    );
  });

program
  .command('migrate')
  .description('apply pending database migrations')
  .action(async () => {
    const [{ reachDependencies }, { createPool }, { migrate }, { createCommandLogger }] = await Promise.all([
      import('./platform/context.js'),
      import('./platform/db/pool.js'),
      import('./platform/db/migrate.js'),
      import('./platform/logger.js'),
    ]);
    const cfg = config();
    const log = createCommandLogger(cfg.LOG_LEVEL);
    const pool = createPool(cfg, 1);
    try {
      await reachDependencies(cfg, pool);
      const applied = await migrate(pool, cfg.DATABASE_SCHEMA, log);
      console.log(
        applied.length ? `applied ${applied.length} migration(s): ${applied.join(', ')}` : 'database is up to date',
      );
    } finally {
      await pool.end();
    }
  });

registerCommands(program, config);

program.parseAsync(process.argv).catch((err: unknown) => {
  console.error(err instanceof Error ? err.message : err);
  process.exit(1);
});
