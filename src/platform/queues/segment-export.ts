import { z } from 'zod';
import type { FlowsOf } from './queue-access.js';
import { EXPORT_SHARD_QUEUE, shardJobOptions, type ExportShardPayload } from './export-shard.js';
import { DEFAULT_JOB_OPTIONS } from './options.js';

/** The parent of an export's shard jobs (one BullMQ flow): finishes the export once every shard has ended. */
export const SEGMENT_EXPORT_QUEUE = 'segment-export' as const;
type Queues = FlowsOf;

/** Ids only, never profile data. Changes stay additive: old jobs must still parse. */
export const SegmentExportPayload = z.object({ exportId: z.uuid() });

const FINISH_JOB_OPTIONS = { ...DEFAULT_JOB_OPTIONS, attempts: 3 };

/**
 * Queues an export as one flow: the shard jobs given (all of an export's, or those of its shards that have not
 * ended) and the finishing job that waits for them. Job ids are fixed by the export (`<id>` and `<id>.<shard>`), so
 * queueing again what Redis still holds adds nothing; the reconciler calls this for an export whose jobs Redis lost.
 */
export async function enqueueExportFlow(
  queues: Queues,
  exportId: string,
  shards: Array<Omit<ExportShardPayload, 'exportId'>>,
  shardAttempts: number,
): Promise<void> {
  await queues.flow().add({
    name: 'finish',
    queueName: SEGMENT_EXPORT_QUEUE,
    data: { exportId },
    opts: { ...FINISH_JOB_OPTIONS, jobId: exportId },
    children: shards.map((s) => ({
      name: 'shard',
      queueName: EXPORT_SHARD_QUEUE,
      data: { exportId, ...s },
      opts: shardJobOptions(exportId, s.shard, shardAttempts),
    })),
  });
}
