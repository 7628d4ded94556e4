import type { Command } from 'commander';
import type { Config } from '../config.js';

/** Commands beyond serve/worker/start/migrate, one module each under src/cli/. */
export function registerCommands(_program: Command, _config: () => Config): void {}
