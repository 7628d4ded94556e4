import { z } from 'zod';
import { withTransaction, type Pool } from '../db/pool.js';
import { RecordTime, lockWorkspaceProfiles, recordsBody, refuseUnknown, type RecordResult } from './common.js';

export const UninstallRecord = z.strictObject({
  app_id: z.string({ error: 'app_id must be a string' }).min(1, 'app_id must not be empty').max(255, 'app_id is at most 255 characters'),
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
 * `uninstalled_at` forward, and an exact repeat for the same user (same app and time) is skipped; records without a
 * user are anonymous counts and always added. Unknown app ids or external ids refuse the whole batch.
 */
export async function recordUninstalls(pool: Pool, workspaceId: string, records: UninstallRecordInput[], now = new Date()): Promise<RecordResult> {
  return withTransaction(pool, async (client) => {
    await lockWorkspaceProfiles(client, workspaceId);
    const appIds = [...new Set(records.map((r) => r.app_id))];
    const apps = await client.query<{ api_id: string; id: string }>(`SELECT api_id, id FROM apps WHERE workspace_id = $1 AND api_id = ANY($2)`, [
      workspaceId,
      appIds,
    ]);
    const appUuid = new Map(apps.rows.map((r) => [r.api_id, r.id]));
    refuseUnknown(
      'app_id',
      records.map((r) => r.app_id),
      new Set(appUuid.keys()),
    );

    const externalIds = [...new Set(records.flatMap((r) => (r.external_id === undefined ? [] : [r.external_id])))];
    const profiles = await client.query<{ external_id: string; id: number }>(
      `SELECT external_id, id FROM profiles WHERE workspace_id = $1 AND external_id = ANY($2)`,
      [workspaceId, externalIds],
    );
    const profileId = new Map(profiles.rows.map((r) => [r.external_id, r.id]));
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
         RETURNING 1
       )
       SELECT count(*)::int AS n FROM ins`,
      params,
    );
    await client.query(
      `UPDATE profiles p SET uninstalled_at = GREATEST(p.uninstalled_at, x.at), updated_at = now()
         FROM (SELECT profile_id, max(occurred_at) AS at FROM (${input}) i WHERE profile_id IS NOT NULL GROUP BY profile_id) x
        WHERE p.id = x.profile_id AND p.workspace_id = $1 AND (p.uninstalled_at IS NULL OR p.uninstalled_at < x.at)`,
      params,
    );
    const recorded = rows[0]!.n;
    return { recorded, duplicates: records.length - recorded };
  });
}
