import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { AppError, badRequest, conflict, notFound } from '../../platform/errors.js';
import { parseIsoTime } from '../../platform/lib/iso-time.js';
import type { Queues } from '../../platform/queues/index.js';
import { enqueuePush } from '../../platform/queues/live-activity-push.js';
import { enqueueRemoval } from '../../platform/queues/live-activity-removal.js';
import { activityKitPayload, APNS_MAX_PAYLOAD_BYTES, payloadBytes } from './push.js';
import { ContentStateShape, shapeMismatch } from './shape.js';

/**
 * Live activities: a registration names an activity of an app and the shape of its content_state; updates change
 * the content or end the activity (spec "States and transitions"), and each accepted update becomes one
 * ActivityKit push on the live-activity-push queue.
 */

/** iOS keeps an ended activity on the lock screen for up to four hours when no dismissal date is given. */
export const DEFAULT_DISMISSAL_MS = 4 * 3600 * 1000;
const TEXT_MAX = 255;

const IsoDateTime = (name: string) =>
  z.string({ error: `${name} must be an ISO 8601 date-time string` }).transform((v, ctx) => {
    const parsed = parseIsoTime(v);
    if (!parsed?.hasTime) {
      ctx.addIssue({ code: 'custom', message: `${name} must be an ISO 8601 date-time such as 2026-05-01T18:30:00Z` });
      return z.NEVER;
    }
    return parsed.date;
  });
const Id = (name: string) =>
  z
    .string({ error: (i) => (i.input == null ? `${name} is required` : `${name} must be a string`) })
    .min(1, `${name} is required`)
    .max(TEXT_MAX, `${name} must be at most ${TEXT_MAX} characters`);
const AlertText = (name: string) =>
  z.string({ error: `${name} must be a string` }).max(1000, `${name} must be at most 1000 characters`);
const Alert = z.strictObject(
  { title: AlertText('alert title'), body: AlertText('alert body') },
  { error: 'alert must be an object with title and body strings' },
);

/**
 * `platform_push` takes the alert as the public API's push object does (`{alert: {title, body}}`), or its title and
 * body directly.
 */
const PlatformPush = z
  .strictObject(
    {
      alert: Alert.optional(),
      title: AlertText('platform_push.title').optional(),
      body: AlertText('platform_push.body').optional(),
    },
    { error: 'notification.platform_push must be an object' },
  )
  .transform((p, ctx) => {
    if (p.alert && (p.title !== undefined || p.body !== undefined)) {
      ctx.addIssue({
        code: 'custom',
        message: 'platform_push takes either alert {title, body} or title and body, not both',
      });
      return z.NEVER;
    }
    const alert =
      p.alert ?? (p.title !== undefined && p.body !== undefined ? { title: p.title, body: p.body } : undefined);
    if (!alert) {
      ctx.addIssue({ code: 'custom', message: 'platform_push needs an alert with title and body strings' });
      return z.NEVER;
    }
    return alert;
  });

export const LiveActivityUpdateBody = z.strictObject({
  app_id: Id('app_id'),
  activity_id: Id('activity_id'),
  content_state: z.record(z.string(), z.unknown(), { error: 'content_state is required and must be an object' }),
  end_activity: z.boolean({ error: 'end_activity must be true or false' }).optional(),
  dismissal_date: IsoDateTime('dismissal_date').optional(),
  stale_date: IsoDateTime('stale_date').optional(),
  notification: z
    .strictObject(
      { platform_push: PlatformPush },
      { error: 'notification must be an object with a platform_push object' },
    )
    .optional(),
});
export type LiveActivityUpdate = z.output<typeof LiveActivityUpdateBody>;

export const LiveActivityRegisterBody = z.strictObject({
  app_id: Id('app_id'),
  activity_id: Id('activity_id'),
  push_token: z
    .string({ error: (i) => (i.input == null ? 'push_token is required' : 'push_token must be a string') })
    .regex(
      /^[0-9a-fA-F]{16,512}$/,
      'push_token must be the hex string of an ActivityKit push token (16 to 512 hex digits)',
    ),
  /** Required when the activity was not declared before (in the workspace file or by an earlier registration). */
  content_state_shape: ContentStateShape.optional(),
  external_id: z
    .string({ error: 'external_id must be a string' })
    .min(1)
    .max(TEXT_MAX, `external_id must be at most ${TEXT_MAX} characters`)
    .optional(),
});
export type LiveActivityRegistration = z.output<typeof LiveActivityRegisterBody>;

interface ActivityRow {
  id: string;
  state: 'running' | 'ended' | 'removed';
  content_state_shape: ContentStateShape;
}

async function appOf(db: Pool | PoolClient, workspaceId: string, appApiId: string): Promise<string> {
  const { rows } = await db.query<{ id: string }>(`SELECT id FROM apps WHERE workspace_id = $1 AND api_id = $2`, [
    workspaceId,
    appApiId,
  ]);
  if (!rows[0]) throw notFound(`Unknown app_id ${JSON.stringify(appApiId.slice(0, 64))}`);
  return rows[0].id;
}

function endedError(activityId: string, state: string): AppError {
  return conflict(
    `Live activity ${JSON.stringify(activityId.slice(0, 64))} has ${state === 'removed' ? 'ended and been removed' : 'ended'}; it can no longer be updated`,
  );
}

export interface UpdateOutcome {
  pushId: number;
  state: 'running' | 'ended' | 'removed';
}

