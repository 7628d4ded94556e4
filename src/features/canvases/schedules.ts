import { randomUUID } from 'node:crypto';
import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { badRequest, notFound } from '../../platform/errors.js';
import { segmentByApiId } from '../../profiles/segments/store.js';
import type { Logger } from '../../platform/logger.js';
import { enqueueFires, removeFires } from '../../platform/queues/canvas-schedule.js';
import type { Queues } from '../../platform/queues/index.js';
import { Audience, audiencePredicate, MAX_RECIPIENTS, Properties, Recipient } from './audience.js';
import {
  MAX_DAYS_AHEAD,
  PAST_GRACE_MS,
  parseScheduleTime,
  ScheduleObject,
  type ScheduleTime,
} from './schedule-time.js';

/**
 * Scheduled API-triggered canvases. A schedule is a row plus one BullMQ delayed job per fire instant: one instant
 * in UTC mode, one per group of the audience's time zones in local mode. Jobs carry the schedule's version, so an
 * update (which bumps it) turns every job armed before it into a no-op even if it could not be removed in time.
 */

const Id = (name: string) =>
  z
    .string({ error: (i) => (i.input == null ? `${name} is required` : `${name} must be a string`) })
    .min(1, `${name} is required`)
    .max(255, `${name} must be at most 255 characters`);

export const ScheduleCreateBody = z
  .strictObject({
    canvas_id: Id('canvas_id'),
    recipients: z
      .array(Recipient, { error: 'recipients must be an array of recipient objects' })
      .min(1, 'recipients must not be empty (omit it and set broadcast: true to target everyone)')
      .max(MAX_RECIPIENTS, `recipients takes at most ${MAX_RECIPIENTS} objects per request`)
      .optional(),
    audience: Audience.optional(),
    broadcast: z.boolean({ error: 'broadcast must be true or false' }).optional(),
    canvas_entry_properties: Properties('canvas_entry_properties').optional(),
    trigger_properties: Properties('trigger_properties').optional(),
    schedule: ScheduleObject,
  })
  .superRefine((b, ctx) => {
    if (b.recipients && b.broadcast === true)
      ctx.addIssue({
        code: 'custom',
        path: ['broadcast'],
        message: 'broadcast must not be true when recipients are given',
      });
    if (!b.recipients && b.broadcast !== true) {
      ctx.addIssue({
        code: 'custom',
        path: ['broadcast'],
        message:
          'broadcast must be true when recipients are omitted (the send reaches the whole audience or workspace)',
      });
    }
  });
export type ScheduleCreate = z.infer<typeof ScheduleCreateBody>;

export const ScheduleUpdateBody = z.strictObject({
  canvas_id: Id('canvas_id'),
  schedule_id: Id('schedule_id'),
  schedule: ScheduleObject,
  trigger_properties: Properties('trigger_properties').optional(),
  canvas_entry_properties: Properties('canvas_entry_properties').optional(),
});
export type ScheduleUpdate = z.infer<typeof ScheduleUpdateBody>;

export const ScheduleDeleteBody = z.strictObject({ canvas_id: Id('canvas_id'), schedule_id: Id('schedule_id') });
export type ScheduleDelete = z.infer<typeof ScheduleDeleteBody>;

/** A schedule row as the arming code needs it. */
export interface ScheduleRow {
  id: string;
  workspace_id: string;
  schedule: { time: string; in_local_time?: boolean };
  recipients: unknown;
  audience: unknown;
  version: number;
  state: string;
  fire_times: Date[] | null;
}

const SCHEDULE_COLUMNS = `s.id, c.workspace_id, s.schedule, s.recipients, s.audience, s.version, s.state, s.fire_times`;

interface CanvasRow {
  id: string;
  status: string;
  archived: boolean;
  api_triggered: boolean;
}

async function canvasOf(db: PoolClient, workspaceId: string, canvasApiId: string): Promise<CanvasRow> {
  const { rows } = await db.query<CanvasRow>(
    `SELECT id, status, archived, api_triggered FROM canvases WHERE workspace_id = $1 AND api_id = $2`,
    [workspaceId, canvasApiId],
  );
  if (!rows[0]) throw notFound(`Unknown canvas_id ${JSON.stringify(canvasApiId.slice(0, 64))}`);
  return rows[0];
}

