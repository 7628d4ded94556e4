import type { PoolClient } from '../../platform/db/pool.js';

/**
 * An erased person's events leave the event log (docs/privacy.md), and every hour of an event export whose files held
 * them is asked to be re-delivered without them (event_redeliveries, migration 0350: the export's next pass does it,
 * docs/events.md). The log has no btree entry per event by profile (migration 0460): custom events and purchases are
 * found in the hours their profile's `event_log_hours` names, by a BRIN range on `accepted_at` (the hour is re-delivered
 * whole anyway); the other types by a partial btree on `profile_id`. The profiles merged into the erased ones
 * (event_log_merged_profiles) are the same person: their rows keep the merged profile's id.
 */

/** The types whose rows the profile's stamped hours find; the partial index `event_log_profile` holds the others. */
const STAMPED_TYPES = `('users.behaviors.CustomEvent', 'users.behaviors.Purchase')`;

/** Where the log holds the events of the profiles about to be erased: read before their rows go. */
export interface LoggedPlaces {
  /** The profiles, and those merged into them. */
  profileIds: number[];
  /** The hours (since the Unix epoch, UTC) their custom events and purchases were logged in, that the log still holds. */
  hours: number[];
}

export async function loggedPlacesOf(client: PoolClient, profileIds: number[]): Promise<LoggedPlaces> {
  const { rows } = await client.query<{ merged: string[] | null; hours: number[] | null }>(
    `SELECT (SELECT array_agg(m.merged_profile_id) FROM event_log_merged_profiles m
              WHERE m.profile_id = ANY($1::bigint[])) AS merged,
            (SELECT array_agg(DISTINCT h ORDER BY h) FROM profiles p, unnest(p.event_log_hours) AS h
              WHERE p.id = ANY($1::bigint[]) AND h >= floor(extract(epoch FROM event_log_start()) / 3600)) AS hours`,
    [profileIds],
  );
  const merged = (rows[0]?.merged ?? []).map(Number);
  return { profileIds: [...profileIds, ...merged], hours: rows[0]?.hours ?? [] };
}

/**
 * A DELETE of the log's rows (`where`, over $1 the workspace and $2 the profiles) that asks for the re-delivery of
 * every exported file of the types and hours it deleted from.
 */
const deleteAndRedeliver = (where: string) => `
  WITH gone AS (DELETE FROM event_log WHERE workspace_id = $1 AND profile_id = ANY($2::bigint[]) AND ${where}
                RETURNING type, accepted_at)
  INSERT INTO event_redeliveries (export_id, event_type, hour)
  SELECT DISTINCT f.export_id, f.event_type, f.hour
    FROM (SELECT DISTINCT type, date_trunc('hour', accepted_at, 'UTC') AS hour FROM gone) p
    JOIN event_export_files f ON f.event_type = p.type AND f.hour = p.hour
    JOIN event_exports e ON e.id = f.export_id AND e.workspace_id = $1
  ON CONFLICT DO NOTHING`;

/**
 * Deletes the person's rows, but for the deletion's own `users.Deleted` event (identifiers only, no profile), which
 * stays for a warehouse to erase downstream. One statement per stamped hour: each prunes to its day partition and
 * reads its hour's block ranges.
 */
export async function eraseLoggedEvents(client: PoolClient, workspaceId: string, places: LoggedPlaces): Promise<void> {
  const ids = places.profileIds;
  await client.query(deleteAndRedeliver(`type NOT IN ${STAMPED_TYPES}`), [workspaceId, ids]);
  const inHour = deleteAndRedeliver(
    `type IN ${STAMPED_TYPES} AND accepted_at >= $3::timestamptz AND accepted_at < $3::timestamptz + interval '1 hour'`,
  );
  for (const hour of places.hours)
    await client.query(inHour, [workspaceId, ids, new Date(hour * 3_600_000).toISOString()]);
}
