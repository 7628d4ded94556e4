import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { enterUsers } from '../../profiles/canvas-entries.js';
import type { Logger } from '../../platform/logger.js';
import { audiencePredicate } from './audience.js';
import type { CanvasFirePayload } from '../../platform/queues/canvas-schedule.js';
import { parseScheduleTime } from './schedule-time.js';

export interface FireOptions {
  now?: Date;
  /** A firing this late (the worker was down) is recorded as missed rather than sent. */
  maxLatenessMs: number;
  /** Profiles entered per statement. */
  batchSize: number;
  /** How long to wait for the row of a job queued just before its request committed. */
  waitVisibleMs?: number;
  log: Logger;
}

export type FireOutcome = 'gone' | 'stale' | 'already' | 'skipped' | 'done';

interface Claimed {
  dispatchRowId: number;
  workspaceId: string;
  canvasApiId: string;
  canvasName: string;
  recipients: unknown;
  audience: unknown;
  /** Zones this firing enters (local mode); null for every zone. */
  zones: string[] | null;
  /** Zones already entered by an earlier firing of this schedule. */
  covered: string[];
  /** Every zone name PostgreSQL knows (when zones matter): a user's zone outside it counts as UTC. */
  knownZones: string[];
}

interface Row {
  id: string;
  canvas_id: string;
  dispatch_id: string;
  version: number;
  state: string;
  schedule: { time: string; in_local_time?: boolean };
  recipients: unknown;
  audience: unknown;
  trigger_properties: unknown;
  canvas_entry_properties: unknown;
  workspace_id: string;
  canvas_api_id: string;
  canvas_name: string;
  canvas_status: string;
  canvas_archived: boolean;
}

/**
 * Fires one instant of a schedule: claims a dispatch row (so it happens once), then enters the targeted users into
 * the canvas in batches. Each batch is one statement that skips users already entered by this firing, so a retry
 * after a crash resumes without double counting.
 */
