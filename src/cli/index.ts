import type { Command } from 'commander';
import type { Config } from '../config.js';
import { registerImportCommand } from './import.js';

/** Commands beyond serve/worker/start/migrate, one module each under src/cli/. */
export function registerCommands(program: Command, config: () => Config): void {
  registerImportCommand(program, config);
}
