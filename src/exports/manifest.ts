import type { ExportSpec } from './request.js';

export interface ManifestPart {
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
  output_format: 'zip' | 'gzip';
  fields_to_export: string[];
  custom_attributes_to_export?: string[];
  /** The rows_per_part the export was requested with (absent: the spec's 5,000). */
  rows_per_part?: number;
  requested_at: string;
  finished_at: string;
  users: number;
  bytes: number;
  read_from?: ManifestReadFrom;
  parts: Array<{ file: string; key: string; users: number; bytes: number; sha256: string }>;
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
    ...(input.spec.rowsPerPart ? { rows_per_part: input.spec.rowsPerPart } : {}),
    requested_at: input.createdAt.toISOString(),
    finished_at: input.finishedAt.toISOString(),
    users: input.parts.reduce((n, p) => n + p.users, 0),
    bytes: input.parts.reduce((n, p) => n + p.bytes, 0),
    ...(input.readFrom ? { read_from: input.readFrom } : {}),
    parts: input.parts.map((p) => ({ file: p.key.slice(p.key.lastIndexOf('/') + 1), key: p.key, users: p.users, bytes: p.bytes, sha256: p.sha256 })),
  };
}
