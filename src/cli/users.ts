import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../platform/config.js';
import type { GenerateOptions } from './users-generate.js';

/** `ces users generate`: bulk-loads synthetic profiles. */
export function registerUsersCommands(program: Command, config: () => Config): void {
  const users = program.command('users').description('user profiles');
  users
    .command('generate')
    .description('bulk-load realistic synthetic profiles (COPY, one transaction; deterministic for a seed)')
    .requiredOption('--count <n>', 'profiles to create', integer)
    .requiredOption('--workspace <name>', 'workspace name')
    .option('--company <name>', 'company name, when several companies have a workspace of that name')
    .option('--seed <n>', 'seed: the same seed and count give the same people', integer, 1)
    .option('--start-id <n>', 'index of the first generated user, to extend an earlier load of the same seed', integer)
    .option('--top-up', 'create only as many as the workspace lacks to reach --count (continuing the indexes)')
    .option('--now <iso>', 'time the generated history ends at (default: start of today, UTC)')
    // The work (and what it imports) is loaded only when the command runs: `ces --help` stays fast.
    .action(async (opts: GenerateOptions) => (await import('./users-generate.js')).runGenerate(config, opts));
}

function integer(value: string): number {
  const n = Number(value);
  if (!/^\d+$/.test(value) || !Number.isSafeInteger(n))
    throw new InvalidArgumentError('must be a non-negative integer');
  return n;
}
