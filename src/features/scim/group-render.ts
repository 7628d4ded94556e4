import { attributeProjection, type AttributeSelection } from './attributes.js';
import { SCIM_GROUP_EXTENSION_SCHEMA, SCIM_GROUP_SCHEMA, type ScimGroup } from './group-schemas.js';
import { loadReferenceNames, renderPermissions } from './permissions-view.js';
import type { Db, StoredPermissions } from './user-rows.js';

/** A SCIM group as stored (`scim_groups`), and its SCIM representation. */

export interface GroupRow {
  id: string;
  display_name: string;
  external_id: string | null;
  grants: StoredPermissions | null;
  created_at: Date;
  updated_at: Date;
}

export const GROUP_COLUMNS = 'id::text, display_name, external_id, grants, created_at, updated_at';

/**
 * Whether a selection leaves members out: Entra ID reads groups with `excludedAttributes=members`, and a large
 * group's members are then not read at all.
 */
function excludesMembers(selection: AttributeSelection): boolean {
  if (selection.attributes !== undefined && selection.attributes.trim() !== '') {
    return !selection.attributes.split(',').some((n) => /(^|:)members(\.|$)/i.test(n.trim()));
  }
  return (selection.excludedAttributes ?? '')
    .split(',')
    .some((n) => /^(urn:ietf:params:scim:schemas:core:2\.0:group:)?members$/i.test(n.trim()));
}

/** Turns stored groups into SCIM representations: members by user id and userName, grants by current names. */
export async function renderGroups(
  db: Db,
  companyId: string,
  rows: GroupRow[],
  baseUrl: string,
  selection: AttributeSelection = {},
): Promise<ScimGroup[]> {
  const members = new Map<string, ScimGroup['members']>();
  if (rows.length > 0 && !excludesMembers(selection)) {
    const { rows: found } = await db.query<{ group_id: string; id: string; user_name: string }>(
      `SELECT m.group_id::text, u.id::text, coalesce(m.display, u.user_name) AS user_name
         FROM scim_group_members m JOIN dashboard_users u ON u.id = m.user_id
        WHERE m.group_id = ANY($1::uuid[]) AND u.company_id = $2
        ORDER BY m.added_at, u.id`,
      [rows.map((r) => r.id), companyId],
    );
    for (const f of found) {
      const list = members.get(f.group_id) ?? [];
      list.push({ value: f.id, display: f.user_name, $ref: `${baseUrl}/scim/v2/Users/${f.id}`, type: 'User' });
      members.set(f.group_id, list);
    }
  }
  const names = await loadReferenceNames(
    db,
    companyId,
    rows.flatMap((r) => (r.grants ? [r.grants] : [])),
  );
  return rows.map((r) => {
    const list = members.get(r.id) ?? [];
    return {
      schemas: [SCIM_GROUP_SCHEMA, SCIM_GROUP_EXTENSION_SCHEMA],
      id: r.id,
      ...(r.external_id === null ? {} : { externalId: r.external_id }),
      displayName: r.display_name,
      ...(list.length === 0 ? {} : { members: list }),
      ...(r.grants === null
        ? {}
        : { [SCIM_GROUP_EXTENSION_SCHEMA]: { permissions: renderPermissions(r.grants, names) } }),
      meta: {
        resourceType: 'Group' as const,
        created: r.created_at.toISOString(),
        lastModified: r.updated_at.toISOString(),
        location: `${baseUrl}/scim/v2/Groups/${r.id}`,
      },
    };
  });
}

/** Groups narrowed to a selection, members read only when the selection keeps them. */
export async function renderGroupsProjected(
  db: Db,
  companyId: string,
  rows: GroupRow[],
  baseUrl: string,
  selection: AttributeSelection,
) {
  const project = attributeProjection(selection, GROUP_URNS);
  return (await renderGroups(db, companyId, rows, baseUrl, selection)).map(project);
}

export const GROUP_URNS = { core: SCIM_GROUP_SCHEMA, extension: SCIM_GROUP_EXTENSION_SCHEMA };