export async function fireSchedule(
  pool: Pool,
  job: CanvasFirePayload,
  opts: FireOptions,
): Promise<{ outcome: FireOutcome; usersEntered: number }> {
  const now = opts.now ?? new Date();
  const fireAt = new Date(job.fireAt);
  let claimed: Claimed | FireOutcome | 'invisible' = 'invisible';
  for (const until = Date.now() + (opts.waitVisibleMs ?? 2000); ;) {
    claimed = await claim(pool, job, fireAt, now, opts.maxLatenessMs);
    if (claimed !== 'invisible' || Date.now() >= until) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  // Never visible: its request rolled back (or the canvas was deleted).
  if (claimed === 'invisible') return { outcome: 'gone', usersEntered: 0 };
  if (typeof claimed === 'string') return { outcome: claimed, usersEntered: 0 };

  const c = claimed;
  let usersEntered = 0;
  if (!(c.zones !== null && c.zones.length === 0)) {
    const predicate = await audiencePredicate(pool, c.workspaceId, c.recipients, c.audience, 1);
    if ('unresolved' in predicate) {
      await finish(pool, job, c.dispatchRowId, 'skipped', predicate.unresolved);
      return { outcome: 'skipped', usersEntered: 0 };
    }
    usersEntered = await enterUsers(pool, c, predicate, fireAt, opts.batchSize);
  }
  await finish(pool, job, c.dispatchRowId, 'done', null);
  opts.log.info({ scheduleRowId: job.scheduleRowId, fireAt: job.fireAt, usersEntered }, 'canvas schedule fired');
  return { outcome: 'done', usersEntered };
}

/**
 * Claims the firing in one transaction, the schedule's row locked: its dispatch row inserted (or found running, after
 * a crash), skipped when late or its canvas is not active, else marked with the zones it enters.
 */
async function claim(
  pool: Pool,
  job: CanvasFirePayload,
  fireAt: Date,
  now: Date,
  maxLatenessMs: number,
): Promise<Claimed | FireOutcome | 'invisible'> {
  return withTransaction(pool, async (client) => {
    const row = await lockSchedule(client, job.scheduleRowId);
    // A job armed by an update that has not committed yet sees the older version: wait for it like a missing row.
    if (!row || row.version < job.version) return 'invisible';
    if (row.state === 'cancelled') return 'gone';
    if (row.version > job.version) return 'stale';

    const dispatchRowId = await claimDispatch(client, row, fireAt);
    if (dispatchRowId === 'already') return 'already';
    const skip = (note: string) => skipDispatch(client, dispatchRowId, row.id, note);
    const lateMs = now.getTime() - fireAt.getTime();
    if (lateMs > maxLatenessMs) return skip(`missed: the firing ran ${Math.round(lateMs / 1000)} s after its time`);
    if (row.canvas_archived || row.canvas_status !== 'active')
      return skip(`canvas is ${row.canvas_archived ? 'archived' : row.canvas_status}`);

    let zones: string[] | null = null;
    if (row.schedule.in_local_time === true) {
      const t = parseScheduleTime(row.schedule.time, true);
      if (!t) return skip('schedule.time is not a valid time');
      zones = await zonesAtWallClock(client, t.wallClock, fireAt);
    }
    return startDispatch(client, row, dispatchRowId, zones);
  });
}

/** The schedule's row with its canvas, locked for the claim. */
async function lockSchedule(client: PoolClient, scheduleRowId: string): Promise<Row | undefined> {
  const { rows } = await client.query<Row>(
    `SELECT s.id, s.canvas_id, s.dispatch_id, s.version, s.state, s.schedule, s.recipients, s.audience, s.trigger_properties,
            s.canvas_entry_properties, c.workspace_id, c.api_id AS canvas_api_id, c.name AS canvas_name, c.status AS canvas_status,
            c.archived AS canvas_archived
       FROM canvas_schedules s JOIN canvases c ON c.id = s.canvas_id
      WHERE s.id = $1 FOR UPDATE OF s`,
    [scheduleRowId],
  );
  return rows[0];
}

/** The id of this instant's dispatch row, inserted now or still running from a crashed run; 'already' once finished. */
async function claimDispatch(client: PoolClient, row: Row, fireAt: Date): Promise<number | 'already'> {
  const inserted = await client.query<{ id: number }>(
    `INSERT INTO canvas_dispatches (schedule_row_id, canvas_id, dispatch_id, version, fire_at, trigger_properties, canvas_entry_properties)
     VALUES ($1, $2, $3, $4, $5, $6, $7)
     ON CONFLICT (schedule_row_id, version, fire_at) DO NOTHING RETURNING id`,
    [row.id, row.canvas_id, row.dispatch_id, row.version, fireAt, row.trigger_properties, row.canvas_entry_properties],
  );
  const dispatchRowId = inserted.rows[0]?.id;
  if (dispatchRowId !== undefined) return dispatchRowId;
  const existing = await client.query<{ id: number; status: string }>(
    `SELECT id, status FROM canvas_dispatches WHERE schedule_row_id = $1 AND version = $2 AND fire_at = $3`,
    [row.id, row.version, fireAt],
  );
  if (existing.rows[0]!.status !== 'running') return 'already';
  return existing.rows[0]!.id; // resuming after a crash
}

async function skipDispatch(client: PoolClient, dispatchRowId: number, scheduleRowId: string, note: string) {
  await client.query(`UPDATE canvas_dispatches SET status = 'skipped', note = $2, finished_at = now() WHERE id = $1`, [
    dispatchRowId,
    note,
  ]);
  await markSentIfComplete(client, scheduleRowId);
  return 'skipped' as const;
}

/** The zones whose wall clock reads `wallClock` at `fireAt`: those a local-time firing enters. */
async function zonesAtWallClock(client: PoolClient, wallClock: string, fireAt: Date): Promise<string[]> {
  const z = await client.query<{ zones: string[] }>(
    `SELECT COALESCE(array_agg(name ORDER BY name), '{}') AS zones FROM pg_timezone_names WHERE ($1::timestamp AT TIME ZONE name) = $2`,
    [wallClock, fireAt],
  );
  return z.rows[0]!.zones;
}

/**
 * Records the zones the dispatch enters, marks the schedule as sending, and returns what entering the users needs:
 * the zones earlier firings of the schedule already covered, and every zone name when zones matter.
 */
async function startDispatch(
  client: PoolClient,
  row: Row,
  dispatchRowId: number,
  zones: string[] | null,
): Promise<Claimed> {
  const cov = await client.query<{ all_covered: boolean | null; zones: string[] }>(
    `SELECT bool_or(d.time_zones IS NULL) AS all_covered,
            COALESCE(array_agg(DISTINCT z) FILTER (WHERE z IS NOT NULL), '{}') AS zones
       FROM canvas_dispatches d LEFT JOIN LATERAL unnest(d.time_zones) z ON TRUE
      WHERE d.schedule_row_id = $1 AND d.id <> $2 AND d.status <> 'skipped'`,
    [row.id, dispatchRowId],
  );
  await client.query(`UPDATE canvas_dispatches SET time_zones = $2 WHERE id = $1`, [dispatchRowId, zones]);
  const known =
    zones !== null || cov.rows[0]!.zones.length > 0
      ? (await client.query<{ names: string[] }>(`SELECT array_agg(name) AS names FROM pg_timezone_names`)).rows[0]!
          .names
      : [];
  await client.query(
    `UPDATE canvas_schedules SET state = 'sending', updated_at = now() WHERE id = $1 AND state = 'scheduled'`,
    [row.id],
  );
  return {
    dispatchRowId,
    workspaceId: row.workspace_id,
    canvasApiId: row.canvas_api_id,
    canvasName: row.canvas_name,
    recipients: row.recipients,
    audience: row.audience,
    // Everyone was entered by an earlier firing (a UTC send before an update): nothing left to enter.
    zones: cov.rows[0]!.all_covered ? [] : zones,
    covered: cov.rows[0]!.zones,
    knownZones: known,
  };
}

async function finish(
  pool: Pool,
  job: CanvasFirePayload,
  dispatchRowId: number,
  status: 'done' | 'skipped',
  note: string | null,
): Promise<void> {
  await withTransaction(pool, async (client) => {
    await client.query(`SELECT 1 FROM canvas_schedules WHERE id = $1 FOR UPDATE`, [job.scheduleRowId]);
    await client.query(`UPDATE canvas_dispatches SET status = $2, note = $3, finished_at = now() WHERE id = $1`, [
      dispatchRowId,
      status,
      note,
    ]);
    await markSentIfComplete(client, job.scheduleRowId);
  });
}

/** A schedule is sent once every instant of its current version has a finished dispatch. */
async function markSentIfComplete(client: { query: Pool['query'] }, scheduleRowId: string): Promise<void> {
  await client.query(
    `UPDATE canvas_schedules s SET state = 'sent', updated_at = now()
      WHERE s.id = $1 AND s.state IN ('scheduled', 'sending') AND s.fire_times IS NOT NULL
        AND NOT EXISTS (
          SELECT 1 FROM unnest(s.fire_times) t
           WHERE NOT EXISTS (SELECT 1 FROM canvas_dispatches d
                              WHERE d.schedule_row_id = s.id AND d.version = s.version AND d.fire_at = t AND d.status IN ('done', 'skipped')))`,
    [scheduleRowId],
  );
}
