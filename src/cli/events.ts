import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../platform/config.js';
import type { BackfillOptions } from './events-run.js';

/**
 * `ces events`: the event stream's operator commands (docs/events.md). `backfill` re-delivers an event export's hours
 * from the log, `status` prints each export's last closed hour and lag, `erasure-report` lists the delivered files an
 * erasure could not rewrite (hours older than the log).
 */

const isoTime = (v: string): Date => {
  const d = new Date(v);
  if (Number.isNaN(d.getTime())) throw new InvalidArgumentError(`not an ISO 8601 time: ${v}`);
  return d;
};

export function registerEventsCommands(program: Command, config: () => Config): void {
  const events = program.command('events').description('the event stream: backfill, status, erasure report');
  events
    .command('backfill')
    .description("re-deliver an event export's hours [from, to) from the event log, rewriting their files")
    .requiredOption('--workspace <name-or-id>', 'the workspace of the export')
    .requiredOption('--integration <id-or-name>', 'the event export (its id, or its name)')
    .requiredOption('--from <time>', 'the first hour (ISO 8601; rounded down to its hour)', isoTime)
    .requiredOption('--to <time>', 'the end (ISO 8601, exclusive; rounded up to an hour)', isoTime)
    .action(async (opts: BackfillOptions) => (await import('./events-run.js')).backfillCommand(config, opts));
  events
    .command('status')
    .description("each event export's last closed hour, its lag, what waits and whether its destination refuses writes")
    .option('--workspace <name-or-id>', 'only this workspace')
    .action(async (opts: { workspace?: string }) => (await import('./events-run.js')).statusCommand(config, opts));
  events
    .command('erasure-report')
    .description('erasures whose events may be in delivered files older than the log, with those files')
    .option('--workspace <name-or-id>', 'only this workspace')
    .action(async (opts: { workspace?: string }) =>
      (await import('./events-run.js')).erasureReportCommand(config, opts),
    );
}
