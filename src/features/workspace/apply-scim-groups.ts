import { AppError } from '../../platform/errors.js';
import { diffViews, recordGroupAudit, type ScimActor } from '../scim/audit.js';
import { GROUP_COLUMNS, renderGroups, type GroupRow } from '../scim/group-render.js';
import { groupView } from '../scim/groups.js';
import { auditedGroupChange, memberIds } from '../scim/memberships.js';
import { resolveGrantedPermissions } from '../scim/user-fields.js';
import type { StoredPermissions } from '../scim/user-rows.js';
import { failOnIssues } from './apply-issues.js';
import type { ApplyRun } from './apply-specs.js';

/** What a member's audit row names as the author of a role declared in a workspace file. */
const FILE_ACTOR: ScimActor = { tokenId: null, tokenName: 'workspace file', origin: 'ces workspace apply' };

/**
 * The file's SCIM groups: each group is created when the company has none of that displayName (any letter case) and
 * given the declared role; members are the identity provider's and are left as they are. A role that changes is on
 * each member's audit trail (group_grants), as when it changes through SCIM. Roles are resolved by the SCIM rules
 * (allowed strings, the company's workspaces, teams and permission sets), after the file's permission sets exist.
 */
export async function applyScimGroups(run: ApplyRun): Promise<void> {
  const { client, file, companyId, counts, issues } = run;
  const resolved: StoredPermissions[] = [];
  for (const [i, group] of file.scim_groups.entries()) {
    try {
      resolved.push(await resolveGrantedPermissions(client, companyId, group.permissions, ''));
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      issues.push({ path: `scim_groups[${i}].permissions`, message: err.message });
    }
  }
  failOnIssues(run);
  /** The group as its trail reads it (members counted, the role by names). */
  const viewOf = async (id: string) => {
    const { rows } = await client.query<GroupRow>(`SELECT ${GROUP_COLUMNS} FROM scim_groups WHERE id = $1`, [id]);
    return groupView((await renderGroups(client, companyId, rows, ''))[0]!);
  };
  for (const [i, group] of file.scim_groups.entries()) {
    const grants = JSON.stringify(resolved[i]);
    const { rows } = await client.query<{ id: string; grants: StoredPermissions | null }>(
      `SELECT id::text, grants FROM scim_groups WHERE company_id = $1 AND lower(display_name) = lower($2) FOR UPDATE`,
      [companyId, group.display_name],
    );
    const existing = rows[0];
    if (!existing) {
      const { rows: made } = await client.query<{ id: string }>(
        `INSERT INTO scim_groups (company_id, display_name, grants) VALUES ($1, $2, $3::jsonb) RETURNING id::text`,
        [companyId, group.display_name, grants],
      );
      await recordGroupAudit(
        client,
        companyId,
        made[0]!.id,
        FILE_ACTOR,
        'create',
        diffViews(null, await viewOf(made[0]!.id)),
      );
      counts.scim_groups.created += 1;
      continue;
    }
    const { rows: same } = await client.query<{ same: boolean }>(`SELECT $1::jsonb = $2::jsonb AS same`, [
      JSON.stringify(existing.grants),
      grants,
    ]);
    if (same[0]!.same) {
      counts.scim_groups.unchanged += 1;
      continue;
    }
    const before = await viewOf(existing.id);
    await auditedGroupChange(
      client,
      companyId,
      existing.id,
      await memberIds(client, existing.id),
      FILE_ACTOR,
      '',
      async () => {
        await client.query(`UPDATE scim_groups SET grants = $2::jsonb, updated_at = now() WHERE id = $1`, [
          existing.id,
          grants,
        ]);
      },
    );
    await recordGroupAudit(
      client,
      companyId,
      existing.id,
      FILE_ACTOR,
      'update',
      diffViews(before, await viewOf(existing.id)),
    );
    counts.scim_groups.updated += 1;
  }
}
