import { z } from 'zod';
import type { QueueOf } from './queue-access.js';

/** Applies staged /users/track rows (src/pipelines/ingest/apply/drain-staging.ts). */
export const TRACK_INGEST_QUEUE = 'track-ingest' as const;
type Queues = QueueOf<typeof TRACK_INGEST_QUEUE, typeof TrackIngestPayload>;

/** A track-ingest job: everything staged when it starts; `stagedId` (jobs queued by older versions) through that row. */
export const TrackIngestPayload = z.object({ stagedId: z.number().int().positive().optional() });
export type TrackIngestPayload = z.infer<typeof TrackIngestPayload>;

/**
 * Every track request shares one waiting apply job: while one waits, BullMQ drops further adds with this id. The
 * job frees the id as it starts (jobs/track-ingest.ts) and only then reads the backlog, so a row committed after
 * that start queues a new job, and a row committed before it is in the backlog the job drains.
 */
export const APPLY_DEDUPLICATION_ID = 'apply-staged';

const JOB_OPTIONS = {
  // The row, not the job, carries the data: a job only asks for it to be applied, so retries can be generous.
  attempts: 20,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 5000 },
};

/** How often the sweep applies whatever is staged (rows whose job was lost, or never queued). */
export const SWEEP_EVERY_MS = 5_000;

/** Asks for everything staged to be applied (a no-op while an apply job waits). */
export async function enqueueApply(queues: Queues): Promise<void> {
  await queues
    .get(TRACK_INGEST_QUEUE)
    .add('apply', {}, { ...JOB_OPTIONS, deduplication: { id: APPLY_DEDUPLICATION_ID } });
}

/** The sweep, a repeatable job: an apply every SWEEP_EVERY_MS. */
export async function registerTrackSweep(queues: Queues): Promise<void> {
  await queues
    .get(TRACK_INGEST_QUEUE)
    .upsertJobScheduler(
      'track-ingest-sweep',
      { every: SWEEP_EVERY_MS },
      { name: 'sweep', data: {}, opts: JOB_OPTIONS },
    );
}
