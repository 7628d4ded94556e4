import { createHmac, randomUUID } from 'node:crypto';

/** `<uuid>-<unix_seconds>`: the export's id and the time it was requested, as the spec's object_prefix. */
export function newObjectPrefix(now = new Date()): { exportId: string; objectPrefix: string } {
  const exportId = randomUUID();
  return { exportId, objectPrefix: `${exportId}-${Math.floor(now.getTime() / 1000)}` };
}

/** `<dest prefix>segment-export/<segment api id>/<YYYY-MM-dd>/<object_prefix>` (spec delivery rule 3). */
export function exportKeyPrefix(destPrefix: string, segmentApiId: string, day: Date, objectPrefix: string): string {
  return `${destPrefix}segment-export/${segmentApiId}/${day.toISOString().slice(0, 10)}/${objectPrefix}`;
}

/**
 * A part's file name: random-looking (the spec wants random names) yet fixed per (export, shard, part), so a retried
 * shard writes over what a killed attempt left rather than beside it.
 */
export function partFileName(secret: string, exportId: string, shard: number, part: number, format: OutputFormat, kind: PartKind = 'users'): string {
  // Users parts keep the name they had before incremental exports, so a shard retried across an upgrade overwrites.
  const label = kind === 'users' ? 'export-part' : 'export-removed-part';
  const name = createHmac('sha256', secret).update(`${label}\0${exportId}\0${shard}\0${part}`).digest('hex').slice(0, 32);
  return `${kind === 'removed' ? 'removed-' : ''}${name}.${PART_EXTENSIONS[format]}`;
}

/** How parts are written: NDJSON in a one-entry zip (the spec's default) or gzip, or Parquet (an extension). */
export const OUTPUT_FORMATS = ['zip', 'gzip', 'parquet'] as const;
export type OutputFormat = (typeof OUTPUT_FORMATS)[number];

/** The file name extension of a part in each format. */
export const PART_EXTENSIONS: Record<OutputFormat, string> = { zip: 'zip', gzip: 'gz', parquet: 'parquet' };

/** What a part holds: members (changed or joined, for an incremental export), or the profiles an incremental export removes. */
export type PartKind = 'users' | 'removed';

export const MANIFEST_FILE = 'manifest.json';
/** The JSON Schema of the lines, beside the parts (src/exports/json-schema.ts). */
export const SCHEMA_FILE = 'schema.json';
/**
 * The completion marker, Spark's and Hadoop's convention: written last, after the manifest, once every part is in
 * place; nothing of the export is written after it.
 */
export const SUCCESS_FILE = '_SUCCESS';
