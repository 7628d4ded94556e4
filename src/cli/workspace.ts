import type { Command } from 'commander';
import type { Config } from '../platform/config.js';
import type { WorkspaceApplyOptions } from './workspace-apply.js';

/** `ces workspace apply FILE`: creates or updates everything a workspace file declares. */
export function registerWorkspaceCommands(program: Command, config: () => Config): void {
  const workspace = program.command('workspace').description('declarative workspace files');
  workspace
    .command('apply')
    .description(
      'create or update the company, workspaces and everything they hold from a JSON or YAML file (idempotent)',
    )
    .argument('<file>', 'workspace file (.yaml, .yml or .json)')
    .option('--no-migrate', 'do not apply pending migrations first')
    // The work (and what it imports) is loaded only when the command runs: `ces --help` stays fast.
    .action(async (fileName: string, opts: WorkspaceApplyOptions) =>
      (await import('./workspace-apply.js')).runWorkspaceApply(config, fileName, opts),
    );
}
