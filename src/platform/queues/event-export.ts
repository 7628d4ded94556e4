import { z } from 'zod';
import type { Config } from '../config.js';
import type { QueueOf } from './queue-access.js';

/**
 * Event exports (src/pipelines/events/): a sweep every EVENT_EXPORT_SWEEP_SECONDS queues a flush of every export, and a
 * flush writes the files that are due. The files are planned in PostgreSQL (event_export_files), so a job lost with
 * Redis loses nothing: the next sweep's flush writes what was planned.
 */
export const EVENT_EXPORT_QUEUE = 'event-export' as const;
type Queues = QueueOf<typeof EVENT_EXPORT_QUEUE, typeof EventExportPayload>;

export const EventExportPayload = z.union([
  /** One export's pass. */
  z.object({ exportId: z.uuid() }),
  /** The periodic sweep that queues a pass of every export. */
  z.object({ sweep: z.literal(true) }),
]);

const SWEEP_SCHEDULER_ID = 'event-export-sweep';

/**
 * While one waits, adding it again adds nothing; it frees its id when it ends, failed too: BullMQ ignores an add whose
 * id a kept job holds, so a pass that spent its attempts (PostgreSQL away for longer than they take) and was kept
 * failed would stop the export's deliveries until it was removed.
 */
export const flushJobId = (exportId: string) => `event-export-${exportId}`;

export async function enqueueFlushes(queues: Queues, exportIds: string[]): Promise<void> {
  await queues.get(EVENT_EXPORT_QUEUE).addBulk(
    exportIds.map((exportId) => ({
      name: 'flush',
      data: { exportId },
      opts: {
        jobId: flushJobId(exportId),
        attempts: 5,
        backoff: { type: 'exponential', delay: 2000 },
        removeOnComplete: true,
        removeOnFail: true,
      },
    })),
  );
}

/** The sweep, a repeatable job. */
export async function registerEventExportSweep(
  queues: Queues,
  config: Pick<Config, 'EVENT_EXPORT_SWEEP_SECONDS'>,
): Promise<void> {
  await queues
    .get(EVENT_EXPORT_QUEUE)
    .upsertJobScheduler(
      SWEEP_SCHEDULER_ID,
      { every: config.EVENT_EXPORT_SWEEP_SECONDS * 1000 },
      { name: 'sweep', data: { sweep: true }, opts: { removeOnComplete: { count: 10 }, removeOnFail: { count: 50 } } },
    );
}
