import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { badRequest, conflict, notFound } from '../../platform/errors.js';
import { attributeProjection, type AttributeSelection, type Projected } from './attributes.js';
import { auditView, diffViews, recordAudit, type AuditAction, type ScimActor } from './audit.js';
import { filterSql, parseUserFilter } from './filter.js';
import { companyPage } from './page.js';
import { resolveUserFields } from './user-fields.js';
import { applyPatch, editableDocument } from './user-patch.js';
import { renderOne, renderUsers } from './user-render.js';
import { USER_COLUMNS, UUID, type UserRow } from './user-rows.js';
import {
  SCIM_LIST_SCHEMA,
  type ScimListResponse,
  type ScimPatchOperation,
  type ScimUser,
  type ScimUserCreate,
  type ScimUserReplace,
} from './schemas.js';

/** The spec's documented details (Errors table, real-behaviour notes). */
export const USER_EXISTS = 'User already exists in the database.';
export const USER_NOT_FOUND = 'User not found';

/** Creates a dashboard user; 409 (the spec's body) when the company already has that userName in any letter case. */
export async function createUser(
  pool: Pool,
  companyId: string,
  input: ScimUserCreate,
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimUser> {
  return withTransaction(pool, async (db) => {
    const permissions = await resolveUserFields(db, companyId, input.department, input.permissions);
    // ON CONFLICT rather than a look-up first: two identity providers racing on one address get one 201 and one 409.
    const { rows } = await db.query<UserRow>(
      `INSERT INTO dashboard_users (company_id, user_name, given_name, family_name, department, permissions, active, external_id, emails, display_name)
       VALUES ($1, $2, $3, $4, $5, $6::jsonb, $7, $8, $9::jsonb, $10)
       ON CONFLICT (company_id, lower(user_name)) DO NOTHING
       RETURNING ${USER_COLUMNS}`,
      [
        companyId,
        input.userName,
        input.name.givenName,
        input.name.familyName,
        input.department ?? null,
        permissions == null ? null : JSON.stringify(permissions),
        input.active ?? true,
        input.externalId ?? null,
        JSON.stringify(input.emails ?? []),
        input.displayName ?? null,
      ],
    );
    if (!rows[0]) throw conflict(USER_EXISTS, { scimType: 'uniqueness' });
    const user = await renderOne(db, companyId, rows[0], baseUrl);
    await recordAudit(db, companyId, user.id, actor, 'create', diffViews(null, auditView(user)));
    return user;
  });
}

/** A user's row under its lock, and the user as it reads now (what a PATCH edits, the audit's "before"). */
interface LockedUser {
  row: UserRow;
  user: ScimUser;
}

async function lockUser(db: PoolClient, companyId: string, id: string, baseUrl: string): Promise<LockedUser> {
  if (!UUID.test(id)) throw notFound(USER_NOT_FOUND);
  const { rows } = await db.query<UserRow>(
    `SELECT ${USER_COLUMNS} FROM dashboard_users WHERE id = $1 AND company_id = $2 FOR UPDATE`,
    [id, companyId],
  );
  if (!rows[0]) throw notFound(USER_NOT_FOUND);
  return { row: rows[0], user: await renderOne(db, companyId, rows[0], baseUrl) };
}

/** What the audit trail calls a change: deactivate and reactivate when `active` moved, update otherwise. */
function auditAction(before: ScimUser, after: ScimUser): AuditAction {
  if (before.active === after.active) return 'update';
  return after.active ? 'reactivate' : 'deactivate';
}

/**
 * Writes a replacement over the locked row `current`. userName may be repeated, in another letter case too (the new
 * spelling is stored: it is the same user), but not changed (RFC 7644 `mutability`). The attributes the spec's
 * bodies do not require (active, externalId, emails, displayName, department, permissions) are left as they are
 * when omitted, so that a client of the spec never reactivates a user or drops what an identity provider set; null
 * clears them. A replacement that changes nothing writes no audit row and keeps lastModified.
 */
async function writeUser(
  db: PoolClient,
  companyId: string,
  locked: LockedUser,
  input: ScimUserReplace,
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimUser> {
  const { row: current, user: before } = locked;
  if (input.userName !== undefined && input.userName.toLowerCase() !== current.user_name.toLowerCase()) {
    throw badRequest('userName: cannot be changed; it must equal the current userName or be omitted', {
      scimType: 'mutability',
    });
  }
  const resolved = await resolveUserFields(db, companyId, input.department, input.permissions);
  const keep = <T>(given: T | undefined, stored: T) => (given === undefined ? stored : given);
  const permissions = keep(resolved, current.permissions);
  const values = [
    keep(input.userName, current.user_name),
    input.name.givenName,
    input.name.familyName,
    keep(input.department, current.department),
    permissions === null ? null : JSON.stringify(permissions),
    input.active ?? current.active,
    keep(input.externalId, current.external_id),
    JSON.stringify(keep(input.emails, current.emails) ?? []),
    keep(input.displayName, current.display_name),
  ];
  const { rows } = await db.query<UserRow>(
    `UPDATE dashboard_users
        SET user_name = $3, given_name = $4, family_name = $5, department = $6, permissions = $7::jsonb, active = $8, external_id = $9,
            emails = $10::jsonb, display_name = $11,
            updated_at = CASE WHEN (user_name, given_name, family_name, department, permissions, active, external_id, emails, display_name)
                                   IS DISTINCT FROM ($3, $4, $5, $6, $7::jsonb, $8, $9, $10::jsonb, $11)
                              THEN now() ELSE updated_at END
      WHERE id = $1 AND company_id = $2
      RETURNING ${USER_COLUMNS}`,
    [current.id, companyId, ...values],
  );
  const after = await renderOne(db, companyId, rows[0]!, baseUrl);
  const changes = diffViews(auditView(before), auditView(after));
  if (Object.keys(changes).length > 0)
    await recordAudit(db, companyId, current.id, actor, auditAction(before, after), changes);
  return after;
}

/** PUT: replaces the user's attributes (see writeUser for those the spec's bodies do not carry). */
export async function replaceUser(
  pool: Pool,
  companyId: string,
  id: string,
  input: ScimUserReplace,
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimUser> {
  return withTransaction(pool, async (db) =>
    writeUser(db, companyId, await lockUser(db, companyId, id, baseUrl), input, actor, baseUrl),
  );
}

/**
 * PATCH: the operations applied to the user as it is, under its row lock, and the result written as a PUT would.
 * All or nothing: an operation that cannot apply, or a result that breaks a rule, changes nothing.
 */
export async function patchUser(
  pool: Pool,
  companyId: string,
  id: string,
  operations: ScimPatchOperation[],
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimUser> {
  return withTransaction(pool, async (db) => {
    const locked = await lockUser(db, companyId, id, baseUrl);
    return writeUser(db, companyId, locked, applyPatch(editableDocument(locked.user), operations), actor, baseUrl);
  });
}

/** One user, active or not, narrowed to the selected attributes. */
export async function getUser(
  pool: Pool,
  companyId: string,
  id: string,
  baseUrl: string,
  selection: AttributeSelection = {},
): Promise<Projected<ScimUser>> {
  if (!UUID.test(id)) throw notFound(USER_NOT_FOUND);
  const project = attributeProjection(selection);
  const { rows } = await pool.query<UserRow>(
    `SELECT ${USER_COLUMNS} FROM dashboard_users WHERE id = $1 AND company_id = $2`,
    [id, companyId],
  );
  if (!rows[0]) throw notFound(USER_NOT_FOUND);
  return project(await renderOne(pool, companyId, rows[0], baseUrl, { effective: requestsEffective(selection) }));
}

/** effectivePermissions is `returned: request` (RFC 7643 7): computed only when `attributes` names it. */
const requestsEffective = (selection: AttributeSelection) => /effectivepermissions/i.test(selection.attributes ?? '');

export interface ListUsersQuery extends AttributeSelection {
  filter?: string;
  /** 1-based, as RFC 7644 3.4.2.4 defines it. */
  startIndex: number;
  count: number;
}

/** How many users match, and one page of them by creation time: what a ListResponse and a root search page over. */
export async function findUsers(
  pool: Pool,
  companyId: string,
  filter: string | undefined,
  offset: number,
  limit: number,
) {
  const where = filter === undefined ? { where: 'true', params: [] } : filterSql(parseUserFilter(filter), 2);
  return companyPage<UserRow>(
    pool,
    { table: 'dashboard_users', columns: USER_COLUMNS },
    companyId,
    where,
    offset,
    limit,
  );
}

/** Users as a ListResponse returns them: narrowed to the selection, effectivePermissions computed only when named. */
export async function renderUsersProjected(
  pool: Pool,
  companyId: string,
  rows: UserRow[],
  baseUrl: string,
  selection: AttributeSelection,
) {
  const project = attributeProjection(selection);
  return (await renderUsers(pool, companyId, rows, baseUrl, { effective: requestsEffective(selection) })).map(project);
}

/**
 * A ListResponse: the company's users that match the filter (all without one), by creation time. Deactivated users
 * are listed too: identity providers look them up to reactivate them.
 */
export async function listUsers(
  pool: Pool,
  companyId: string,
  query: ListUsersQuery,
  baseUrl: string,
): Promise<ScimListResponse> {
  const { total, rows } = await findUsers(pool, companyId, query.filter, query.startIndex - 1, query.count);
  const Resources = await renderUsersProjected(pool, companyId, rows, baseUrl, query);
  return {
    schemas: [SCIM_LIST_SCHEMA],
    totalResults: total,
    startIndex: query.startIndex,
    itemsPerPage: Resources.length,
    Resources,
  };
}

/** Deletes a dashboard user; the audit row keeps what it held. */
export async function deleteUser(
  pool: Pool,
  companyId: string,
  id: string,
  actor: ScimActor,
  baseUrl: string,
): Promise<void> {
  if (!UUID.test(id)) throw notFound(USER_NOT_FOUND);
  await withTransaction(pool, async (db) => {
    const { rows } = await db.query<UserRow>(
      `DELETE FROM dashboard_users WHERE id = $1 AND company_id = $2 RETURNING ${USER_COLUMNS}`,
      [id, companyId],
    );
    if (!rows[0]) throw notFound(USER_NOT_FOUND);
    const before = await renderOne(db, companyId, rows[0], baseUrl);
    await recordAudit(db, companyId, id, actor, 'delete', diffViews(auditView(before), null));
  });
}
