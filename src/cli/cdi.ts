import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../platform/config.js';
import type { CdiSyncOptions } from './cdi-run.js';

/**
 * `ces cdi`: Cloud Data Ingestion for cron and CI. `ces cdi list` prints the integrations; `ces cdi sync <integration>`
 * starts a run (as POST /cdi/integrations/{id}/sync does) and, with --wait, runs it in the foreground with its
 * progress, printing the run's summary; the exit code says how it ended (0 success or partial, 1 otherwise).
 */

export function registerCdiCommands(program: Command, config: () => Config): void {
  const cdi = program.command('cdi').description('Cloud Data Ingestion: list integrations, run a sync');
  cdi
    .command('list')
    .description('the integrations the workspace file declares, with their last run')
    .option('--workspace <name-or-id>', 'only this workspace')
    .action(async (opts: { workspace?: string }) => (await import('./cdi-run.js')).listCommand(config, opts));
  cdi
    .command('sync <integration>')
    .description(
      'start a sync of an integration (its id, or its name); with --wait, run it here and exit 0 when it ends success or partial',
    )
    .option('--workspace <name-or-id>', 'the workspace of an integration named by its name')
    .option('--wait', 'run the sync in this process, print its progress and summary; the exit code says how it ended')
    .option('--fail-on-partial', 'with --wait, exit 1 when some rows were refused (partial)')
    .action(async (integration: string, opts: CdiSyncOptions) => {
      if (integration.trim() === '') throw new InvalidArgumentError('name an integration');
      await (await import('./cdi-run.js')).syncCommand(config, integration, opts);
    });
}
