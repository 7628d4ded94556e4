import type { Config } from '../../../platform/config.js';
import { AppError, badRequest } from '../../../platform/errors.js';
import type { Pool } from '../../../platform/db/pool.js';
import { replaceAnswer, type ClaimedKey } from '../../../platform/idempotency/keys.js';
import type { Logger } from '../../../platform/logger.js';
import type { Metrics } from '../../../platform/metrics.js';
import { resolveOne, type UserRef } from '../../../profiles/lookup.js';
import type { Identity, TrackObjects } from '../../../profiles/tracked-types.js';
import { toIso } from '../../../profiles/validation/event-time.js';
import { FatalTrackError, validateTrackBody } from '../../../profiles/validation/validate.js';
import { drainThrough } from '../apply/drain-staging.js';
import { stageObjects } from './staging-writer.js';

/**
 * POST /users/track/sync: one attributes, event or purchase object, applied before the answer through the same path as
 * /users/track. It is validated by the same rules, staged as /users/track stages (ingest_staging, committed), then
 * the staging log is drained through its row in this process (`drainThrough`: each workspace's older rows first, the
 * partition locks and the row locks shared with the ingestion workers), so that every object accepted before it is
 * applied before it and a worker that took its row meanwhile is waited for, never bypassed. The answer is read from
 * the profile afterwards: the custom attributes, the event or the product it names, as they now stand.
 */

export const ONE_OBJECT_ONLY =
  '/users/track/sync takes one object: a single attributes, events or purchases object (send more with /users/track)';

export interface TrackSyncDeps {
  config: Pick<Config, 'INGEST_PARTITIONS' | 'INGEST_BATCH_MAX_JOBS'>;
  pool: Pool;
  log: Logger;
  metrics: Metrics;
}

/** One entry of `users`: the identifier as sent, and what the request changed. */
export interface SyncedUser {
  external_id?: unknown;
  service_id?: unknown;
  email?: unknown;
  user_alias?: unknown;
  custom_attributes?: Record<string, unknown>;
  custom_events?: { name: string; first: string; last: string; count: number }[];
  purchase_events?: { product_id: string; first: string; last: string; count: number }[];
}

export interface TrackSyncAnswer {
  users: SyncedUser[];
  message: 'success';
}

const ARRAYS = ['attributes', 'events', 'purchases'] as const;

/** The one raw object sent, or a refusal naming why; a body without any is left to the validation's own message. */
function theOneObject(body: unknown): Record<string, unknown> | undefined {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return undefined;
  const sent = ARRAYS.flatMap((name) => {
    const value = (body as Record<string, unknown>)[name];
    return Array.isArray(value) ? value : [];
  });
  if (sent.length > 1) throw badRequest(ONE_OBJECT_ONLY);
  const one = sent[0];
  return typeof one === 'object' && one !== null ? (one as Record<string, unknown>) : undefined;
}

/** The identifier of the object, in the keys it was sent with (Braze's answer echoes it). */
function identifierAsSent(raw: Record<string, unknown> | undefined): SyncedUser {
  const out: SyncedUser = {};
  for (const key of ['external_id', 'service_id', 'user_alias', 'email'] as const)
    if (key in (raw ?? {})) out[key] = raw![key];
  return out;
}

const refOf = (identity: Identity): UserRef =>
  identity.type === 'user_alias'
    ? { kind: 'user_alias', label: identity.label, name: identity.name }
    : identity.type === 'email'
      ? { kind: 'email', value: identity.value, prioritization: ['identified', 'most_recently_updated'] }
      : { kind: identity.type, value: identity.value };

/**
 * What an Idempotency-Key is answered with by the staging insert, replaced by the final answer once the object is
 * applied and read back: a retry after a crash in between replays this (the object applied once) rather than staging
 * the object again.
 */
const PROVISIONAL: TrackSyncAnswer = { users: [], message: 'success' };

/** Validates, stages and applies the one object; answers the profile's state of what it named. */
export async function trackSync(
  deps: TrackSyncDeps,
  workspaceId: string,
  body: unknown,
  idempotencyKey?: ClaimedKey,
): Promise<TrackSyncAnswer> {
  const raw = theOneObject(body);
  let objects: TrackObjects;
  try {
    objects = validateTrackBody(body, toIso(Date.now())).objects;
  } catch (err) {
    if (err instanceof FatalTrackError) throw badRequest(err.message);
    throw err;
  }
  const ids = await stageObjects(
    deps.pool,
    workspaceId,
    objects,
    deps.config.INGEST_PARTITIONS,
    idempotencyKey && { key: idempotencyKey, status: 201, body: PROVISIONAL },
  );
  await drainThrough(deps.pool, Math.max(...ids), {
    maxRows: Math.max(1, deps.config.INGEST_BATCH_MAX_JOBS),
    partitions: deps.config.INGEST_PARTITIONS,
    log: deps.log,
    metrics: deps.metrics,
  });
  const dead = await deps.pool.query(`SELECT 1 FROM ingest_dead_letters WHERE staged_id = ANY($1::bigint[]) LIMIT 1`, [
    ids,
  ]);
  if (dead.rowCount !== 0)
    throw new AppError('internal', 'The object was refused by the database; it is kept as a dead letter');
  const target = objects.attributes[0] ?? objects.events[0] ?? objects.purchases[0]!;
  const [found] = await resolveOne(deps.pool, workspaceId, [refOf(target.identity)]);
  const answer: TrackSyncAnswer = {
    users:
      found && typeof found === 'object'
        ? [await whatChanged(deps.pool, found.id, objects, identifierAsSent(raw))]
        : [],
    message: 'success',
  };
  if (idempotencyKey) await replaceAnswer(deps.pool, idempotencyKey.claim, 201, answer);
  return answer;
}

interface Aggregate {
  first: string;
  last: string;
  count: number;
}

/** The profile's values of the custom attributes, the event or the product the request named. */
async function whatChanged(
  pool: Pool,
  profileId: number,
  objects: TrackObjects,
  user: SyncedUser,
): Promise<SyncedUser> {
  const { rows } = await pool.query<{
    custom_attributes: Record<string, unknown>;
    custom_events: Record<string, Aggregate>;
    purchases: Record<string, Aggregate>;
  }>(`SELECT custom_attributes, custom_events, purchases FROM profiles WHERE id = $1`, [profileId]);
  const p = rows[0]!;
  const attributes = objects.attributes[0];
  if (attributes) {
    const names = Object.keys(attributes.custom);
    return { ...user, custom_attributes: Object.fromEntries(names.map((n) => [n, p.custom_attributes[n] ?? null])) };
  }
  const event = objects.events[0];
  if (event) {
    const e = p.custom_events[event.name];
    return { ...user, custom_events: e ? [{ name: event.name, first: e.first, last: e.last, count: e.count }] : [] };
  }
  const productId = objects.purchases[0]!.product_id;
  const c = p.purchases[productId];
  return {
    ...user,
    purchase_events: c ? [{ product_id: productId, first: c.first, last: c.last, count: c.count }] : [],
  };
}