function checkTime(t: ScheduleTime, inLocalTime: boolean, now: Date): void {
  // In local time the last zone to reach the wall clock is UTC-12; in UTC mode the instant itself.
  const latest = inLocalTime ? t.instant.getTime() + 12 * 3600_000 : t.instant.getTime();
  if (latest < now.getTime() - PAST_GRACE_MS) {
    throw badRequest(
      inLocalTime ? 'schedule.time has already passed in every time zone' : 'schedule.time is in the past',
    );
  }
  const earliest = inLocalTime ? t.instant.getTime() - 14 * 3600_000 : t.instant.getTime();
  if (earliest > now.getTime() + MAX_DAYS_AHEAD * 86_400_000)
    throw badRequest(`schedule.time must be at most ${MAX_DAYS_AHEAD} days ahead`);
}

/**
 * The UTC instants a schedule fires at. Local mode: one per distinct UTC instant at which the audience's time zones
 * reach the wall-clock time (users without a known IANA zone count as UTC); instants already past are dropped, as
 * those users' local time has gone by.
 */
export async function computeFireTimes(db: Pool | PoolClient, row: ScheduleRow, now: Date): Promise<Date[]> {
  const inLocal = row.schedule.in_local_time === true;
  const t = parseScheduleTime(row.schedule.time, inLocal);
  if (!t) throw badRequest('schedule.time must be an ISO 8601 date-time such as 2026-05-01T09:00:00Z');
  if (!inLocal) return [t.instant];
  const predicate = await audiencePredicate(db, row.workspace_id, row.recipients, row.audience, 2);
  // An audience that cannot be resolved still gets one instant: the firing records why it entered nobody.
  if ('unresolved' in predicate) return [t.instant];
  const { rows } = await db.query<{ fire_at: Date }>(
    `WITH zones AS MATERIALIZED (SELECT name FROM pg_timezone_names),
          aud AS (SELECT DISTINCT COALESCE(z.name, 'UTC') AS zone FROM profiles p LEFT JOIN zones z ON z.name = p.time_zone WHERE ${predicate.sql})
     SELECT DISTINCT ($1::timestamp AT TIME ZONE zone) AS fire_at FROM aud ORDER BY 1`,
    [t.wallClock, ...predicate.params],
  );
  const instants = rows.length > 0 ? rows.map((r) => r.fire_at) : [t.instant];
  return instants.filter((d) => d.getTime() >= now.getTime() - PAST_GRACE_MS);
}

export interface CreatedSchedule {
  schedule_id: string;
  dispatch_id: string;
}

export async function createSchedule(
  pool: Pool,
  queues: Queues,
  workspaceId: string,
  body: ScheduleCreate,
  now = new Date(),
): Promise<CreatedSchedule> {
  const inLocal = body.schedule.in_local_time === true;
  checkTime(parseScheduleTime(body.schedule.time, inLocal)!, inLocal, now);
  return withTransaction(pool, async (client) => {
    const canvas = await canvasOf(client, workspaceId, body.canvas_id);
    if (!canvas.api_triggered) throw badRequest(`Canvas ${JSON.stringify(body.canvas_id)} is not API-triggered`);
    if (canvas.archived || canvas.status !== 'active')
      throw badRequest(
        `Canvas ${JSON.stringify(body.canvas_id)} is not active (${canvas.archived ? 'archived' : canvas.status})`,
      );
    if (body.audience) {
      const segment = await segmentByApiId(client, workspaceId, body.audience.segment_id);
      if (!segment || segment.archived)
        throw notFound(`Unknown audience.segment_id ${JSON.stringify(body.audience.segment_id.slice(0, 64))}`);
    }
    const ids = { schedule_id: randomUUID(), dispatch_id: randomUUID() };
    const { rows } = await client.query<{ id: string }>(
      `INSERT INTO canvas_schedules (canvas_id, schedule_id, dispatch_id, schedule, recipients, audience, trigger_properties, canvas_entry_properties, broadcast)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING id`,
      [
        canvas.id,
        ids.schedule_id,
        ids.dispatch_id,
        JSON.stringify(body.schedule),
        body.recipients ? JSON.stringify(body.recipients) : null,
        body.audience ? JSON.stringify(body.audience) : null,
        body.trigger_properties ? JSON.stringify(body.trigger_properties) : null,
        body.canvas_entry_properties ? JSON.stringify(body.canvas_entry_properties) : null,
        body.broadcast === true,
      ],
    );
    const row: ScheduleRow = {
      id: rows[0]!.id,
      workspace_id: workspaceId,
      schedule: body.schedule,
      recipients: body.recipients ?? null,
      audience: body.audience ?? null,
      version: 1,
      state: 'scheduled',
      fire_times: null,
    };
    const fireTimes = await computeFireTimes(client, row, now);
    if (fireTimes.length === 0) throw badRequest('schedule.time has already passed in every time zone of the audience');
    await client.query(`UPDATE canvas_schedules SET fire_times = $2 WHERE id = $1`, [row.id, fireTimes]);
    // Armed before COMMIT so a Redis failure refuses the request with nothing stored; a job that starts before the
    // commit is visible waits for it (see fireSchedule).
    await enqueueFires(queues, row, fireTimes, now);
    return ids;
  });
}

