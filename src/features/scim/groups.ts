import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { conflict, notFound } from '../../platform/errors.js';
import type { AttributeSelection, Projected } from './attributes.js';
import { diffViews, permissionsView, recordGroupAudit, type ScimActor } from './audit.js';
import { groupFilterSql, parseGroupFilter } from './group-filter.js';
import { applyGroupPatch, editableGroup } from './group-patch.js';
import { GROUP_COLUMNS, GROUP_URNS, renderGroups, renderGroupsProjected, type GroupRow } from './group-render.js';
import { SCIM_GROUP_EXTENSION_SCHEMA, type ScimGroup, type ScimGroupBody } from './group-schemas.js';
import { auditedGroupChange, companyUsersAmong, displaysOf, memberIds, setMembers } from './memberships.js';
import { SCIM_LIST_SCHEMA, type ScimPatchOperation } from './schemas.js';
import { companyPage } from './page.js';
import { resolveGrantedPermissions } from './user-fields.js';
import { UUID, unique, type StoredPermissions } from './user-rows.js';

/**
 * SCIM Groups: create, replace, patch, read, list and delete, each change with the trail of the group and of every
 * member whose access it changed (src/features/scim/memberships.ts).
 */

export const GROUP_NOT_FOUND = 'Group not found';
export const GROUP_EXISTS = 'A group with this displayName already exists in the company.';

/** Our extension's permissions (names) to stored grants (ids); undefined keeps, null is none. */
async function resolveGrants(
  db: PoolClient,
  companyId: string,
  permissions: ScimGroupBody['permissions'],
): Promise<StoredPermissions | null | undefined> {
  if (permissions == null) return permissions;
  return resolveGrantedPermissions(db, companyId, permissions, `${SCIM_GROUP_EXTENSION_SCHEMA}:`);
}

/** A group as flat pairs for its own trail; members are counted here (each one is named on its user's trail). */
export function groupView(group: ScimGroup): Record<string, unknown> {
  return {
    displayName: group.displayName,
    externalId: group.externalId ?? null,
    members: (group.members ?? []).length,
    ...permissionsView('permissions', group[SCIM_GROUP_EXTENSION_SCHEMA]?.permissions),
  };
}

/** JSON with every object's keys sorted: grants read back from jsonb come with their keys in another order. */
const canonicalJson = (value: unknown) =>
  JSON.stringify(value, (_key, v: unknown) =>
    typeof v === 'object' && v !== null && !Array.isArray(v)
      ? Object.fromEntries(Object.entries(v).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)))
      : v,
  );

const isUniqueViolation = (err: unknown) => (err as { code?: string }).code === '23505';

async function renderOne(db: PoolClient, companyId: string, id: string, baseUrl: string): Promise<ScimGroup> {
  const { rows } = await db.query<GroupRow>(`SELECT ${GROUP_COLUMNS} FROM scim_groups WHERE id = $1`, [id]);
  const [group] = await renderGroups(db, companyId, rows, baseUrl);
  return group!;
}