/** Applies one update or end (spec table), records its push and queues delivery, all or nothing. */
export async function updateLiveActivity(
  pool: Pool,
  queues: Queues,
  workspaceId: string,
  u: LiveActivityUpdate,
  now = new Date(),
): Promise<UpdateOutcome> {
  return withTransaction(pool, async (client) => {
    const appId = await appOf(client, workspaceId, u.app_id);
    const { rows } = await client.query<ActivityRow>(
      `SELECT id, state, content_state_shape FROM live_activities WHERE app_id = $1 AND activity_id = $2 FOR UPDATE`,
      [appId, u.activity_id],
    );
    const activity = rows[0];
    if (!activity) throw notFound(`Unknown activity_id ${JSON.stringify(u.activity_id.slice(0, 64))} for this app`);
    if (activity.state !== 'running') throw endedError(u.activity_id, activity.state);
    const mismatch = shapeMismatch(activity.content_state_shape, u.content_state);
    if (mismatch) throw badRequest(mismatch);

    const end = u.end_activity === true;
    // Without a dismissal date iOS applies its own (up to four hours); we record when that will be.
    const dismissal = end ? (u.dismissal_date ?? new Date(now.getTime() + DEFAULT_DISMISSAL_MS)) : null;
    const removeNow = dismissal !== null && dismissal.getTime() <= now.getTime();
    const payload = activityKitPayload({
      event: end ? 'end' : 'update',
      contentState: u.content_state,
      now,
      staleDate: u.stale_date,
      dismissalDate: end ? u.dismissal_date : undefined,
      alert: u.notification?.platform_push,
    });
    const bytes = payloadBytes(payload);
    if (bytes > APNS_MAX_PAYLOAD_BYTES) {
      throw badRequest(
        `The push for this update is ${bytes} bytes; APNs accepts at most ${APNS_MAX_PAYLOAD_BYTES} (shorten content_state or the alert)`,
      );
    }

    const state = end ? (removeNow ? 'removed' : 'ended') : 'running';
    await client.query(
      `UPDATE live_activities SET
          content_state = $2, stale_date = $3, state = $4,
          dismissal_date = CASE WHEN $5::timestamptz IS NULL THEN dismissal_date ELSE $5 END,
          ended_at = CASE WHEN $4 <> 'running' THEN $6 ELSE ended_at END,
          removed_at = CASE WHEN $4 = 'removed' THEN $6 ELSE removed_at END,
          updated_at = $6
        WHERE id = $1`,
      [activity.id, JSON.stringify(u.content_state), u.stale_date ?? null, state, dismissal, now],
    );
    const push = await client.query<{ id: number }>(
      `INSERT INTO live_activity_pushes (live_activity_id, event, payload) VALUES ($1, $2, $3) RETURNING id`,
      [activity.id, payload.aps.event, JSON.stringify(payload)],
    );
    const pushId = push.rows[0]!.id;
    // Queued before COMMIT so that a Redis failure refuses the request with nothing changed; a job that runs before
    // the commit is visible retries (deliverPush throws PushNotVisibleError).
    await enqueuePush(queues, pushId);
    if (state === 'ended') await enqueueRemoval(queues, activity.id, dismissal!, now);
    return { pushId, state };
  });
}

/**
 * Registers a device's push token for an activity. A new activity needs its content_state shape; a declared one
 * must be running, and a shape sent for it must equal the declared one.
 */
export async function registerLiveActivity(
  pool: Pool,
  workspaceId: string,
  r: LiveActivityRegistration,
): Promise<{ created: boolean }> {
  return withTransaction(pool, async (client) => {
    const appId = await appOf(client, workspaceId, r.app_id);
    const { rows } = await client.query<ActivityRow>(
      `SELECT id, state, content_state_shape FROM live_activities WHERE app_id = $1 AND activity_id = $2 FOR UPDATE`,
      [appId, r.activity_id],
    );
    let activity = rows[0];
    let created = false;
    if (activity) {
      if (activity.state !== 'running') throw endedError(r.activity_id, activity.state);
      const declared = activity.content_state_shape;
      const declaredIsEmpty = Object.keys(declared).length === 0;
      if (r.content_state_shape && !sameShape(declared, r.content_state_shape)) {
        if (!declaredIsEmpty) throw conflict('content_state_shape differs from the shape declared for this activity');
        await client.query(`UPDATE live_activities SET content_state_shape = $2, updated_at = now() WHERE id = $1`, [
          activity.id,
          JSON.stringify(r.content_state_shape),
        ]);
      }
    } else {
      if (!r.content_state_shape) throw badRequest('content_state_shape is required to register a new activity_id');
      const ins = await client.query<ActivityRow>(
        `INSERT INTO live_activities (app_id, activity_id, content_state_shape) VALUES ($1, $2, $3) RETURNING id, state, content_state_shape`,
        [appId, r.activity_id, JSON.stringify(r.content_state_shape)],
      );
      activity = ins.rows[0]!;
      created = true;
    }
    await client.query(
      `INSERT INTO live_activity_tokens (live_activity_id, push_token, external_id) VALUES ($1, $2, $3)
       ON CONFLICT (live_activity_id, push_token) DO UPDATE SET external_id = COALESCE(EXCLUDED.external_id, live_activity_tokens.external_id), updated_at = now()`,
      [activity.id, r.push_token.toLowerCase(), r.external_id ?? null],
    );
    return { created };
  });
}

function sameShape(a: ContentStateShape, b: ContentStateShape): boolean {
  const ka = Object.keys(a);
  return ka.length === Object.keys(b).length && ka.every((k) => a[k] === b[k]);
}