async function lockSchedule(
  client: PoolClient,
  workspaceId: string,
  canvasApiId: string,
  scheduleId: string,
): Promise<ScheduleRow> {
  const canvas = await canvasOf(client, workspaceId, canvasApiId);
  const { rows } = await client.query<ScheduleRow>(
    `SELECT ${SCHEDULE_COLUMNS} FROM canvas_schedules s JOIN canvases c ON c.id = s.canvas_id
      WHERE s.schedule_id = $1 AND s.canvas_id = $2 AND s.state <> 'cancelled' FOR UPDATE OF s`,
    [scheduleId, canvas.id],
  );
  if (!rows[0])
    throw notFound(
      `Unknown schedule_id ${JSON.stringify(scheduleId.slice(0, 64))} for canvas ${JSON.stringify(canvasApiId.slice(0, 64))}`,
    );
  return rows[0];
}

export interface UpdateOutcome {
  /** False when the schedule had already been sent to its whole audience: nothing changed. */
  applied: boolean;
  detail?: string;
}

/**
 * Replaces a schedule (spec: the new one fully replaces the old; without in_local_time it is UTC). Close to or
 * after the send time it is best effort: users already entered by this schedule are not entered again.
 */
export async function updateSchedule(
  pool: Pool,
  queues: Queues,
  workspaceId: string,
  body: ScheduleUpdate,
  now = new Date(),
): Promise<UpdateOutcome> {
  const inLocal = body.schedule.in_local_time === true;
  checkTime(parseScheduleTime(body.schedule.time, inLocal)!, inLocal, now);
  type Replaced = { id: string; version: number; fireTimes: Date[] | null };
  const { outcome, old } = await withTransaction(
    pool,
    async (client): Promise<{ outcome: UpdateOutcome; old?: Replaced }> => {
      const row = await lockSchedule(client, workspaceId, body.canvas_id, body.schedule_id);
      const { rows: sent } = await client.query<{ all_covered: boolean | null; any: boolean }>(
        `SELECT bool_or(time_zones IS NULL) AS all_covered, count(*) > 0 AS any FROM canvas_dispatches WHERE schedule_row_id = $1 AND status <> 'skipped'`,
        [row.id],
      );
      if (row.state === 'sent' || sent[0]!.all_covered) {
        return {
          outcome: { applied: false, detail: 'The schedule had already been sent; the update was not applied' },
        };
      }
      const next: ScheduleRow = { ...row, schedule: body.schedule, version: row.version + 1 };
      const fireTimes = await computeFireTimes(client, next, now);
      if (fireTimes.length === 0)
        throw badRequest('schedule.time has already passed in every time zone of the audience');
      await client.query(
        `UPDATE canvas_schedules SET schedule = $2, version = $3, fire_times = $4,
              trigger_properties = COALESCE($5, trigger_properties), canvas_entry_properties = COALESCE($6, canvas_entry_properties), updated_at = now()
        WHERE id = $1`,
        [
          row.id,
          JSON.stringify(body.schedule),
          next.version,
          fireTimes,
          body.trigger_properties ? JSON.stringify(body.trigger_properties) : null,
          body.canvas_entry_properties ? JSON.stringify(body.canvas_entry_properties) : null,
        ],
      );
      await enqueueFires(queues, next, fireTimes, now);
      const replaced = { id: row.id, version: row.version, fireTimes: row.fire_times };
      return sent[0]!.any
        ? {
            outcome: {
              applied: true,
              detail: 'Part of the audience had already been sent this schedule; the update applies to the rest',
            },
            old: replaced,
          }
        : { outcome: { applied: true }, old: replaced };
    },
  );
  if (old) await removeFires(queues, old.id, old.version, old.fireTimes);
  return outcome;
}

