import type { ScimUser } from './schemas.js';
import { unique, type Db, type StoredAppGroup, type StoredPermissions } from './user-rows.js';

/**
 * Stored permissions (by workspace, team and permission-set id) as SCIM shows them (by current names), for users'
 * own permissions, groups' grants, and a user's effective permissions (its own plus its groups').
 */

export type ScimPermissions = NonNullable<ScimUser['permissions']>;
type AppGroupView = ScimPermissions['appGroup'][number];

/** The current names of what stored permissions reference, and each permission set's strings. */
export interface ReferenceNames {
  name(kind: 'w' | 't' | 's', id: string): string | undefined;
  setPermissions(id: string): readonly string[];
}

/** Names every workspace, team and set the permissions reference, in one query whatever their number. */
export async function loadReferenceNames(
  db: Db,
  companyId: string,
  stored: readonly StoredPermissions[],
): Promise<ReferenceNames> {
  const groups = stored.flatMap((p) => p.appGroup);
  const wsIds = unique(groups.map((g) => g.workspaceId));
  const teamIds = unique(groups.flatMap((g) => (g.teams ?? []).map((t) => t.teamId)));
  const setIds = unique(groups.flatMap((g) => g.permissionSetIds ?? []));
  const names = new Map<string, string>();
  const sets = new Map<string, string[]>();
  if (wsIds.length + teamIds.length + setIds.length > 0) {
    const { rows: found } = await db.query<{
      kind: 'w' | 't' | 's';
      id: string;
      name: string;
      permissions: string[] | null;
    }>(
      `SELECT 'w' AS kind, id::text, name, NULL::text[] AS permissions FROM workspaces WHERE company_id = $1 AND id = ANY($2::uuid[])
       UNION ALL
       SELECT 't', t.id::text, t.name, NULL FROM teams t JOIN workspaces w ON w.id = t.workspace_id
        WHERE w.company_id = $1 AND t.id = ANY($3::uuid[])
       UNION ALL
       SELECT 's', id::text, name, permissions FROM permission_sets WHERE company_id = $1 AND id = ANY($4::uuid[])`,
      [companyId, wsIds, teamIds, setIds],
    );
    for (const f of found) {
      names.set(`${f.kind}:${f.id}`, f.name);
      if (f.kind === 's') sets.set(f.id, f.permissions ?? []);
    }
  }
  return { name: (kind, id) => names.get(`${kind}:${id}`), setPermissions: (id) => sets.get(id) ?? [] };
}

const setRefs = (ids: readonly string[], names: ReferenceNames) =>
  ids.flatMap((id) => {
    const name = names.name('s', id);
    return name === undefined ? [] : [{ appGroupPermissionSetName: name }];
  });

const teamViews = (teams: StoredAppGroup['teams'], names: ReferenceNames) =>
  (teams ?? []).flatMap((t) => {
    const teamName = names.name('t', t.teamId);
    return teamName === undefined ? [] : [{ teamId: t.teamId, teamName, teamPermissions: t.permissions }];
  });

/** Stored permissions by the current names of what they reference; what no longer exists drops out. */
export function renderPermissions(stored: StoredPermissions, names: ReferenceNames): ScimPermissions {
  return {
    companyPermissions: stored.companyPermissions,
    appGroup: stored.appGroup.flatMap((g): AppGroupView[] => {
      const appGroupName = names.name('w', g.workspaceId);
      if (appGroupName === undefined) return [];
      const base = { appGroupId: g.workspaceId, appGroupName };
      if (g.permissionSetIds) return [{ ...base, appGroupPermissionSets: setRefs(g.permissionSetIds, names) }];
      return [{ ...base, appGroupPermissions: g.permissions ?? [], team: teamViews(g.teams, names) }];
    }),
  };
}

const union = (a: readonly string[], b: readonly string[]) => unique([...a, ...b]);

/**
 * What a user may do: its own permissions and every grant of its groups, joined per workspace and per team. In the
 * result a workspace lists its permission sets and, in appGroupPermissions, the direct permissions together with
 * every string its sets hold, so that a reader sees each permission the user has in one place.
 */
export function renderEffective(all: readonly (StoredPermissions | null)[], names: ReferenceNames): ScimPermissions {
  let companyPermissions: string[] = [];
  const byWorkspace = new Map<string, { permissions: string[]; setIds: string[]; teams: Map<string, string[]> }>();
  for (const p of all) {
    if (!p) continue;
    companyPermissions = union(companyPermissions, p.companyPermissions);
    for (const g of p.appGroup) {
      const entry = byWorkspace.get(g.workspaceId) ?? {
        permissions: [],
        setIds: [],
        teams: new Map<string, string[]>(),
      };
      byWorkspace.set(g.workspaceId, entry);
      entry.permissions = union(entry.permissions, g.permissions ?? []);
      entry.setIds = union(entry.setIds, g.permissionSetIds ?? []);
      for (const t of g.teams ?? []) entry.teams.set(t.teamId, union(entry.teams.get(t.teamId) ?? [], t.permissions));
    }
  }
  const appGroup = [...byWorkspace].flatMap(([workspaceId, entry]): AppGroupView[] => {
    const appGroupName = names.name('w', workspaceId);
    if (appGroupName === undefined) return [];
    const fromSets = entry.setIds.flatMap((id) => (names.name('s', id) === undefined ? [] : names.setPermissions(id)));
    const teams = [...entry.teams].map(([teamId, permissions]) => ({ teamId, permissions }));
    return [
      {
        appGroupId: workspaceId,
        appGroupName,
        appGroupPermissions: union(entry.permissions, fromSets),
        ...(entry.setIds.length > 0 ? { appGroupPermissionSets: setRefs(entry.setIds, names) } : {}),
        team: teamViews(teams, names),
      },
    ];
  });
  return { companyPermissions, appGroup };
}
