import { badRequest } from '../errors.js';
import { allowedStrings, type AllowedStrings } from './catalog.js';
import type { ScimPermissionsInput } from './schemas.js';
import { unique, UUID, type Db, type StoredAppGroup, type StoredPermissions } from './user-rows.js';

/**
 * From a SCIM body to what is stored: the department and every permission string checked against the company's
 * allowed lists, and workspace, team and permission-set references resolved within the company. Every problem of a
 * body is reported at once.
 */

const MAX_PROBLEMS = 10;

/** Collects every refusal of one body so that the client fixes them in one round trip. */
class Problems {
  readonly list: string[] = [];
  /** Where the checked value sits in the body (a group's permissions are inside our Group extension). */
  constructor(private readonly prefix = '') {}
  add(path: string, message: string): void {
    this.list.push(`${this.prefix}${path}: ${message}`);
  }
  throwIfAny(): void {
    if (this.list.length === 0) return;
    const shown = this.list.slice(0, MAX_PROBLEMS);
    if (this.list.length > MAX_PROBLEMS) shown.push(`and ${this.list.length - MAX_PROBLEMS} more`);
    throw badRequest(shown.join('; '), { scimType: 'invalidValue' });
  }
}

function checkStrings(
  values: readonly string[] | null | undefined,
  allowed: ReadonlySet<string>,
  path: string,
  level: string,
  problems: Problems,
): string[] {
  const list = unique(values ?? []);
  for (const v of list) if (!allowed.has(v)) problems.add(path, `"${v}" is not an allowed ${level} permission`);
  return list;
}

async function loadAllowed(db: Db, companyId: string): Promise<AllowedStrings> {
  const { rows } = await db.query<{ settings: unknown }>(`SELECT settings FROM companies WHERE id = $1`, [companyId]);
  return allowedStrings(rows[0]?.settings);
}

/**
 * Checks the department and every permission string against the company's allowed lists, and resolves workspace,
 * team and permission-set references (names, or ids echoed from a response) within the company: three set-based
 * lookups whatever the number of entries. null and undefined pass through (none, and not given).
 */
export async function resolveUserFields<P extends ScimPermissionsInput | null | undefined>(
  db: Db,
  companyId: string,
  department: string | null | undefined,
  input: P,
): Promise<StoredPermissions | Exclude<P, ScimPermissionsInput>> {
  const problems = new Problems();
  const allowed = await loadAllowed(db, companyId);
  if (typeof department === 'string' && !allowed.departments.has(department)) {
    problems.add(
      'department',
      `"${department}" is not an allowed department (allowed: ${[...allowed.departments].join(', ')})`,
    );
  }
  const stored =
    input == null
      ? (input as Exclude<P, ScimPermissionsInput>)
      : await resolveReferences(db, companyId, input, allowed, problems);
  problems.throwIfAny();
  return stored;
}

/** The permissions a group grants (its role), checked and resolved as a user's are. */
export async function resolveGrantedPermissions(
  db: Db,
  companyId: string,
  input: ScimPermissionsInput,
  pathPrefix: string,
): Promise<StoredPermissions> {
  const problems = new Problems(pathPrefix);
  const stored = await resolveReferences(db, companyId, input, await loadAllowed(db, companyId), problems);
  problems.throwIfAny();
  return stored;
}