/** Cancels a schedule: its pending firings never happen. */
export async function deleteSchedule(
  pool: Pool,
  queues: Queues,
  workspaceId: string,
  body: ScheduleDelete,
): Promise<void> {
  const row = await withTransaction(pool, async (client) => {
    const r = await lockSchedule(client, workspaceId, body.canvas_id, body.schedule_id);
    await client.query(`UPDATE canvas_schedules SET state = 'cancelled', updated_at = now() WHERE id = $1`, [r.id]);
    return r;
  });
  await removeFires(queues, row.id, row.version, row.fire_times);
}

/**
 * Arms every schedule still to send (at worker start; `onlyUnarmed` in the periodic sweep, for rows the workspace
 * file wrote or changed): rows without fire times get them, and every fire instant without a finished dispatch gets
 * its delayed job. Idempotent: job ids are deterministic and a firing
 * already done is not redone. One round trip per schedule; schedules are few, unlike users.
 */
export async function rearmSchedules(
  pool: Pool,
  queues: Queues,
  log: Logger,
  opts: { onlyUnarmed?: boolean; now?: Date } = {},
): Promise<{ schedules: number; jobs: number }> {
  const now = opts.now ?? new Date();
  const { rows: ids } = await pool.query<{ id: string }>(
    `SELECT id FROM canvas_schedules WHERE state IN ('scheduled', 'sending') AND (NOT $1 OR fire_times IS NULL) ORDER BY created_at`,
    [opts.onlyUnarmed === true],
  );
  let jobs = 0;
  for (const { id } of ids) {
    try {
      jobs += await withTransaction(pool, async (client) => {
        const { rows } = await client.query<ScheduleRow>(
          `SELECT ${SCHEDULE_COLUMNS} FROM canvas_schedules s JOIN canvases c ON c.id = s.canvas_id
            WHERE s.id = $1 AND s.state IN ('scheduled', 'sending') FOR UPDATE OF s`,
          [id],
        );
        const row = rows[0];
        if (!row) return 0;
        let fireTimes = row.fire_times;
        if (fireTimes === null) {
          fireTimes = await computeFireTimes(client, row, now);
          await client.query(
            `UPDATE canvas_schedules SET fire_times = $2, state = CASE WHEN cardinality($2::timestamptz[]) = 0 THEN 'sent' ELSE state END WHERE id = $1`,
            [row.id, fireTimes],
          );
          if (fireTimes.length === 0)
            log.warn(
              { scheduleRowId: row.id },
              'schedule armed after its time had passed in every time zone: nothing to send',
            );
        }
        const { rows: finished } = await client.query<{ fire_at: Date }>(
          `SELECT fire_at FROM canvas_dispatches WHERE schedule_row_id = $1 AND version = $2 AND status IN ('done', 'skipped')`,
          [row.id, row.version],
        );
        const done = new Set(finished.map((f) => f.fire_at.getTime()));
        const pending = fireTimes.filter((t) => !done.has(t.getTime()));
        if (pending.length > 0) await enqueueFires(queues, row, pending, now);
        return pending.length;
      });
    } catch (err) {
      log.error({ err, scheduleRowId: id }, 'could not arm canvas schedule');
    }
  }
  return { schedules: ids.length, jobs };
}
