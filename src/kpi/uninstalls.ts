import type { Pool } from '../db/pool.js';
import { badRequest } from '../errors.js';
import { DAY_MS, utcDay } from '../lib/iso-time.js';

export interface UninstallDay {
  /** `YYYY-MM-DD` (a UTC day). */
  time: string;
  uninstalls: number;
}

export interface UninstallSeriesOptions {
  /** Days in the series, 1 to 100. */
  length: number;
  /** The series ends at this instant: its UTC day is the last entry, counted up to this instant inclusive. */
  endingAt: Date;
  /** An app's API id; all apps of the workspace when omitted. */
  appId?: string;
}

/**
 * Uninstalls a UTC day, oldest first, one entry for every day of the range (days without uninstalls count 0).
 * An app_id the workspace does not have is refused rather than answered with zeros, which would look like good news.
 */
export async function uninstallSeries(pool: Pool, workspaceId: string, opts: UninstallSeriesOptions): Promise<UninstallDay[]> {
  let appUuid: string | null = null;
  if (opts.appId !== undefined) {
    const { rows } = await pool.query<{ id: string }>(`SELECT id FROM apps WHERE workspace_id = $1 AND api_id = $2`, [workspaceId, opts.appId]);
    if (!rows[0]) throw badRequest(`Invalid app_id: no app ${opts.appId} in this workspace`);
    appUuid = rows[0].id;
  }
  const lastDay = utcDay(opts.endingAt);
  const firstDayStart = new Date(Date.parse(`${lastDay}T00:00:00Z`) - (opts.length - 1) * DAY_MS);
  const { rows } = await pool.query<UninstallDay>(
    `SELECT to_char(d.day, 'YYYY-MM-DD') AS time, COALESCE(c.n, 0)::int AS uninstalls
       FROM generate_series($2::date, $3::date, interval '1 day') AS d(day)
       LEFT JOIN (
         SELECT (occurred_at AT TIME ZONE 'UTC')::date AS day, count(*) AS n
           FROM uninstall_events
          WHERE workspace_id = $1 AND occurred_at >= $4 AND occurred_at <= $5 AND ($6::uuid IS NULL OR app_id = $6)
          GROUP BY 1
       ) c ON c.day = d.day::date
      ORDER BY d.day`,
    [workspaceId, utcDay(firstDayStart), lastDay, firstDayStart, opts.endingAt, appUuid],
  );
  return rows;
}
