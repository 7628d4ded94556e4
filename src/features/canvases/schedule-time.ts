import { z } from 'zod';

/**
 * The schedule object: `time` (ISO 8601) and `in_local_time`. In UTC mode `time` is an instant (no zone means UTC).
 * In local mode only its wall-clock part counts: each user receives the send when their own clock shows it, and a
 * zone designator, which the public API tells clients not to send in that mode, is ignored.
 */

/** The public API schedules at most 90 days ahead. */
export const MAX_DAYS_AHEAD = 90;
/** A time this close behind now is "now" (client clocks drift); further back is refused. */
export const PAST_GRACE_MS = 60_000;

const TIME = /^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,9}))?)?(Z|[+-]\d{2}(?::?\d{2})?)?$/i;

export interface ScheduleTime {
  /** The wall-clock time as PostgreSQL `timestamp` text, 'YYYY-MM-DD HH:MM:SS.mmm'. */
  wallClock: string;
  /** The instant (UTC mode); in local mode the wall clock read as UTC. */
  instant: Date;
}

/** Parses `time`; null when it is not an ISO 8601 date-time or names a day or time that does not exist. */
export function parseScheduleTime(text: string, inLocalTime: boolean): ScheduleTime | null {
  const m = TIME.exec(text);
  if (!m) return null;
  const [y, mo, d, h, mi] = [1, 2, 3, 4, 5].map((i) => Number(m[i]));
  const s = m[6] === undefined ? 0 : Number(m[6]);
  const ms = m[7] === undefined ? 0 : Math.floor(Number(`0.${m[7]}`) * 1000);
  const wall = new Date(Date.UTC(y!, mo! - 1, d!, h!, mi!, s, ms));
  if (
    wall.getUTCFullYear() !== y ||
    wall.getUTCMonth() !== mo! - 1 ||
    wall.getUTCDate() !== d ||
    h! > 23 ||
    mi! > 59 ||
    s > 59
  )
    return null;
  let offsetMs = 0;
  const zone = m[8];
  if (!inLocalTime && zone && zone.toUpperCase() !== 'Z') {
    const z = /^([+-])(\d{2})(?::?(\d{2}))?$/.exec(zone)!;
    const [oh, om] = [Number(z[2]), Number(z[3] ?? 0)];
    if (oh > 14 || om > 59) return null;
    offsetMs = (z[1] === '-' ? -1 : 1) * (oh * 60 + om) * 60_000;
  }
  const wallClock = wall.toISOString().replace('T', ' ').replace('Z', '');
  return { wallClock, instant: new Date(wall.getTime() - offsetMs) };
}

export const ScheduleObject = z
  .strictObject(
    {
      time: z.string({
        error: (i) => (i.input == null ? 'schedule.time is required' : 'schedule.time must be an ISO 8601 string'),
      }),
      in_local_time: z.boolean({ error: 'schedule.in_local_time must be true or false' }).optional(),
      at_optimal_time: z
        .boolean({ error: 'schedule.at_optimal_time must be true or false' })
        .refine((v) => !v, 'schedule.at_optimal_time is not supported')
        .optional(),
    },
    {
      error: (i) =>
        i.code === 'unrecognized_keys'
          ? `schedule: unknown field ${(i as { keys?: string[] }).keys?.join(', ')}`
          : 'schedule must be an object {time, in_local_time}',
    },
  )
  .superRefine((s, ctx) => {
    if (!parseScheduleTime(s.time, s.in_local_time === true)) {
      ctx.addIssue({
        code: 'custom',
        path: ['time'],
        message: 'schedule.time must be an ISO 8601 date-time such as 2026-05-01T09:00:00Z',
      });
    }
  });
export type ScheduleObject = z.infer<typeof ScheduleObject>;
