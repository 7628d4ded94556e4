import { z } from 'zod';

/** Job payloads of the export queues: ids only, never profile data. */

/** The export's finishing job (parent of its shards in one BullMQ flow). */
export const SegmentExportPayload = z.object({ exportId: z.uuid() });

/** One random_bucket range [bucketFrom, bucketTo) of an export. */
export const ExportShardPayload = z.object({
  exportId: z.uuid(),
  shard: z.number().int().nonnegative(),
  bucketFrom: z.number().int().min(0).max(10_000),
  bucketTo: z.number().int().min(0).max(10_000),
});

export const ExportCallbackBody = z.object({ success: z.boolean(), url: z.string().optional(), error: z.string().optional() });

export const ExportCallbackPayload = z.object({ exportId: z.uuid(), endpoint: z.string(), body: ExportCallbackBody });

/** A run of a scheduled export declared in the workspace file, or the periodic re-sync of the schedulers. */
export const ScheduledExportPayload = z.union([z.object({ scheduledExportId: z.uuid() }), z.object({ sync: z.literal(true) })]);

export const SEGMENT_EXPORT_QUEUE = 'segment-export' as const;
export const EXPORT_SHARD_QUEUE = 'export-shard' as const;
export const EXPORT_CALLBACK_QUEUE = 'export-callback' as const;
export const SCHEDULED_EXPORT_QUEUE = 'scheduled-export' as const;
