import { FlowProducer, Queue, type JobState } from 'bullmq';
import type { z } from 'zod';
import type { Redis } from '../redis.js';
import { BULK_IMPORT_QUEUE, BulkImportPayload } from './bulk-import.js';
import { CANVAS_SCHEDULE_QUEUE, CanvasSchedulePayload } from './canvas-schedule.js';
import { CATALOG_BATCH_QUEUE, CatalogBatchPayload } from './catalog-batch.js';
import { CDI_SYNC_QUEUE, CdiSyncPayload } from './cdi-sync.js';
import { EXPORT_CALLBACK_QUEUE, ExportCallbackPayload } from './export-callback.js';
import { EVENT_EXPORT_QUEUE, EventExportPayload } from './event-export.js';
import { EXPORT_SHARD_QUEUE, ExportShardPayload } from './export-shard.js';
import { LIVE_ACTIVITY_PUSH_QUEUE, LiveActivityPushPayload } from './live-activity-push.js';
import { LIVE_ACTIVITY_REMOVAL_QUEUE, LiveActivityRemovalPayload } from './live-activity-removal.js';
import { bullPrefix, DEFAULT_JOB_OPTIONS } from './options.js';
import { SCHEDULED_EXPORT_QUEUE, ScheduledExportPayload } from './scheduled-export.js';
import { SEGMENT_EXPORT_QUEUE, SegmentExportPayload } from './segment-export.js';
import { TRACK_INGEST_QUEUE, TrackIngestPayload } from './track-ingest.js';
import { WORKSPACE_STATS_QUEUE, WorkspaceStatsPayload } from './workspace-stats.js';

/**
 * The queues of the service, one module each under src/platform/queues/: its name, the zod schema of its payload, its
 * job options, and typed functions that add its jobs (every producer calls those; nothing outside src/platform/queues/,
 * src/runtime/workers.ts and jobs/ imports BullMQ). Processors live in jobs/, one file per queue, and parse what they
 * receive with the same schema (old or foreign jobs exist). Repeatable jobs are registered in ./repeatables.ts.
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
  [CDI_SYNC_QUEUE]: CdiSyncPayload,
  [EVENT_EXPORT_QUEUE]: EventExportPayload,
  [WORKSPACE_STATS_QUEUE]: WorkspaceStatsPayload,
} satisfies Record<string, z.ZodType>;

export type QueueName = keyof typeof QUEUE_PAYLOADS;
export type QueuePayload<N extends QueueName> = z.infer<(typeof QUEUE_PAYLOADS)[N]>;
export const QUEUE_NAMES = Object.keys(QUEUE_PAYLOADS) as QueueName[];

export { bullPrefix, DEFAULT_JOB_OPTIONS };

/** Producer-side handles on every queue (created lazily, closed together), and the flow producer of exports. */
export class Queues {
  private readonly open = new Map<QueueName, Queue>();
  private flowProducer: FlowProducer | undefined;

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

  /** Adds parents with their children at once (an export's finishing job and its shards). */
  flow(): FlowProducer {
    this.flowProducer ??= new FlowProducer({ connection: this.connection, prefix: bullPrefix(this.redisPrefix) });
    return this.flowProducer;
  }

  /** Where a job stands in Redis; 'unknown' when Redis has no job of that id (never added, removed, or lost). */
  async state(name: QueueName, jobId: string): Promise<JobState | 'unknown'> {
    return (this.get(name) as unknown as Queue).getJobState(jobId);
  }

  /** Removes a job (the reconciler does, for a finishing job that failed because Redis lost its shards). */
  async remove(name: QueueName, jobId: string): Promise<void> {
    await (this.get(name) as unknown as Queue).remove(jobId);
  }

  async close(): Promise<void> {
    await Promise.all([...this.open.values()].map((q) => q.close()));
    await this.flowProducer?.close();
    this.open.clear();
    this.flowProducer = undefined;
  }
}
