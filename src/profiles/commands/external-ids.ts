import type { Pool, PoolClient } from '../../platform/db/pool.js';

/**
 * Renaming external ids (POST /users/external_ids/rename) and removing deprecated ones (.../remove). A rename gives
 * the profile a new primary id and keeps the old one as deprecated (profile_external_ids), so that the old id goes on
 * naming the profile for /users/track and every lookup until it is removed. The public API's rules: the current id
 * must be a primary id, the new one must be in use nowhere (primary or deprecated), the two must differ; only a
 * deprecated id can be removed. Each entry stands alone: one refused does not stop the others.
 *
 * `planRenames`/`planRemovals` decide, from the stored ids, what each entry does (entries of one request see the
 * earlier ones' effects: a -> b then b -> c); the request is answered from that plan, and the apply plans again when
 * the command's turn comes (src/pipelines/ingest/apply/command-rows.ts), writing only what is still allowed then.
 */

type Db = Pick<Pool | PoolClient, 'query'>;

export interface Rename {
  current: string;
  next: string;
}

/** Per entry: null when it goes ahead, else why not (the public API's wording). */
export type Plan = Array<string | null>;

interface IdState {
  profileId: number;
  primary: boolean;
}

async function idStates(db: Db, workspaceId: string, ids: string[]): Promise<Map<string, IdState>> {
  const { rows } = await db.query<{ external_id: string; profile_id: number; primary: boolean }>(
    `SELECT p.external_id, p.id AS profile_id, true AS primary FROM profiles p WHERE p.workspace_id = $1 AND p.external_id = ANY($2::text[])
     UNION ALL
     SELECT x.external_id, x.profile_id, false FROM profile_external_ids x WHERE x.workspace_id = $1 AND x.external_id = ANY($2::text[])`,
    [workspaceId, [...new Set(ids)]],
  );
  return new Map(rows.map((r) => [r.external_id, { profileId: r.profile_id, primary: r.primary }]));
}

export async function planRenames(
  db: Db,
  workspaceId: string,
  renames: Rename[],
): Promise<{ plan: Plan; state: Map<string, IdState> }> {
  const state = await idStates(
    db,
    workspaceId,
    renames.flatMap((r) => [r.current, r.next]),
  );
  const initial = new Map(state);
  const plan = renames.map(({ current, next }) => {
    if (current === next) return 'current_external_id and new_external_id must differ';
    const owner = state.get(current);
    if (!owner) return 'current_external_id does not name a user';
    if (!owner.primary)
      return 'current_external_id is a deprecated external ID; rename the user by its primary external ID';
    if (state.has(next)) return 'new_external_id is already in use';
    state.set(next, { profileId: owner.profileId, primary: true });
    state.set(current, { profileId: owner.profileId, primary: false });
    return null;
  });
  return { plan, state: initial };
}

/** Applies the renames the plan allows now, inside the caller's transaction (which holds the workspace's ingestion lock). */
export async function applyRenames(client: PoolClient, workspaceId: string, renames: Rename[]): Promise<Plan> {
  const { plan, state } = await planRenames(client, workspaceId, renames);
  for (const [i, { current, next }] of renames.entries()) {
    if (plan[i] !== null) continue;
    const profileId =
      state.get(current)?.profileId ?? (await idStates(client, workspaceId, [current])).get(current)!.profileId;
    state.set(next, { profileId, primary: true });
    await client.query(`INSERT INTO profile_external_ids (workspace_id, external_id, profile_id) VALUES ($1, $2, $3)`, [
      workspaceId,
      current,
      profileId,
    ]);
    await client.query(`UPDATE profiles SET external_id = $3, updated_at = now() WHERE workspace_id = $1 AND id = $2`, [
      workspaceId,
      profileId,
      next,
    ]);
  }
  return plan;
}

export async function planRemovals(db: Db, workspaceId: string, ids: string[]): Promise<Plan> {
  const state = await idStates(db, workspaceId, ids);
  return ids.map((id) => {
    const s = state.get(id);
    if (!s) return 'external_id is not a deprecated external ID of any user';
    if (s.primary) return 'external_id is a primary external ID; only deprecated external IDs can be removed';
    state.delete(id);
    return null;
  });
}

/** Removes the deprecated ids the plan allows now, inside the caller's transaction (which holds the workspace's ingestion lock). */
export async function applyRemovals(client: PoolClient, workspaceId: string, ids: string[]): Promise<Plan> {
  const plan = await planRemovals(client, workspaceId, ids);
  const removable = ids.filter((_, i) => plan[i] === null);
  if (removable.length > 0)
    await client.query(`DELETE FROM profile_external_ids WHERE workspace_id = $1 AND external_id = ANY($2::text[])`, [
      workspaceId,
      removable,
    ]);
  return plan;
}
