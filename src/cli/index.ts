import type { Command } from 'commander';
import type { Config } from '../platform/config.js';
import { registerCdiCommands } from './cdi.js';
import { registerEventsCommands } from './events.js';
import { registerExportCommand } from './export.js';
import { registerImportCommand } from './import.js';
import { registerUsersCommands } from './users.js';
import { registerWorkspaceCommands } from './workspace.js';

/** Commands beyond serve/worker/start/migrate, one module each under src/cli/. */
export function registerCommands(program: Command, config: () => Config): void {
  registerWorkspaceCommands(program, config);
  registerUsersCommands(program, config);
  registerImportCommand(program, config);
  registerExportCommand(program, config);
  registerCdiCommands(program, config);
  registerEventsCommands(program, config);
}
