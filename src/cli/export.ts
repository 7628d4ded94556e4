import { InvalidArgumentError, type Command } from 'commander';
import type { Config } from '../platform/config.js';
import { EXPORT_LAYOUTS, OUTPUT_FORMATS } from '../pipelines/exports/key-layout.js';
import type { ExportOptions } from './export-segment.js';

/**
 * `ces export`: a segment export for cron, Airflow and CI jobs, through the same domain code as
 * POST /users/export/segment (the same checks, locks and limits). With --wait it follows the export to the end and
 * its exit code says how it ended: 0 ready (the manifest key, and the download URL for the built-in store, printed),
 * 1 failed, refused or given a wrong argument (the reason printed on stderr).
 */

const list = (v: string) => {
  const items = v
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (items.length === 0) throw new InvalidArgumentError('must name at least one');
  return items;
};

export function registerExportCommand(program: Command, config: () => Config): void {
  program
    .command('export')
    .description('export a segment (as POST /users/export/segment does), optionally waiting for it to be ready')
    .requiredOption('--workspace <name-or-id>', 'workspace of the segment')
    .requiredOption('--segment <id>', "the segment's id (its api id, as in /segments/list)")
    .requiredOption('--fields <a,b,...>', 'fields_to_export, comma-separated', list)
    .option('--custom-attributes <a,b,...>', 'custom_attributes_to_export, comma-separated', list)
    .option(
      '--format <format>',
      "'zip', 'gzip' or 'parquet'",
      (v) => {
        if (!(OUTPUT_FORMATS as readonly string[]).includes(v))
          throw new InvalidArgumentError("must be 'zip', 'gzip' or 'parquet'");
        return v;
      },
      'zip',
    )
    .option('--rows-per-part <n>', "lines per part (1,000 to 1,000,000; default: the spec's 5,000)", (v) => {
      if (!/^\d+$/.test(v)) throw new InvalidArgumentError('must be a whole number');
      return Number(v);
    })
    .option(
      '--part-target-mb <n>',
      'parts cut by size: about this many MiB compressed each (16 to 1,024; gzip and zip), instead of by lines',
      (v) => {
        if (!/^\d+$/.test(v)) throw new InvalidArgumentError('must be a whole number');
        return Number(v);
      },
    )
    .option(
      '--layout <layout>',
      "'spec' (the spec's key layout) or 'hive' (segment_id=/export_date=/export_id= partitions)",
      (v) => {
        if (!(EXPORT_LAYOUTS as readonly string[]).includes(v))
          throw new InvalidArgumentError("must be 'spec' or 'hive'");
        return v;
      },
    )
    .option(
      '--changes-since <prefix|last>',
      'an incremental export: relative to this earlier export (its object_prefix), or `last`, the latest ready export of the segment',
    )
    .option('--callback <url>', 'callback_endpoint: called when the export is ready')
    .option('--wait', 'follow the export until it is ready or failed; the exit code says which')
    .option(
      '--timeout <seconds>',
      'with --wait, give up waiting after this long (0: never)',
      (v) => {
        if (!/^\d+$/.test(v)) throw new InvalidArgumentError('must be a whole number of seconds');
        return Number(v);
      },
      0,
    )
    // The work (and what it imports) is loaded only when the command runs: `ces --help` stays fast.
    .action(async (opts: ExportOptions) => (await import('./export-segment.js')).runExportCommand(config, opts));
}
