import type { Pool } from '../../platform/db/pool.js';
import type { Logger } from '../../platform/logger.js';

/** APNs refuses a live activity push whose payload is over 4 KB. */
export const APNS_MAX_PAYLOAD_BYTES = 4096;

/** The push ActivityKit expects (Apple's "Updating and ending your Live Activity with ActivityKit push notifications"). */
export interface ActivityKitPayload {
  aps: {
    /** Seconds since the epoch; the device ignores a push older than the content it shows. */
    timestamp: number;
    event: 'update' | 'end';
    'content-state': Record<string, unknown>;
    'stale-date'?: number;
    'dismissal-date'?: number;
    alert?: { title: string; body: string };
  };
}

export interface PushInput {
  event: 'update' | 'end';
  contentState: Record<string, unknown>;
  now: Date;
  staleDate?: Date;
  dismissalDate?: Date;
  alert?: { title: string; body: string };
}

const seconds = (d: Date) => Math.floor(d.getTime() / 1000);

export function activityKitPayload(p: PushInput): ActivityKitPayload {
  const aps: ActivityKitPayload['aps'] = { timestamp: seconds(p.now), event: p.event, 'content-state': p.contentState };
  if (p.staleDate) aps['stale-date'] = seconds(p.staleDate);
  if (p.event === 'end' && p.dismissalDate) aps['dismissal-date'] = seconds(p.dismissalDate);
  if (p.alert) aps.alert = p.alert;
  return { aps };
}

export const payloadBytes = (payload: ActivityKitPayload) => Buffer.byteLength(JSON.stringify(payload));

/** What a delivery adapter is handed: the payload and the device tokens registered for the activity. */
export interface LiveActivityDelivery {
  pushId: number;
  appId: string;
  activityId: string;
  payload: ActivityKitPayload;
  tokens: string[];
}

/**
 * Sends a push to devices. An adapter that throws makes the job retry with backoff; one that returns has delivered
 * (or, for the recording adapter, recorded) the push. An APNs adapter (HTTP/2 to api.push.apple.com with a
 * token-based key, topic `<bundle id>.push-type.liveactivity`) plugs in here; it is not written yet.
 */
export interface DeliveryAdapter {
  readonly name: string;
  deliver(delivery: LiveActivityDelivery, log: Logger): Promise<void>;
}

/** The default: the push stays in live_activity_pushes (stamped delivered) for tests and operators to read. */
export const recordingAdapter: DeliveryAdapter = {
  name: 'record',
  async deliver(delivery, log) {
    log.debug({ pushId: delivery.pushId, tokens: delivery.tokens.length }, 'live activity push recorded');
  },
};

const ADAPTERS: Record<string, DeliveryAdapter> = { record: recordingAdapter };

export function deliveryAdapter(name: string): DeliveryAdapter {
  const adapter = ADAPTERS[name];
  if (!adapter) throw new Error(`unknown live activity delivery adapter ${name}`);
  return adapter;
}

export class PushNotVisibleError extends Error {}

/**
 * Delivers one recorded push through the adapter, once: a push already delivered is skipped, so a retried job
 * never sends twice from our side. A push not visible yet (its request's transaction has not committed) throws,
 * and the job retries.
 */
export async function deliverPush(
  pool: Pool,
  pushId: number,
  adapter: DeliveryAdapter,
  log: Logger,
  waitVisibleMs = 2000,
): Promise<'delivered' | 'already'> {
  let row = await loadPush(pool, pushId);
  // The job is queued just before its request commits, so it often starts first: wait a moment before retrying.
  for (const until = Date.now() + waitVisibleMs; !row && Date.now() < until;) {
    await new Promise((r) => setTimeout(r, 25));
    row = await loadPush(pool, pushId);
  }
  if (!row) throw new PushNotVisibleError(`live activity push ${pushId} is not visible yet`);
  if (row.status === 'delivered') return 'already';
  await adapter.deliver(
    { pushId, appId: row.app_api_id, activityId: row.activity_id, payload: row.payload, tokens: row.tokens },
    log,
  );
  await pool.query(
    `UPDATE live_activity_pushes SET status = 'delivered', adapter = $2, tokens = $3, delivered_at = now(), error = NULL WHERE id = $1`,
    [pushId, adapter.name, row.tokens.length],
  );
  return 'delivered';
}

async function loadPush(pool: Pool, pushId: number) {
  const { rows } = await pool.query<{
    status: string;
    payload: ActivityKitPayload;
    app_api_id: string;
    activity_id: string;
    tokens: string[];
  }>(
    `SELECT p.status, p.payload, a.api_id AS app_api_id, la.activity_id,
            ARRAY(SELECT t.push_token FROM live_activity_tokens t WHERE t.live_activity_id = la.id
                  UNION SELECT la.push_token WHERE la.push_token IS NOT NULL) AS tokens
       FROM live_activity_pushes p
       JOIN live_activities la ON la.id = p.live_activity_id
       JOIN apps a ON a.id = la.app_id
      WHERE p.id = $1`,
    [pushId],
  );
  return rows[0];
}

/** Marks a push failed for good (the job ran out of attempts), keeping the reason for operators. */
export async function failPush(pool: Pool, pushId: number, reason: string): Promise<void> {
  await pool.query(
    `UPDATE live_activity_pushes SET status = 'failed', error = $2 WHERE id = $1 AND status = 'queued'`,
    [pushId, reason.slice(0, 1000)],
  );
}

/** Removes an ended activity from the UI (its dismissal date has come). Idempotent. */
export async function removeEndedActivity(pool: Pool, liveActivityId: string): Promise<boolean> {
  const { rowCount } = await pool.query(
    `UPDATE live_activities SET state = 'removed', removed_at = now(), updated_at = now() WHERE id = $1 AND state = 'ended'`,
    [liveActivityId],
  );
  return (rowCount ?? 0) > 0;
}
