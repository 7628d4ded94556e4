import type { JobsOptions } from 'bullmq';
import { z } from 'zod';
import { DEFAULT_JOB_OPTIONS } from './options.js';

/** One random_bucket range of a segment export; a child of the export's finishing job (./segment-export.ts). */
export const EXPORT_SHARD_QUEUE = 'export-shard' as const;

/** One random_bucket range [bucketFrom, bucketTo) of an export. Ids and numbers only. */
export const ExportShardPayload = z.object({
  exportId: z.uuid(),
  shard: z.number().int().nonnegative(),
  bucketFrom: z.number().int().min(0).max(10_000),
  bucketTo: z.number().int().min(0).max(10_000),
});
export type ExportShardPayload = z.infer<typeof ExportShardPayload>;

export const shardJobId = (exportId: string, shard: number) => `${exportId}.${shard}`;

export function shardJobOptions(exportId: string, shard: number, attempts: number): JobsOptions {
  return {
    ...DEFAULT_JOB_OPTIONS,
    jobId: shardJobId(exportId, shard),
    attempts: Math.max(1, attempts),
    // A shard that fails for good still lets the finishing job run, which then fails the export cleanly.
    ignoreDependencyOnFailure: true,
  };
}
