import { SCIM_EXTENSION_SCHEMA, SCIM_USER_SCHEMA, type ScimUser } from './schemas.js';
import { unique, type Db, type StoredPermissions, type UserRow } from './user-rows.js';

type ScimPermissions = NonNullable<ScimUser['permissions']>;

/** From stored dashboard users to SCIM User resources, references shown by their current names. */

/** Turns stored rows into SCIM representations, naming workspaces, teams and sets in one lookup for all rows. */
export async function renderUsers(db: Db, companyId: string, rows: UserRow[], baseUrl: string): Promise<ScimUser[]> {
  const groups = rows.flatMap((r) => r.permissions?.appGroup ?? []);
  const wsIds = unique(groups.map((g) => g.workspaceId));
  const teamIds = unique(groups.flatMap((g) => (g.teams ?? []).map((t) => t.teamId)));
  const setIds = unique(groups.flatMap((g) => g.permissionSetIds ?? []));
  const names = new Map<string, string>();
  if (wsIds.length + teamIds.length + setIds.length > 0) {
    const { rows: found } = await db.query<{ kind: string; id: string; name: string }>(
      `SELECT 'w' AS kind, id::text, name FROM workspaces WHERE company_id = $1 AND id = ANY($2::uuid[])
       UNION ALL
       SELECT 't', t.id::text, t.name FROM teams t JOIN workspaces w ON w.id = t.workspace_id
        WHERE w.company_id = $1 AND t.id = ANY($3::uuid[])
       UNION ALL
       SELECT 's', id::text, name FROM permission_sets WHERE company_id = $1 AND id = ANY($4::uuid[])`,
      [companyId, wsIds, teamIds, setIds],
    );
    for (const f of found) names.set(`${f.kind}:${f.id}`, f.name);
  }
  return rows.map((r) => {
    const permissions = r.permissions === null ? undefined : renderPermissions(r.permissions, names);
    const lastSignInAt = r.last_sign_in_at ? r.last_sign_in_at.toISOString() : null;
    // RFC 7643 2.5: an unassigned attribute is left out (null and [] mean the same); the root lastSignInAt stays, null,
    // because the spec's responses always show it.
    const extension = {
      ...(r.department === null ? {} : { department: r.department }),
      ...(permissions ? { permissions } : {}),
      ...(lastSignInAt === null ? {} : { lastSignInAt }),
    };
    return {
      schemas: [SCIM_USER_SCHEMA, SCIM_EXTENSION_SCHEMA],
      id: r.id,
      ...(r.external_id === null ? {} : { externalId: r.external_id }),
      userName: r.user_name,
      ...(r.display_name === null ? {} : { displayName: r.display_name }),
      name: { givenName: r.given_name, familyName: r.family_name },
      active: r.active,
      ...(r.emails.length === 0 ? {} : { emails: r.emails }),
      ...(r.department === null ? {} : { department: r.department }),
      lastSignInAt,
      ...(permissions ? { permissions } : {}),
      ...(Object.keys(extension).length === 0 ? {} : { [SCIM_EXTENSION_SCHEMA]: extension }),
      meta: {
        resourceType: 'User' as const,
        created: r.created_at.toISOString(),
        lastModified: r.updated_at.toISOString(),
        location: `${baseUrl}/scim/v2/Users/${r.id}`,
      },
    };
  });
}

/** Stored permissions by the current names of what they reference; what no longer exists drops out. */
export function renderPermissions(stored: StoredPermissions, names: Map<string, string>): ScimPermissions {
  return {
    companyPermissions: stored.companyPermissions,
    appGroup: stored.appGroup.flatMap((g): ScimPermissions['appGroup'] => {
      const appGroupName = names.get(`w:${g.workspaceId}`);
      if (appGroupName === undefined) return [];
      const base = { appGroupId: g.workspaceId, appGroupName };
      if (g.permissionSetIds) {
        return [
          {
            ...base,
            appGroupPermissionSets: g.permissionSetIds.flatMap((id) => {
              const name = names.get(`s:${id}`);
              return name === undefined ? [] : [{ appGroupPermissionSetName: name }];
            }),
          },
        ];
      }
      return [
        {
          ...base,
          appGroupPermissions: g.permissions ?? [],
          team: (g.teams ?? []).flatMap((t) => {
            const teamName = names.get(`t:${t.teamId}`);
            return teamName === undefined ? [] : [{ teamId: t.teamId, teamName, teamPermissions: t.permissions }];
          }),
        },
      ];
    }),
  };
}

export async function renderOne(db: Db, companyId: string, row: UserRow, baseUrl: string): Promise<ScimUser> {
  const [user] = await renderUsers(db, companyId, [row], baseUrl);
  return user!;
}