export async function createGroup(
  pool: Pool,
  companyId: string,
  input: ScimGroupBody,
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimGroup> {
  return withTransaction(pool, async (db) => {
    const grants = await resolveGrants(db, companyId, input.permissions);
    // ON CONFLICT rather than a look-up first: two pushes of one group racing get one 201 and one 409.
    const { rows } = await db.query<{ id: string }>(
      `INSERT INTO scim_groups (company_id, display_name, external_id, grants) VALUES ($1, $2, $3, $4::jsonb)
       ON CONFLICT (company_id, lower(display_name)) DO NOTHING RETURNING id::text`,
      [companyId, input.displayName, input.externalId ?? null, grants == null ? null : JSON.stringify(grants)],
    );
    const id = rows[0]?.id;
    if (!id) throw conflict(GROUP_EXISTS, { scimType: 'uniqueness' });
    const { ids } = await companyUsersAmong(
      db,
      companyId,
      (input.members ?? []).map((m) => m.value),
    );
    await auditedGroupChange(db, companyId, id, ids, actor, baseUrl, () =>
      setMembers(db, id, ids, displaysOf(input.members ?? [])),
    );
    const group = await renderOne(db, companyId, id, baseUrl);
    await recordGroupAudit(db, companyId, id, actor, 'create', diffViews(null, groupView(group)));
    return group;
  });
}

async function lockGroup(db: PoolClient, companyId: string, id: string): Promise<GroupRow> {
  if (!UUID.test(id)) throw notFound(GROUP_NOT_FOUND);
  const { rows } = await db.query<GroupRow>(
    `SELECT ${GROUP_COLUMNS} FROM scim_groups WHERE id = $1 AND company_id = $2 FOR UPDATE`,
    [id, companyId],
  );
  if (!rows[0]) throw notFound(GROUP_NOT_FOUND);
  return rows[0];
}

/**
 * Writes a replacement over the locked group: displayName, and externalId, members and grants when given (kept when
 * omitted: Okta renames with a PUT of displayName alone). Members and grants that change are audited on each
 * member's trail; a replacement that changes nothing writes no row and keeps lastModified.
 */
async function writeGroup(
  db: PoolClient,
  companyId: string,
  current: GroupRow,
  input: ScimGroupBody,
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimGroup> {
  const before = (await renderGroups(db, companyId, [current], baseUrl))[0]!;
  const resolved = await resolveGrants(db, companyId, input.permissions);
  const grants = resolved === undefined ? current.grants : resolved;
  const held = await memberIds(db, current.id);
  const target =
    input.members == null
      ? input.members === null
        ? []
        : held
      : (
          await companyUsersAmong(
            db,
            companyId,
            input.members.map((m) => m.value),
          )
        ).ids;
  const added = target.filter((id) => !held.includes(id));
  const removed = held.filter((id) => !target.includes(id));
  const grantsChanged = canonicalJson(grants) !== canonicalJson(current.grants);
  const membersChanged = added.length + removed.length > 0;
  // Everyone whose access can move: all members old and new when the grants change, else those who joined or left.
  const affected = grantsChanged ? unique([...held, ...target]) : [...added, ...removed];
  const externalId = input.externalId === undefined ? current.external_id : input.externalId;
  await auditedGroupChange(db, companyId, current.id, affected, actor, baseUrl, async () => {
    try {
      await db.query(
        `UPDATE scim_groups SET display_name = $3, external_id = $4, grants = $5::jsonb,
                updated_at = CASE WHEN $6 OR (display_name, external_id, grants) IS DISTINCT FROM ($3, $4, $5::jsonb) THEN now() ELSE updated_at END
          WHERE id = $1 AND company_id = $2`,
        [
          current.id,
          companyId,
          input.displayName,
          externalId,
          grants === null ? null : JSON.stringify(grants),
          membersChanged,
        ],
      );
    } catch (err) {
      if (isUniqueViolation(err)) throw conflict(GROUP_EXISTS, { scimType: 'uniqueness' });
      throw err;
    }
    // Displays may change without a change of who is in the group (RFC 7643 makes them the client's).
    if (input.members != null) await setMembers(db, current.id, target, displaysOf(input.members));
    else if (membersChanged) await setMembers(db, current.id, target);
  });
  const after = await renderOne(db, companyId, current.id, baseUrl);
  const changes = diffViews(groupView(before), groupView(after));
  if (Object.keys(changes).length > 0) await recordGroupAudit(db, companyId, current.id, actor, 'update', changes);
  return after;
}

export async function replaceGroup(
  pool: Pool,
  companyId: string,
  id: string,
  input: ScimGroupBody,
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimGroup> {
  return withTransaction(pool, async (db) =>
    writeGroup(db, companyId, await lockGroup(db, companyId, id), input, actor, baseUrl),
  );
}

export async function patchGroup(
  pool: Pool,
  companyId: string,
  id: string,
  operations: ScimPatchOperation[],
  actor: ScimActor,
  baseUrl: string,
): Promise<ScimGroup> {
  return withTransaction(pool, async (db) => {
    const current = await lockGroup(db, companyId, id);
    const group = (await renderGroups(db, companyId, [current], baseUrl))[0]!;
    const edited = applyGroupPatch(editableGroup(group), current.id, operations);
    // The edited document holds the whole member list: members absent from it were removed.
    return writeGroup(db, companyId, current, { ...edited, members: edited.members ?? [] }, actor, baseUrl);
  });
}

/** Deletes a group; its members lose what it granted in the same transaction, each on its trail. */
export async function deleteGroup(
  pool: Pool,
  companyId: string,
  id: string,
  actor: ScimActor,
  baseUrl: string,
): Promise<void> {
  await withTransaction(pool, async (db) => {
    const current = await lockGroup(db, companyId, id);
    const before = (await renderGroups(db, companyId, [current], baseUrl))[0]!;
    const held = await memberIds(db, current.id);
    await auditedGroupChange(db, companyId, current.id, held, actor, baseUrl, async () => {
      await db.query(`DELETE FROM scim_groups WHERE id = $1`, [current.id]);
    });
    await recordGroupAudit(db, companyId, current.id, actor, 'delete', diffViews(groupView(before), null));
  });
}

export async function getGroup(
  pool: Pool,
  companyId: string,
  id: string,
  baseUrl: string,
  selection: AttributeSelection = {},
): Promise<Projected<ScimGroup>> {
  if (!UUID.test(id)) throw notFound(GROUP_NOT_FOUND);
  const { rows } = await pool.query<GroupRow>(
    `SELECT ${GROUP_COLUMNS} FROM scim_groups WHERE id = $1 AND company_id = $2`,
    [id, companyId],
  );
  if (!rows[0]) throw notFound(GROUP_NOT_FOUND);
  return (await renderGroupsProjected(pool, companyId, rows, baseUrl, selection))[0]!;
}

export interface ListQuery extends AttributeSelection {
  filter?: string;
  startIndex: number;
  count: number;
}

/** How many groups match, and one page of them by creation time: what a ListResponse and a root search page over. */
export async function findGroups(
  pool: Pool,
  companyId: string,
  filter: string | undefined,
  offset: number,
  limit: number,
) {
  const where = filter === undefined ? { where: 'true', params: [] } : groupFilterSql(parseGroupFilter(filter), 2);
  return companyPage<GroupRow>(pool, { table: 'scim_groups', columns: GROUP_COLUMNS }, companyId, where, offset, limit);
}

export async function listGroups(pool: Pool, companyId: string, query: ListQuery, baseUrl: string) {
  const { total, rows } = await findGroups(pool, companyId, query.filter, query.startIndex - 1, query.count);
  const Resources = await renderGroupsProjected(pool, companyId, rows, baseUrl, query);
  return {
    schemas: [SCIM_LIST_SCHEMA],
    totalResults: total,
    startIndex: query.startIndex,
    itemsPerPage: Resources.length,
    Resources,
  };
}

export { GROUP_URNS };
