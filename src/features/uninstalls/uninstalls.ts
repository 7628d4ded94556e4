import { z } from 'zod';
import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { badRequest } from '../../platform/errors.js';
import { DAY_MS, utcDay } from '../../platform/lib/iso-time.js';
import { RecordTime, recordsBody, refuseUnknown, type RecordResult } from '../../platform/lib/records-body.js';
import { lockWorkspaceProfiles } from '../../profiles/write/locks.js';
import { idsByExternalId } from '../../profiles/lookup.js';
import { markUninstalled } from '../../profiles/states.js';
import { eventIdSql } from '../../profiles/event-log.js';

/**
 * App uninstalls: events recorded through the internal API (POST /records/uninstalls, by user or anonymous) and
 * declared in the workspace file (counts of anonymous events), counted by the KPI read GET /kpi/uninstalls/data_series.
 */

export const UninstallRecord = z.strictObject({
  app_id: z
    .string({ error: 'app_id must be a string' })
    .min(1, 'app_id must not be empty')
    .max(255, 'app_id is at most 255 characters'),
  external_id: z
    .string({ error: 'external_id must be a string' })
    .min(1, 'external_id must not be empty')
    .max(255, 'external_id is at most 255 characters')
    .optional(),
  time: RecordTime,
});
export const UninstallRecords = recordsBody(UninstallRecord);
export type UninstallRecordInput = z.output<typeof UninstallRecord>;

/**
 * Records app uninstalls (what the uninstall KPI counts). A record naming a user also moves that profile's
 * `uninstalled_at` forward and is logged (users.behaviors.Uninstall, keyed by its uninstall_events row) by the
 * statement that records it, and an exact repeat for the same user (same app and time) is skipped; records without a
 * user are anonymous counts, always added and not logged (an event of the log is about a person). Unknown app ids or
 * external ids refuse the whole batch.
 */
export async function recordUninstalls(
  pool: Pool,
  workspaceId: string,
  records: UninstallRecordInput[],
  now = new Date(),
): Promise<RecordResult> {
  return withTransaction(pool, async (client) => {
    await lockWorkspaceProfiles(client, [workspaceId]);
    const appIds = [...new Set(records.map((r) => r.app_id))];
    const apps = await client.query<{ api_id: string; id: string }>(
      `SELECT api_id, id FROM apps WHERE workspace_id = $1 AND api_id = ANY($2)`,
      [workspaceId, appIds],
    );
    const appUuid = new Map(apps.rows.map((r) => [r.api_id, r.id]));
    refuseUnknown(
      'app_id',
      records.map((r) => r.app_id),
      new Set(appUuid.keys()),
    );

    const externalIds = [...new Set(records.flatMap((r) => (r.external_id === undefined ? [] : [r.external_id])))];
    const profileId = await idsByExternalId(client, workspaceId, externalIds);
    refuseUnknown(
      'external_id',
      records.map((r) => r.external_id),
      new Set(profileId.keys()),
    );

    const params = [
      workspaceId,
      records.map((r) => appUuid.get(r.app_id)!),
      records.map((r) => (r.external_id === undefined ? null : profileId.get(r.external_id)!)),
      records.map((r) => r.time ?? now),
    ];
    const input = `SELECT * FROM unnest($2::uuid[], $3::bigint[], $4::timestamptz[]) WITH ORDINALITY AS u(app_id, profile_id, occurred_at, n)`;
    const { rows } = await client.query<{ n: number }>(
      `WITH input AS (${input}),
       wanted AS (
         SELECT DISTINCT ON (app_id, profile_id, occurred_at) * FROM input WHERE profile_id IS NOT NULL
         UNION ALL
         SELECT * FROM input WHERE profile_id IS NULL
       ), ins AS (
         INSERT INTO uninstall_events (workspace_id, app_id, profile_id, occurred_at)
         SELECT $1, w.app_id, w.profile_id, w.occurred_at FROM wanted w
          WHERE w.profile_id IS NULL OR NOT EXISTS (
                SELECT 1 FROM uninstall_events e
                 WHERE e.app_id = w.app_id AND e.profile_id = w.profile_id AND e.occurred_at = w.occurred_at)
          ORDER BY w.n
         RETURNING id, app_id, profile_id, occurred_at
       ), logged AS (
         INSERT INTO event_log (workspace_id, id, type, time, profile_id, user_id, external_user_id, app_id)
         SELECT $1, ${eventIdSql('$1', `'uninstall:' || i.id::text`)}, 'users.behaviors.Uninstall', i.occurred_at,
                i.profile_id, p.service_id, p.external_id, a.api_id
           FROM ins i JOIN profiles p ON p.id = i.profile_id JOIN apps a ON a.id = i.app_id
       )
       SELECT count(*)::int AS n FROM ins`,
      params,
    );
    await markUninstalled(client, workspaceId, params[2] as Array<number | null>, params[3] as Date[]);
    const recorded = rows[0]!.n;
    return { recorded, duplicates: records.length - recorded };
  });
}

/**
 * Uninstall records are events, not objects: an entry declares `count` events of an app at one time. Re-applying
 * tops the stored events up to that count and never removes any (events from the API may share the moment).
 */
export async function topUpUninstalls(
  client: PoolClient,
  rows: { workspace_id: string; app_id?: string; occurred_at: string; count: number }[],
): Promise<{ created: number; updated: number; unchanged: number }> {
  if (rows.length === 0) return { created: 0, updated: 0, unchanged: 0 };
  const merged = new Map<string, (typeof rows)[number]>();
  for (const r of rows) {
    const k = `${r.workspace_id}/${r.app_id}/${r.occurred_at}`;
    const prev = merged.get(k);
    merged.set(k, prev ? { ...prev, count: prev.count + r.count } : r);
  }
  const { rows: result } = await client.query<{ created: number }>(
    `WITH i AS (SELECT * FROM jsonb_to_recordset($1::jsonb) AS x(workspace_id uuid, app_id uuid, occurred_at timestamptz, count int)),
          missing AS (
            SELECT i.workspace_id, i.app_id, i.occurred_at,
                   i.count - (SELECT count(*) FROM uninstall_events e
                               WHERE e.workspace_id = i.workspace_id AND e.occurred_at = i.occurred_at
                                 AND e.app_id = i.app_id AND e.profile_id IS NULL) AS n
              FROM i),
          ins AS (INSERT INTO uninstall_events (workspace_id, app_id, occurred_at)
                  SELECT m.workspace_id, m.app_id, m.occurred_at FROM missing m, generate_series(1, GREATEST(m.n, 0)) RETURNING 1)
     SELECT (SELECT count(*) FROM missing WHERE n > 0)::int AS created, (SELECT count(*) FROM ins) AS inserted`,
    [JSON.stringify([...merged.values()])],
  );
  const created = result[0]!.created;
  return { created, updated: 0, unchanged: merged.size - created };
}

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
export async function uninstallSeries(
  pool: Pool,
  workspaceId: string,
  opts: UninstallSeriesOptions,
): Promise<UninstallDay[]> {
  let appUuid: string | null = null;
  if (opts.appId !== undefined) {
    const { rows } = await pool.query<{ id: string }>(`SELECT id FROM apps WHERE workspace_id = $1 AND api_id = $2`, [
      workspaceId,
      opts.appId,
    ]);
    if (!rows[0]) throw badRequest(`Invalid app_id: no app ${JSON.stringify(opts.appId)} in this workspace`);
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
