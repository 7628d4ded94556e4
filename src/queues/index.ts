import { Queue, type JobsOptions } from 'bullmq';
import type { z } from 'zod';
import type { Redis } from './redis.js';
import { CANVAS_SCHEDULE_QUEUE, CanvasSchedulePayload } from './canvases/schedule-time.js';
import { LIVE_ACTIVITY_PUSH_QUEUE, LIVE_ACTIVITY_REMOVAL_QUEUE, LiveActivityPushPayload, LiveActivityRemovalPayload } from './live-activities/push.js';
import {
  EXPORT_CALLBACK_QUEUE,
  EXPORT_SHARD_QUEUE,
  ExportCallbackPayload,
  ExportShardPayload,
  SCHEDULED_EXPORT_QUEUE,
  SEGMENT_EXPORT_QUEUE,
  ScheduledExportPayload,
  SegmentExportPayload,
} from './exports/payloads.js';
import { CatalogBatchPayload, CATALOG_BATCH_QUEUE } from './catalogs/batch-payload.js';
import { BULK_IMPORT_QUEUE, BulkImportPayload, TRACK_INGEST_QUEUE, TrackIngestPayload } from './ingest/payloads.js';

/**
 * The typed list of queues: each name maps to the zod schema of its payload, so every `add()` is type-checked
 * and every processor parses what it receives (old or foreign jobs exist). Payload schemas live beside the
 * domain module that owns the work; processors live in jobs/, one file per queue.
 */
export const QUEUE_PAYLOADS = {
  [SEGMENT_EXPORT_QUEUE]: SegmentExportPayload,
  [EXPORT_SHARD_QUEUE]: ExportShardPayload,
  [EXPORT_CALLBACK_QUEUE]: ExportCallbackPayload,
  [SCHEDULED_EXPORT_QUEUE]: ScheduledExportPayload,
  [CATALOG_BATCH_QUEUE]: CatalogBatchPayload,
  [TRACK_INGEST_QUEUE]: TrackIngestPayload,
  [BULK_IMPORT_QUEUE]: BulkImportPayload,
  [LIVE_ACTIVITY_PUSH_QUEUE]: LiveActivityPushPayload,
  [LIVE_ACTIVITY_REMOVAL_QUEUE]: LiveActivityRemovalPayload,
  [CANVAS_SCHEDULE_QUEUE]: CanvasSchedulePayload,
} satisfies Record<string, z.ZodType>;

export type QueueName = keyof typeof QUEUE_PAYLOADS;
export type QueuePayload<N extends QueueName> = z.infer<(typeof QUEUE_PAYLOADS)[N]>;
export const QUEUE_NAMES = Object.keys(QUEUE_PAYLOADS) as QueueName[];

/** Retention every job gets unless its producer says otherwise: keep recent history, never grow without bound. */
export const DEFAULT_JOB_OPTIONS: JobsOptions = {
  removeOnComplete: { age: 24 * 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 5000 },
  attempts: 5,
  backoff: { type: 'exponential', delay: 1000 },
};

export const bullPrefix = (redisPrefix: string) => `${redisPrefix}:bull`;

/** Producer-side handles on every queue, created lazily and closed together. */
export class Queues {
  private readonly open = new Map<QueueName, Queue>();

  constructor(
    private readonly connection: Redis,
    private readonly redisPrefix: string,
  ) {}

  get<N extends QueueName>(name: N): Queue<QueuePayload<N>> {
    let queue = this.open.get(name);
    if (!queue) {
      queue = new Queue(name, {
        connection: this.connection,
        prefix: bullPrefix(this.redisPrefix),
        defaultJobOptions: DEFAULT_JOB_OPTIONS,
      });
      this.open.set(name, queue);
    }
    return queue as Queue<QueuePayload<N>>;
  }

  all(): Queue[] {
    return QUEUE_NAMES.map((n) => this.get(n) as unknown as Queue);
  }

  async close(): Promise<void> {
    await Promise.all([...this.open.values()].map((q) => q.close()));
    this.open.clear();
  }
}
