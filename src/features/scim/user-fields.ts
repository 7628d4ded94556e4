import { badRequest } from '../../platform/errors.js';
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

type AppGroupInput = NonNullable<ScimPermissionsInput['appGroup']>[number];
type TeamInput = NonNullable<AppGroupInput['team']>[number];
interface Named {
  id: string;
  name: string;
}
interface TeamRow extends Named {
  workspace_id: string;
}

/** What the entries of one body are checked and resolved against. */
interface Lookups {
  allowed: AllowedStrings;
  setByName: ReadonlyMap<string, Named>;
  teams: readonly TeamRow[];
  problems: Problems;
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
  const { workspaces, sets } = await loadWorkspacesAndSets(db, companyId, groups);
  // Workspace of each entry (undefined where refused), then the teams of those workspaces in one query.
  const entryWs = workspaceOfEachEntry(groups, workspaces, problems);
  const teams = await loadTeams(db, groups, entryWs);
  const lookups: Lookups = { allowed, setByName: new Map(sets.map((s) => [s.name, s])), teams, problems };
  const appGroup = groups.flatMap((g, i) => {
    const stored = storeEntry(g, `permissions.appGroup[${i}]`, entryWs[i], lookups);
    return stored ? [stored] : [];
  });
  return { companyPermissions, appGroup };
}

/** The workspaces the entries name (by name or id) and the permission sets they name, in two queries. */
async function loadWorkspacesAndSets(
  db: Db,
  companyId: string,
  groups: readonly AppGroupInput[],
): Promise<{ workspaces: Named[]; sets: Named[] }> {
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
          await db.query<Named>(
            `SELECT id::text, name FROM workspaces WHERE company_id = $1 AND (name = ANY($2::text[]) OR id = ANY($3::uuid[]))`,
            [companyId, wsNames, wsIds],
          )
        ).rows;
  const sets =
    setNames.length === 0
      ? []
      : (
          await db.query<Named>(
            `SELECT id::text, name FROM permission_sets WHERE company_id = $1 AND name = ANY($2::text[])`,
            [companyId, setNames],
          )
        ).rows;
  return { workspaces, sets };
}

/**
 * The workspace of each entry, by name (an id given beside it must agree) or by id; undefined where it names none,
 * disagrees, or repeats a workspace of an earlier entry.
 */
function workspaceOfEachEntry(
  groups: readonly AppGroupInput[],
  workspaces: readonly Named[],
  problems: Problems,
): (Named | undefined)[] {
  const wsByName = new Map(workspaces.map((w) => [w.name, w]));
  const wsById = new Map(workspaces.map((w) => [w.id, w]));
  const seen = new Set<string>();
  return groups.map((g, i) => {
    const path = `permissions.appGroup[${i}]`;
    let ws: Named | undefined;
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
}

/** The teams (by name or id) of the resolved workspaces of entries that list teams, in one query. */
async function loadTeams(
  db: Db,
  groups: readonly AppGroupInput[],
  entryWs: readonly (Named | undefined)[],
): Promise<TeamRow[]> {
  const teamRefs = groups.flatMap((g) => g.team ?? []);
  const teamNames = unique(teamRefs.flatMap((t) => (t.teamName != null ? [t.teamName] : [])));
  const teamIds = unique(
    teamRefs.flatMap((t) => (t.teamId != null && UUID.test(t.teamId) ? [t.teamId.toLowerCase()] : [])),
  );
  const wsWithTeams = unique(
    groups.flatMap((g, i) => ((g.team ?? []).length > 0 && entryWs[i] ? [entryWs[i]!.id] : [])),
  );
  return wsWithTeams.length === 0
    ? []
    : (
        await db.query<TeamRow>(
          `SELECT id::text, name, workspace_id::text FROM teams
              WHERE workspace_id = ANY($1::uuid[]) AND (name = ANY($2::text[]) OR id = ANY($3::uuid[]))`,
          [wsWithTeams, teamNames, teamIds],
        )
      ).rows;
}

/**
 * One entry as stored: its permission sets, or its workspace permissions and teams. Every reference is checked (and
 * its problems reported) even when the entry's workspace was refused; such an entry is not stored.
 */
function storeEntry(
  g: AppGroupInput,
  path: string,
  ws: Named | undefined,
  { allowed, setByName, teams, problems }: Lookups,
): StoredAppGroup | undefined {
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
    return ws ? { workspaceId: ws.id, permissionSetIds: setIds } : undefined;
  }
  const permissions = checkStrings(
    g.appGroupPermissions,
    allowed.workspace,
    `${path}.appGroupPermissions`,
    'workspace',
    problems,
  );
  const stored = resolveTeams(g.team ?? [], path, ws, teams, allowed, problems);
  return ws ? { workspaceId: ws.id, permissions, teams: stored } : undefined;
}

/** The teams of one entry with their checked permissions; those not found in its workspace are left out. */
function resolveTeams(
  refs: readonly TeamInput[],
  path: string,
  ws: Named | undefined,
  teams: readonly TeamRow[],
  allowed: AllowedStrings,
  problems: Problems,
): { teamId: string; permissions: string[] }[] {
  const seenTeams = new Set<string>();
  return refs.flatMap((t, j) => {
    const tpath = `${path}.team[${j}]`;
    const teamPermissions = checkStrings(t.teamPermissions, allowed.team, `${tpath}.teamPermissions`, 'team', problems);
    if (!ws) return [];
    const inWs = teams.filter((row) => row.workspace_id === ws.id);
    const team = findTeam(t, tpath, ws, inWs, seenTeams, problems);
    if (!team) return [];
    seenTeams.add(team.id);
    return [{ teamId: team.id, permissions: teamPermissions }];
  });
}

/**
 * The team a reference names (by name, an id beside it must agree; or by id) among its workspace's teams; undefined,
 * with the problem, when it names none, disagrees, or repeats a team of the same entry.
 */
function findTeam(
  t: TeamInput,
  tpath: string,
  ws: Named,
  inWs: readonly TeamRow[],
  seenTeams: ReadonlySet<string>,
  problems: Problems,
): TeamRow | undefined {
  const team =
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
    return undefined;
  }
  if (t.teamName != null && t.teamId != null && t.teamId.toLowerCase() !== team.id) {
    problems.add(`${tpath}.teamId`, `does not match the team named "${t.teamName}"`);
    return undefined;
  }
  if (seenTeams.has(team.id)) {
    problems.add(tpath, `team "${team.name}" is listed more than once`);
    return undefined;
  }
  return team;
}
