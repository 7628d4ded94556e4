import type { Config } from '../../../platform/config.js';
import { badRequest } from '../../../platform/errors.js';
import type { Pool } from '../../../platform/db/pool.js';
import type { ClaimedKey } from '../../../platform/idempotency/keys.js';
import type { DependencyHealth } from '../../../platform/lib/dependency-health.js';
import type { Logger } from '../../../platform/logger.js';
import type { Metrics } from '../../../platform/metrics.js';
import type { Queues } from '../../../platform/queues/index.js';
import { enqueueApply } from '../../../platform/queues/track-ingest.js';
import { stageObjects } from './staging-writer.js';
import { toIso } from '../../../profiles/validation/event-time.js';
import type { ObjectError, TrackArray } from '../../../profiles/tracked-types.js';
import { FatalTrackError, validateTrackBody } from '../../../profiles/validation/validate.js';

export interface TrackDeps {
  config: Pick<Config, 'INGEST_PARTITIONS'>;
  pool: Pool;
  queues: Queues;
  log: Logger;
  metrics: Metrics;
  /** Where a Redis outage is reported (logged once), rather than a warning per request. */
  health?: Pick<DependencyHealth, 'report'>;
}

export interface TrackAnswer {
  message: 'success';
  attributes_processed?: number;
  events_processed?: number;
  purchases_processed?: number;
  errors?: ObjectError[];
}

/**
 * Every track request shares one waiting apply job (src/platform/queues/track-ingest.ts deduplicates the adds). One job
 * per request cost a Redis script on each side and a PostgreSQL round trip per request for the worker.
 */
const kickers = new WeakMap<Queues, () => void>();

/**
 * Accepts a /users/track body: validates every object, commits the valid ones to the staging log (durable before
 * the answer), then asks a worker to apply them. Nothing is staged when the request is refused as a whole.
 */
export async function acceptTrack(
  deps: TrackDeps,
  workspaceId: string,
  body: unknown,
  idempotencyKey?: ClaimedKey,
): Promise<TrackAnswer> {
  let validation;
  try {
    validation = validateTrackBody(body, toIso(Date.now()));
  } catch (err) {
    if (err instanceof FatalTrackError) throw badRequest(err.message);
    throw err;
  }
  const { objects, errors, sent } = validation;
  for (const e of errors) deps.metrics.ingestRejected.inc({ kind: e.input_array, source: 'track' });

  const answer: TrackAnswer = { message: 'success' };
  const counts: Record<TrackArray, number> = {
    attributes: objects.attributes.length,
    events: objects.events.length,
    purchases: objects.purchases.length,
  };
  if (sent.attributes) answer.attributes_processed = counts.attributes;
  if (sent.events) answer.events_processed = counts.events;
  if (sent.purchases) answer.purchases_processed = counts.purchases;
  if (errors.length > 0) answer.errors = errors;

  await stageObjects(
    deps.pool,
    workspaceId,
    objects,
    deps.config.INGEST_PARTITIONS,
    idempotencyKey && { key: idempotencyKey, status: 201, body: answer },
  );
  // Not awaited: the objects are committed, so the answer need not wait for Redis. If the job cannot be queued,
  // the next request's or the periodic sweep applies them.
  kickApply(deps);
  return answer;
}

/**
 * The shortest time between two adds of the apply job by one process. While a job waits, every add is dropped by the
 * deduplication above, yet each still costs a BullMQ script in Redis and its building in this process: at 250
 * requests/s that was an add per request. Spacing them delays an apply by this much at most, and only when the
 * previous add was that recent.
 */
const KICK_MIN_INTERVAL_MS = 50;

/**
 * Asks for the staged rows to be applied. At most one add is in flight per process: requests committed meanwhile
 * mark it to be sent once more when it returns (which is after their commit, as the deduplication above needs), and
 * no sooner than KICK_MIN_INTERVAL_MS after the previous one was sent.
 */
export function kickApply(deps: Pick<TrackDeps, 'queues' | 'log' | 'health'>): void {
  let kick = kickers.get(deps.queues);
  if (!kick) {
    let busy = false;
    let again = false;
    let lastSent = 0;
    const send = () => {
      busy = true;
      again = false;
      lastSent = Date.now();
      enqueueApply(deps.queues)
        .catch((err: unknown) => {
          if (!deps.health?.report(err))
            deps.log.warn({ err }, 'track objects staged but their job could not be queued; the sweep will apply them');
        })
        .finally(() => {
          if (!again) {
            busy = false;
            return;
          }
          // Still busy while waiting: requests meanwhile only mark `again`. Unref'd: a process stopping with a
          // kick pending leaves its rows to the sweep (or the next process's first request).
          setTimeout(send, Math.max(0, lastSent + KICK_MIN_INTERVAL_MS - Date.now())).unref();
        });
    };
    kick = () => {
      if (busy) again = true;
      else send();
    };
    kickers.set(deps.queues, kick);
  }
  kick();
}
