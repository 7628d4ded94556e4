import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { applyObjects } from './apply-objects.js';
import { applyReferences } from './apply-references.js';
import { applyScimGroups } from './apply-scim-groups.js';
import { KINDS, type ApplyRun, type GeneratedSecret, type Kind } from './apply-specs.js';
import { applySecrets, applyTenancy } from './apply-tenancy.js';
import { WorkspaceFileError } from './parse.js';
import type { WorkspaceFile } from './schema.js';
import type { UpsertCounts } from './upsert.js';
import { lockForTransaction, lockNames } from '../../platform/db/advisory-locks.js';

export { KINDS, type GeneratedSecret, type Kind };

export interface ApplySummary {
  companyId: string;
  workspaceIds: Record<string, string>;
  counts: Record<Kind, UpsertCounts>;
  /** Secrets created by this apply because the file gave none: shown once, stored only hashed. */
  generatedSecrets: GeneratedSecret[];
}

export interface ApplyOptions {
  /** The moment relative record times (`today-3d`) are resolved against. */
  now?: Date;
}

/**
 * Applies a validated workspace file in one transaction: every kind is upserted by its natural key with one
 * statement, rows already as declared are left untouched, and nothing absent from the file is deleted. References
 * the file makes (apps, segments, canvases) may point at objects in the file or already stored; any that resolve to
 * nothing, and any clash with another workspace's stored ids or secrets, abort the whole apply with
 * WorkspaceFileError naming the path in the file.
 */
export async function applyWorkspaceFile(
  pool: Pool,
  file: WorkspaceFile,
  options: ApplyOptions = {},
): Promise<ApplySummary> {
  const now = options.now ?? new Date();
  try {
    return await withTransaction(pool, (client) => applyIn(client, file, now));
  } catch (err) {
    // A clash that slipped past the checks below (e.g. two apps swapping ids in one apply) still names the row.
    const pgErr = err as { code?: string; detail?: string; table?: string };
    if (pgErr.code === '23505') {
      throw new WorkspaceFileError([
        {
          path: '',
          message: `conflicts with stored data in ${pgErr.table ?? 'a table'}: ${pgErr.detail ?? 'duplicate key'}`,
        },
      ]);
    }
    throw err;
  }
}

async function applyIn(client: PoolClient, file: WorkspaceFile, now: Date): Promise<ApplySummary> {
  // Two applies of one company at once would race between their checks and writes.
  await lockForTransaction(client, lockNames.workspaceApply(file.company.name));
  const counts = Object.fromEntries(KINDS.map((k) => [k, { created: 0, updated: 0, unchanged: 0 }])) as Record<
    Kind,
    UpsertCounts
  >;
  const issues: ApplyRun['issues'] = [];
  const { companyId, workspaceIds, workspaces } = await applyTenancy(client, file, counts, issues);
  const run: ApplyRun = { client, file, now, counts, issues, generatedSecrets: [], companyId, workspaces };
  await applySecrets(run);
  await applyObjects(run);
  await applyReferences(run);
  await applyScimGroups(run);
  return { companyId, workspaceIds: Object.fromEntries(workspaceIds), counts, generatedSecrets: run.generatedSecrets };
}
