import type { Pool } from '../platform/db/pool.js';
import { refreshCustomAttributeNames } from './custom-attribute-names.js';
import { snapshotSegmentSizes } from './segments/sizes.js';

/**
 * One pass of the workers' statistics over a workspace (jobs/workspace-stats.ts): the size of each of its segments on
 * `day` and the custom attribute names its profiles hold. Both read the workspace's profiles, off the path of every
 * write; the read endpoints then answer with lookups (docs/read-endpoints.md).
 */
export async function takeWorkspaceStats(
  pool: Pool,
  workspaceId: string,
  day: string,
): Promise<{ segments: number; attributes: number }> {
  const segments = await snapshotSegmentSizes(pool, workspaceId, day);
  const attributes = await refreshCustomAttributeNames(pool, workspaceId, day);
  return { segments, attributes };
}

/** Every workspace, for the sweep that queues a pass of each. */
export async function allWorkspaceIds(pool: Pool): Promise<string[]> {
  const { rows } = await pool.query<{ id: string }>('SELECT id FROM workspaces ORDER BY id');
  return rows.map((r) => r.id);
}
