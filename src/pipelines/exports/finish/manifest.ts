import { SCHEMA_FILE, type ExportLayout, type OutputFormat, type PartKind } from '../key-layout.js';
import type { ExportSpec } from '../request/request-body.js';

export interface ManifestPart {
  kind: PartKind;
  key: string;
  users: number;
  bytes: number;
  sha256: string;
}

/**
 * Where the export read its members (EXPORT_DATABASE_URL): `replica` when every shard read from the replica,
 * `mixed` when some fell back to the primary. For a replica, the oldest replay position and the primary's commit time
 * of the last transaction it had replayed: the export holds everything committed up to then (and at least
 * everything committed before `primary_lsn_at_request`).
 */
export interface ManifestReadFrom {
  source: 'primary' | 'replica' | 'mixed';
  primary_lsn_at_request?: string;
  replica_replay_lsn?: string;
  replica_replay_time?: string;
}

/**
 * manifest.json, written beside the parts once every part is in the store: a loader that finds it can trust that
 * the listed files are complete, that their users add up, and check each file's size and SHA-256.
 */
export interface ExportManifest {
  version: 1;
  object_prefix: string;
  segment_id: string;
  output_format: OutputFormat;
  fields_to_export: string[];
  custom_attributes_to_export?: string[];
  /** The key layout, when not the spec's (`hive`). */
  layout?: ExportLayout;
  /** The rows_per_part the export was requested with (absent: the spec's 5,000). */
  rows_per_part?: number;
  /** The part_target_mb the export was requested with (parts cut by compressed size). */
  part_target_mb?: number;
  /**
   * For an incremental export: the object_prefix of the export it is relative to. Its `users` parts hold the members
   * that changed or joined since, its `removed` parts one {"external_id","service_id"} line per profile that left.
   */
  changes_since?: string;
  requested_at: string;
  finished_at: string;
  /** Lines of the `users` parts. */
  users: number;
  /** Lines of the `removed` parts (incremental exports only). */
  removed?: number;
  bytes: number;
  read_from?: ManifestReadFrom;
  /** The JSON Schema of the lines (schema.json, beside the parts): its file name and key. */
  schema: { file: string; key: string };
  parts: Array<{ file: string; key: string; kind: PartKind; users: number; bytes: number; sha256: string }>;
}

export function buildManifest(input: {
  objectPrefix: string;
  segmentId: string;
  spec: ExportSpec;
  createdAt: Date;
  finishedAt: Date;
  keyPrefix: string;
  parts: ManifestPart[];
  readFrom?: ManifestReadFrom;
}): ExportManifest {
  return {
    version: 1,
    object_prefix: input.objectPrefix,
    segment_id: input.segmentId,
    output_format: input.spec.outputFormat,
    fields_to_export: input.spec.fields,
    ...(input.spec.customAttributes ? { custom_attributes_to_export: input.spec.customAttributes } : {}),
    ...(input.spec.layout === 'hive' ? { layout: 'hive' as const } : {}),
    ...(input.spec.rowsPerPart ? { rows_per_part: input.spec.rowsPerPart } : {}),
    ...(input.spec.partTargetMb ? { part_target_mb: input.spec.partTargetMb } : {}),
    ...(input.spec.changesSince ? { changes_since: input.spec.changesSince.objectPrefix } : {}),
    requested_at: input.createdAt.toISOString(),
    finished_at: input.finishedAt.toISOString(),
    users: input.parts.reduce((n, p) => n + (p.kind === 'users' ? p.users : 0), 0),
    ...(input.spec.changesSince
      ? { removed: input.parts.reduce((n, p) => n + (p.kind === 'removed' ? p.users : 0), 0) }
      : {}),
    bytes: input.parts.reduce((n, p) => n + p.bytes, 0),
    ...(input.readFrom ? { read_from: input.readFrom } : {}),
    schema: { file: SCHEMA_FILE, key: `${input.keyPrefix}/${SCHEMA_FILE}` },
    parts: input.parts.map((p) => ({
      file: p.key.slice(p.key.lastIndexOf('/') + 1),
      key: p.key,
      kind: p.kind,
      users: p.users,
      bytes: p.bytes,
      sha256: p.sha256,
    })),
  };
}
