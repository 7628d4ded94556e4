import type { Config } from '../../platform/config.js';
import type { EventType } from '../../profiles/event-log-types.js';
import type { EventExport } from './event-exports.js';
import { FORMAT_EXTENSIONS } from './formats/encoders.js';

/**
 * Where an event export's files go (docs/events.md, "Layouts"). A file's key is fixed by the export, the event type,
 * the hour and the file's sequence number in that hour, so a flush retried after a crash, or a backfill, writes the
 * same object again rather than a second one.
 *
 * - `avro`: Braze Currents' layout, `<prefix>dataexport.<instance>.<S3|GCS|local>.integration.<id>/event_type=<type>/
 *   date=<YYYY-MM-DD-HH>/version=<n>/<environment>/dataexport.<instance>.<kind>.integration.<id>+0+<seq>.avro`
 *   (one partition, 0; the sequence number as the offset).
 * - `parquet`, `ndjson`: a Hive layout, `<prefix>event_type=<type>/date=<YYYY-MM-DD>/hour=<HH>/part-<seq>.<ext>`.
 *   An export without a destination of its own writes under `event-export/<id>/` of the workspace's, so that two such
 *   exports never share keys.
 *
 * Beside the files: `_SUCCESS` in each closed hour's folder, and each type's schemas under `_schemas/` (a folder
 * starting with `_`, which Hive, Spark and DuckDB's globs leave out).
 */

export type StoreKind = 'local' | 's3' | 'gcs';

const KIND_NAMES: Record<StoreKind, string> = { local: 'local', s3: 'S3', gcs: 'GCS' };

/** The export's own root under the store's prefix. */
function rootOf(exp: EventExport, storePrefix: string, kind: StoreKind, config: EventKeyConfig): string {
  if (exp.format === 'avro')
    return `${storePrefix}dataexport.${config.EVENTS_INSTANCE}.${KIND_NAMES[kind]}.integration.${exp.id}/`;
  return exp.destination ? storePrefix : `${storePrefix}event-export/${exp.id}/`;
}

export type EventKeyConfig = Pick<Config, 'EVENTS_INSTANCE' | 'EVENTS_ENVIRONMENT'>;

const pad2 = (n: number) => String(n).padStart(2, '0');
const dayOf = (hour: Date) => `${hour.getUTCFullYear()}-${pad2(hour.getUTCMonth() + 1)}-${pad2(hour.getUTCDate())}`;

/** Keys of one export in one store. */
export class EventKeys {
  private readonly root: string;

  constructor(
    private readonly exp: EventExport,
    storePrefix: string,
    private readonly kind: StoreKind,
    private readonly config: EventKeyConfig,
    private readonly versionOf: (type: EventType) => number,
  ) {
    this.root = rootOf(exp, storePrefix, kind, config);
  }

  /** The folder of a type's files of one hour (ends with `/`). */
  hourFolder(type: EventType, hour: Date): string {
    if (this.exp.format === 'avro')
      return `${this.root}event_type=${type}/date=${dayOf(hour)}-${pad2(hour.getUTCHours())}/version=${this.versionOf(type)}/${this.config.EVENTS_ENVIRONMENT}/`;
    return `${this.root}event_type=${type}/date=${dayOf(hour)}/hour=${pad2(hour.getUTCHours())}/`;
  }

  file(type: EventType, hour: Date, seq: number): string {
    if (this.exp.format === 'avro')
      return `${this.hourFolder(type, hour)}dataexport.${this.config.EVENTS_INSTANCE}.${KIND_NAMES[this.kind]}.integration.${this.exp.id}+0+${seq}.avro`;
    return `${this.hourFolder(type, hour)}part-${String(seq).padStart(5, '0')}.${FORMAT_EXTENSIONS[this.exp.format]}`;
  }

  success(type: EventType, hour: Date): string {
    return `${this.hourFolder(type, hour)}_SUCCESS`;
  }

  /** A type's schema of one version: `.json` (JSON Schema) or `.avsc` (Avro). */
  schema(type: EventType, extension: 'json' | 'avsc'): string {
    return `${this.root}event_type=${type}/_schemas/version=${this.versionOf(type)}.${extension}`;
  }
}
