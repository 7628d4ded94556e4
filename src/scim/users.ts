import { withTransaction, type Pool } from '../db/pool.js';
import { badRequest, conflict, notFound } from '../errors.js';
import { auditView, diffViews, recordAudit, type ScimActor } from './audit.js';
import { parseUserFilter } from './filter.js';
import { resolveUserFields } from './user-fields.js';
import { renderOne, renderUsers } from './user-render.js';
import { USER_COLUMNS, UUID, type UserRow } from './user-rows.js';
import { SCIM_LIST_SCHEMA, type ScimListResponse, type ScimUser, type ScimUserCreate, type ScimUserReplace } from './schemas.js';

/** The spec's documented details (Errors table, real-behaviour notes). */
export const USER_EXISTS = 'User already exists in the database.';
export const USER_NOT_FOUND = 'User not found';


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
