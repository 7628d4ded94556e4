import { withTransaction, type Pool, type PoolClient } from '../db/pool.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { auditView, diffViews, recordAudit, type ScimActor } from './audit.js';
import { allowedStrings, type AllowedStrings } from './catalog.js';
import { parseUserFilter } from './filter.js';
import {
  SCIM_LIST_SCHEMA,
  SCIM_USER_SCHEMA,
  type ScimListResponse,
  type ScimPermissionsInput,
  type ScimUser,
  type ScimUserCreate,
  type ScimUserReplace,
} from './schemas.js';

/** The spec's documented details (Errors table, real-behaviour notes). */
export const USER_EXISTS = 'User already exists in the database.';
export const USER_NOT_FOUND = 'User not found';

type Db = Pool | PoolClient;

/**
 * How permissions are stored: by workspace, team and permission-set id, so that a renamed workspace shows its new
 * name and a deleted one drops out of the user's permissions instead of naming something that no longer exists.
 */
interface StoredAppGroup {
  workspaceId: string;
  permissions?: string[];
  teams?: { teamId: string; permissions: string[] }[];
  permissionSetIds?: string[];
}
interface StoredPermissions {
  companyPermissions: string[];
  appGroup: StoredAppGroup[];
}

interface UserRow {
  id: string;
  user_name: string;
  given_name: string;
  family_name: string;
  department: string;
  permissions: StoredPermissions;
  last_sign_in_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const USER_COLUMNS = 'id::text, user_name, given_name, family_name, department, permissions, last_sign_in_at, created_at, updated_at';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
const MAX_PROBLEMS = 10;

/** Collects every refusal of one body so that the client fixes them in one round trip. */
class Problems {
  readonly list: string[] = [];
  add(path: string, message: string): void {
    this.list.push(`${path}: ${message}`);
  }
  throwIfAny(): void {
    if (this.list.length === 0) return;
    const shown = this.list.slice(0, MAX_PROBLEMS);
    if (this.list.length > MAX_PROBLEMS) shown.push(`and ${this.list.length - MAX_PROBLEMS} more`);
    throw badRequest(shown.join('; '), { scimType: 'invalidValue' });
  }
}

const unique = (values: readonly string[]) => [...new Set(values)];

function checkStrings(values: readonly string[] | null | undefined, allowed: ReadonlySet<string>, path: string, level: string, problems: Problems): string[] {
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
 * lookups whatever the number of entries.
 */
async function resolveUserFields(
  db: Db,
  companyId: string,
  department: string,
  input: ScimPermissionsInput,
): Promise<StoredPermissions> {
  const problems = new Problems();
  const allowed = await loadAllowed(db, companyId);
  if (!allowed.departments.has(department)) {
    problems.add('department', `"${department}" is not an allowed department (allowed: ${[...allowed.departments].join(', ')})`);
  }
  const companyPermissions = checkStrings(input.companyPermissions, allowed.company, 'permissions.companyPermissions', 'company', problems);
  const groups = input.appGroup ?? [];

  const wsNames = unique(groups.flatMap((g) => (g.appGroupName != null ? [g.appGroupName] : [])));
  const wsIds = unique(groups.flatMap((g) => (g.appGroupId != null && UUID.test(g.appGroupId) ? [g.appGroupId.toLowerCase()] : [])));
  const setNames = unique(groups.flatMap((g) => (g.appGroupPermissionSets ?? []).map((s) => s.appGroupPermissionSetName)));
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
          await db.query<{ id: string; name: string }>(`SELECT id::text, name FROM permission_sets WHERE company_id = $1 AND name = ANY($2::text[])`, [
            companyId,
            setNames,
          ])
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
  const teamIds = unique(teamRefs.flatMap((t) => (t.teamId != null && UUID.test(t.teamId) ? [t.teamId.toLowerCase()] : [])));
  const wsWithTeams = unique(groups.flatMap((g, i) => ((g.team ?? []).length > 0 && entryWs[i] ? [entryWs[i]!.id] : [])));
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
        if (!set) problems.add(`${path}.appGroupPermissionSets[${j}].appGroupPermissionSetName`, `no permission set named "${s.appGroupPermissionSetName}" in this company`);
        return set ? [set.id] : [];
      });
      if (ws) appGroup.push({ workspaceId: ws.id, permissionSetIds: setIds });
      return;
    }
    const permissions = checkStrings(g.appGroupPermissions, allowed.workspace, `${path}.appGroupPermissions`, 'workspace', problems);
    const seenTeams = new Set<string>();
    const stored = (g.team ?? []).flatMap((t, j) => {
      const tpath = `${path}.team[${j}]`;
      const teamPermissions = checkStrings(t.teamPermissions, allowed.team, `${tpath}.teamPermissions`, 'team', problems);
      if (!ws) return [];
      const inWs = teams.filter((row) => row.workspace_id === ws.id);
      let team = t.teamName != null ? inWs.find((row) => row.name === t.teamName) : inWs.find((row) => row.id === t.teamId?.toLowerCase());
      if (!team) {
        problems.add(
          t.teamName != null ? `${tpath}.teamName` : `${tpath}.teamId`,
          t.teamName != null ? `no team named "${t.teamName}" in workspace "${ws.name}"` : `no team with this id in workspace "${ws.name}"`,
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

  problems.throwIfAny();
  return { companyPermissions, appGroup };
}

/** Turns stored rows into SCIM representations, naming workspaces, teams and sets in one lookup for all rows. */
async function renderUsers(db: Db, companyId: string, rows: UserRow[], baseUrl: string): Promise<ScimUser[]> {
  const groups = rows.flatMap((r) => r.permissions.appGroup);
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
  return rows.map((r) => ({
    schemas: [SCIM_USER_SCHEMA],
    id: r.id,
    userName: r.user_name,
    name: { givenName: r.given_name, familyName: r.family_name },
    department: r.department,
    lastSignInAt: r.last_sign_in_at ? r.last_sign_in_at.toISOString() : null,
    permissions: {
      companyPermissions: r.permissions.companyPermissions,
      appGroup: r.permissions.appGroup.flatMap((g): ScimUser['permissions']['appGroup'] => {
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
    },
    meta: {
      resourceType: 'User' as const,
      created: r.created_at.toISOString(),
      lastModified: r.updated_at.toISOString(),
      location: `${baseUrl}/scim/v2/Users/${r.id}`,
    },
  }));
}

async function renderOne(db: Db, companyId: string, row: UserRow, baseUrl: string): Promise<ScimUser> {
  const [user] = await renderUsers(db, companyId, [row], baseUrl);
  return user!;
}

/** Creates a dashboard user; 409 (the spec's body) when the company already has that userName in any letter case. */
export async function createUser(pool: Pool, companyId: string, input: ScimUserCreate, actor: ScimActor, baseUrl: string): Promise<ScimUser> {
  return withTransaction(pool, async (db) => {
    const permissions = await resolveUserFields(db, companyId, input.department, input.permissions);
    // ON CONFLICT rather than a look-up first: two identity providers racing on one address get one 201 and one 409.
    const { rows } = await db.query<UserRow>(
      `INSERT INTO dashboard_users (company_id, user_name, given_name, family_name, department, permissions)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb)
       ON CONFLICT (company_id, lower(user_name)) DO NOTHING
       RETURNING ${USER_COLUMNS}`,
      [companyId, input.userName, input.name.givenName, input.name.familyName, input.department, JSON.stringify(permissions)],
    );
    if (!rows[0]) throw conflict(USER_EXISTS);
    const user = await renderOne(db, companyId, rows[0], baseUrl);
    await recordAudit(db, companyId, user.id, actor, 'create', diffViews(null, auditView(user)));
    return user;
  });
}

/**
 * Replaces name, department and permissions. userName may be repeated but not changed (RFC 7644 `mutability`);
 * a replacement that changes nothing writes no audit row and keeps lastModified.
 */
export async function replaceUser(
  pool: Pool,
  companyId: string,
  id: string,
  input: ScimUserReplace,
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimUser> {
  if (!UUID.test(id)) throw notFound(USER_NOT_FOUND);
  return withTransaction(pool, async (db) => {
    const { rows: found } = await db.query<UserRow>(`SELECT ${USER_COLUMNS} FROM dashboard_users WHERE id = $1 AND company_id = $2 FOR UPDATE`, [
      id,
      companyId,
    ]);
    const current = found[0];
    if (!current) throw notFound(USER_NOT_FOUND);
    if (input.userName !== undefined && input.userName.toLowerCase() !== current.user_name.toLowerCase()) {
      throw badRequest('userName: cannot be changed through PUT; it must equal the current userName or be omitted', { scimType: 'mutability' });
    }
    const permissions = await resolveUserFields(db, companyId, input.department, input.permissions);
    const before = await renderOne(db, companyId, current, baseUrl);
    const { rows } = await db.query<UserRow>(
      `UPDATE dashboard_users
          SET given_name = $3, family_name = $4, department = $5, permissions = $6::jsonb,
              updated_at = CASE WHEN (given_name, family_name, department, permissions) IS DISTINCT FROM ($3, $4, $5, $6::jsonb)
                                THEN now() ELSE updated_at END
        WHERE id = $1 AND company_id = $2
        RETURNING ${USER_COLUMNS}`,
      [id, companyId, input.name.givenName, input.name.familyName, input.department, JSON.stringify(permissions)],
    );
    const after = await renderOne(db, companyId, rows[0]!, baseUrl);
    const changes = diffViews(auditView(before), auditView(after));
    if (Object.keys(changes).length > 0) await recordAudit(db, companyId, id, actor, 'update', changes);
    return after;
  });
}

export async function getUser(pool: Pool, companyId: string, id: string, baseUrl: string): Promise<ScimUser> {
  if (!UUID.test(id)) throw notFound(USER_NOT_FOUND);
  const { rows } = await pool.query<UserRow>(`SELECT ${USER_COLUMNS} FROM dashboard_users WHERE id = $1 AND company_id = $2`, [id, companyId]);
  if (!rows[0]) throw notFound(USER_NOT_FOUND);
  return renderOne(pool, companyId, rows[0], baseUrl);
}

export interface ListUsersQuery {
  filter?: string;
  /** 1-based, as RFC 7644 3.4.2.4 defines it. */
  startIndex: number;
  count: number;
}

/** A ListResponse: one userName (filter), or a page of the company's users by creation time. */
export async function listUsers(pool: Pool, companyId: string, query: ListUsersQuery, baseUrl: string): Promise<ScimListResponse> {
  const offset = query.startIndex - 1;
  let rows: UserRow[];
  let total: number;
  if (query.filter !== undefined) {
    const { userName } = parseUserFilter(query.filter);
    const found = await pool.query<UserRow>(`SELECT ${USER_COLUMNS} FROM dashboard_users WHERE company_id = $1 AND lower(user_name) = lower($2)`, [
      companyId,
      userName,
    ]);
    total = found.rows.length;
    rows = found.rows.slice(offset, offset + query.count);
  } else {
    const [counted, page] = await Promise.all([
      pool.query<{ n: number }>(`SELECT count(*)::int AS n FROM dashboard_users WHERE company_id = $1`, [companyId]),
      query.count === 0
        ? { rows: [] as UserRow[] }
        : pool.query<UserRow>(
            `SELECT ${USER_COLUMNS} FROM dashboard_users WHERE company_id = $1 ORDER BY created_at, id LIMIT $2 OFFSET $3`,
            [companyId, query.count, offset],
          ),
    ]);
    total = counted.rows[0]!.n;
    rows = page.rows;
  }
  const Resources = await renderUsers(pool, companyId, rows, baseUrl);
  return { schemas: [SCIM_LIST_SCHEMA], totalResults: total, startIndex: query.startIndex, itemsPerPage: Resources.length, Resources };
}

/** Deletes a dashboard user; the audit row keeps what it held. */
export async function deleteUser(pool: Pool, companyId: string, id: string, actor: ScimActor, baseUrl: string): Promise<void> {
  if (!UUID.test(id)) throw notFound(USER_NOT_FOUND);
  await withTransaction(pool, async (db) => {
    const { rows } = await db.query<UserRow>(`DELETE FROM dashboard_users WHERE id = $1 AND company_id = $2 RETURNING ${USER_COLUMNS}`, [id, companyId]);
    if (!rows[0]) throw notFound(USER_NOT_FOUND);
    const before = await renderOne(db, companyId, rows[0], baseUrl);
    await recordAudit(db, companyId, id, actor, 'delete', diffViews(auditView(before), null));
  });
}
