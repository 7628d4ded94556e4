import { createHmac, randomUUID } from 'node:crypto';

/** `<uuid>-<unix_seconds>`: the export's id and the time it was requested, as the spec's object_prefix. */
export function newObjectPrefix(now = new Date()): { exportId: string; objectPrefix: string } {
  const exportId = randomUUID();
  return { exportId, objectPrefix: `${exportId}-${Math.floor(now.getTime() / 1000)}` };
}

/** How an export's keys are laid out: the spec's, or Hive-style partitions on request. */
export const EXPORT_LAYOUTS = ['spec', 'hive'] as const;
export type ExportLayout = (typeof EXPORT_LAYOUTS)[number];

/**
 * A Hive partition value (`segment_id=<value>`): the characters Hive and Spark escape in a partition path are written
 * as `%XX`, as they do (a segment id may hold `:`).
 */
export function hivePartitionValue(value: string): string {
  return value.replace(
    /["#%'*/:=?\\{}[\]^\x00-\x1f\x7f]/g,
    (c) => `%${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, '0')}`,
  );
}

/**
 * The spec's `<dest prefix>segment-export/<segment api id>/<YYYY-MM-dd>/<object_prefix>` (delivery rule 3), or with
 * the hive layout `<dest prefix>segment-export/segment_id=<id>/export_date=<YYYY-MM-DD>/export_id=<object_prefix>`,
 * so that a segment's prefix reads as one table partitioned by those three columns.
 */
export function exportKeyPrefix(
  destPrefix: string,
  segmentApiId: string,
  day: Date,
  objectPrefix: string,
  layout: ExportLayout = 'spec',
): string {
  const date = day.toISOString().slice(0, 10);
  if (layout === 'hive')
    return `${destPrefix}segment-export/segment_id=${hivePartitionValue(segmentApiId)}/export_date=${date}/export_id=${objectPrefix}`;
  return `${destPrefix}segment-export/${segmentApiId}/${date}/${objectPrefix}`;
}

/**
 * Parts per shard a hive part number leaves room for: part `p` of shard `s` is `part-<s * 100,000 + p>` (at least
 * five digits), the same on every attempt so that a retry overwrites, and unique across shards.
 */
export const HIVE_PARTS_PER_SHARD = 100_000;

/**
 * A part's file name: random-looking (the spec wants random names) yet fixed per (export, shard, part), so a retried
 * shard writes over what a killed attempt left rather than beside it.
 */
export function partFileName(
  secret: string,
  exportId: string,
  shard: number,
  part: number,
  format: OutputFormat,
  kind: PartKind = 'users',
  layout: ExportLayout = 'spec',
): string {
  if (layout === 'hive') {
    // Loaders glob `part-*`: the removed parts of an incremental export are named apart so that they stay out of it.
    const number = String(shard * HIVE_PARTS_PER_SHARD + part).padStart(5, '0');
    return `${kind === 'removed' ? 'removed-' : ''}part-${number}.${PART_EXTENSIONS[format]}`;
  }
  // Users parts keep the name they had before incremental exports, so a shard retried across an upgrade overwrites.
  const label = kind === 'users' ? 'export-part' : 'export-removed-part';
  const name = createHmac('sha256', secret)
    .update(`${label}\0${exportId}\0${shard}\0${part}`)
    .digest('hex')
    .slice(0, 32);
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
/** The JSON Schema of the lines, beside the parts (src/pipelines/exports/finish/json-schema.ts). */
export const SCHEMA_FILE = 'schema.json';
/**
 * The completion marker, Spark's and Hadoop's convention: written last, after the manifest, once every part is in
 * place; nothing of the export is written after it.
 */
export const SUCCESS_FILE = '_SUCCESS';
