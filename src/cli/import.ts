import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../platform/config.js';
import type { ImportOptions } from './import-file.js';

/** `ces import <key>`: imports a file of event objects, here with a progress bar, or through the workers (--enqueue). */
export function registerImportCommand(program: Command, config: () => Config): void {
  program
    .command('import')
    .description('bulk-import a file of event objects (NDJSON or a JSON array, optionally .gz) into a workspace')
    .argument('[file]', 'a file on this machine, or the key of a file in the store (not needed with --resume)')
    .option('--workspace <name-or-id>', 'workspace to import into')
    .option(
      '--source <store>',
      "'local' (the built-in store, LOCAL_STORE_DIR) or 'bucket' (the workspace's S3/GCS bucket)",
      (v) => {
        if (v !== 'local' && v !== 'bucket') throw new InvalidArgumentError("must be 'local' or 'bucket'");
        return v;
      },
      'local',
    )
    .option('--format <format>', "'ndjson' or 'json' (default: from the file name)", (v) => {
      if (v !== 'ndjson' && v !== 'json') throw new InvalidArgumentError("must be 'ndjson' or 'json'");
      return v;
    })
    .option('--enqueue', 'hand the import to the bulk-import workers and return at once')
    .option('--resume <import-id>', 'continue an interrupted import from its last committed position')
    // The work (and what it imports) is loaded only when the command runs: `ces --help` stays fast.
    .action(async (key: string | undefined, opts: ImportOptions) =>
      (await import('./import-file.js')).runImportCommand(config, key, opts),
    );
}
