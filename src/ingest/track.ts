import { badRequest } from '../errors.js';
import type { Pool } from '../db/pool.js';
import type { Logger } from '../logger.js';
import type { Metrics } from '../metrics.js';
import type { Queues } from '../queues.js';
import { TRACK_INGEST_QUEUE } from './payloads.js';
import { stageObjects } from './staging.js';
import { toIso } from './time.js';
import type { ObjectError, TrackArray } from './types.js';
import { FatalTrackError, validateTrackBody } from './validate.js';

export interface TrackDeps {
  pool: Pool;
  queues: Queues;
  log: Logger;
  metrics: Metrics;
}

export interface TrackAnswer {
  message: 'success';
  attributes_processed?: number;
  events_processed?: number;
  purchases_processed?: number;
  errors?: ObjectError[];
}

/** How often staged rows whose job was lost (Redis restarted without persistence) are swept up. */
export const SWEEP_EVERY_MS = 30_000;
const sweepers = new WeakMap<Queues, Promise<unknown>>();

const JOB_OPTIONS = {
  // The row, not the job, carries the data: a job only asks for it to be applied, so retries can be generous.
  attempts: 20,
  backoff: { type: 'exponential', delay: 500 },
  removeOnComplete: { age: 3600, count: 1000 },
  removeOnFail: { age: 7 * 24 * 3600, count: 5000 },
};

/**
 * Accepts a /users/track body: validates every object, commits the valid ones to the staging log (durable before
 * the answer), then asks a worker to apply them. Nothing is staged when the request is refused as a whole.
 */
export async function acceptTrack(deps: TrackDeps, workspaceId: string, body: unknown): Promise<TrackAnswer> {
  let validation;
  try {
    validation = validateTrackBody(body, toIso(Date.now()));
  } catch (err) {
    if (err instanceof FatalTrackError) throw badRequest(err.message);
    throw err;
  }
  const { objects, errors, sent } = validation;
  for (const e of errors) deps.metrics.ingestRejected.inc({ kind: e.input_array, source: 'track' });

  const stagedId = await stageObjects(deps.pool, workspaceId, objects);
  const queue = deps.queues.get(TRACK_INGEST_QUEUE);
  try {
    await queue.add('apply', { stagedId }, JOB_OPTIONS);
    if (!sweepers.has(deps.queues)) {
      const upsert = queue.upsertJobScheduler('track-ingest-sweep', { every: SWEEP_EVERY_MS }, { name: 'sweep', data: {}, opts: JOB_OPTIONS });
      sweepers.set(
        deps.queues,
        upsert.catch((err: unknown) => {
          sweepers.delete(deps.queues);
          deps.log.warn({ err }, 'could not schedule the staging sweep; will retry on the next request');
        }),
      );
    }
  } catch (err) {
    // The objects are committed: the next job or the periodic sweep applies them. The answer stays 201.
    deps.log.warn({ err, stagedId }, 'track objects staged but their job could not be queued; the sweep will apply them');
  }

  const answer: TrackAnswer = { message: 'success' };
  const counts: Record<TrackArray, number> = { attributes: objects.attributes.length, events: objects.events.length, purchases: objects.purchases.length };
  if (sent.attributes) answer.attributes_processed = counts.attributes;
  if (sent.events) answer.events_processed = counts.events;
  if (sent.purchases) answer.purchases_processed = counts.purchases;
  if (errors.length > 0) answer.errors = errors;
  return answer;
}