async function resolveReferences(
  db: Db,
  companyId: string,
  input: ScimPermissionsInput,
  allowed: AllowedStrings,
  problems: Problems,
): Promise<StoredPermissions> {
  const companyPermissions = checkStrings(
    input.companyPermissions,
    allowed.company,
    'permissions.companyPermissions',
    'company',
    problems,
  );
  const groups = input.appGroup ?? [];

  const wsNames = unique(groups.flatMap((g) => (g.appGroupName != null ? [g.appGroupName] : [])));
  const wsIds = unique(
    groups.flatMap((g) => (g.appGroupId != null && UUID.test(g.appGroupId) ? [g.appGroupId.toLowerCase()] : [])),
  );
  const setNames = unique(
    groups.flatMap((g) => (g.appGroupPermissionSets ?? []).map((s) => s.appGroupPermissionSetName)),
  );
  // Sequential on purpose: db may be a transaction's client, which runs one query at a time.
  const workspaces =
    wsNames.length + wsIds.length === 0
      ? []
      : (
          await db.query<{ id: string; name: string }>(
            `SELECT id::text, name FROM workspaces WHERE company_id = $1 AND (name = ANY($2::text[]) OR id = ANY($3::uuid[]))`,
            [companyId, wsNames, wsIds],
          )
        ).rows;
  const sets =
    setNames.length === 0
      ? []
      : (
          await db.query<{ id: string; name: string }>(
            `SELECT id::text, name FROM permission_sets WHERE company_id = $1 AND name = ANY($2::text[])`,
            [companyId, setNames],
          )
        ).rows;
  const wsByName = new Map(workspaces.map((w) => [w.name, w]));
  const wsById = new Map(workspaces.map((w) => [w.id, w]));
  const setByName = new Map(sets.map((s) => [s.name, s]));

  // Workspace of each entry (undefined where refused), then the teams of those workspaces in one query.
  const seen = new Set<string>();
  const entryWs = groups.map((g, i) => {
    const path = `permissions.appGroup[${i}]`;
    let ws: { id: string; name: string } | undefined;
    if (g.appGroupName != null) {
      ws = wsByName.get(g.appGroupName);
      if (!ws) problems.add(`${path}.appGroupName`, `no workspace named "${g.appGroupName}" in this company`);
      else if (g.appGroupId != null && g.appGroupId.toLowerCase() !== ws.id) {
        problems.add(`${path}.appGroupId`, `does not match the workspace named "${g.appGroupName}"`);
        ws = undefined;
      }
    } else if (g.appGroupId != null) {
      ws = wsById.get(g.appGroupId.toLowerCase());
      if (!ws) problems.add(`${path}.appGroupId`, 'no workspace with this id in this company');
    }
    if (ws && seen.has(ws.id)) {
      problems.add(path, `workspace "${ws.name}" is listed more than once`);
      return undefined;
    }
    if (ws) seen.add(ws.id);
    return ws;
  });

  const teamRefs = groups.flatMap((g) => g.team ?? []);
  const teamNames = unique(teamRefs.flatMap((t) => (t.teamName != null ? [t.teamName] : [])));
  const teamIds = unique(
    teamRefs.flatMap((t) => (t.teamId != null && UUID.test(t.teamId) ? [t.teamId.toLowerCase()] : [])),
  );
  const wsWithTeams = unique(
    groups.flatMap((g, i) => ((g.team ?? []).length > 0 && entryWs[i] ? [entryWs[i]!.id] : [])),
  );
  const teams =
    wsWithTeams.length === 0
      ? []
      : (
          await db.query<{ id: string; name: string; workspace_id: string }>(
            `SELECT id::text, name, workspace_id::text FROM teams
              WHERE workspace_id = ANY($1::uuid[]) AND (name = ANY($2::text[]) OR id = ANY($3::uuid[]))`,
            [wsWithTeams, teamNames, teamIds],
          )
        ).rows;

  const appGroup: StoredAppGroup[] = [];
  groups.forEach((g, i) => {
    const path = `permissions.appGroup[${i}]`;
    const ws = entryWs[i];
    if (g.appGroupPermissionSets != null) {
      const setIds = g.appGroupPermissionSets.flatMap((s, j) => {
        const set = setByName.get(s.appGroupPermissionSetName);
        if (!set)
          problems.add(
            `${path}.appGroupPermissionSets[${j}].appGroupPermissionSetName`,
            `no permission set named "${s.appGroupPermissionSetName}" in this company`,
          );
        return set ? [set.id] : [];
      });
      if (ws) appGroup.push({ workspaceId: ws.id, permissionSetIds: setIds });
      return;
    }
    const permissions = checkStrings(
      g.appGroupPermissions,
      allowed.workspace,
      `${path}.appGroupPermissions`,
      'workspace',
      problems,
    );
    const seenTeams = new Set<string>();
    const stored = (g.team ?? []).flatMap((t, j) => {
      const tpath = `${path}.team[${j}]`;
      const teamPermissions = checkStrings(
        t.teamPermissions,
        allowed.team,
        `${tpath}.teamPermissions`,
        'team',
        problems,
      );
      if (!ws) return [];
      const inWs = teams.filter((row) => row.workspace_id === ws.id);
      let team =
        t.teamName != null
          ? inWs.find((row) => row.name === t.teamName)
          : inWs.find((row) => row.id === t.teamId?.toLowerCase());
      if (!team) {
        problems.add(
          t.teamName != null ? `${tpath}.teamName` : `${tpath}.teamId`,
          t.teamName != null
            ? `no team named "${t.teamName}" in workspace "${ws.name}"`
            : `no team with this id in workspace "${ws.name}"`,
        );
      } else if (t.teamName != null && t.teamId != null && t.teamId.toLowerCase() !== team.id) {
        problems.add(`${tpath}.teamId`, `does not match the team named "${t.teamName}"`);
        team = undefined;
      } else if (seenTeams.has(team.id)) {
        problems.add(tpath, `team "${team.name}" is listed more than once`);
        team = undefined;
      }
      if (!team) return [];
      seenTeams.add(team.id);
      return [{ teamId: team.id, permissions: teamPermissions }];
    });
    if (ws) appGroup.push({ workspaceId: ws.id, permissions, teams: stored });
  });

  return { companyPermissions, appGroup };
}
