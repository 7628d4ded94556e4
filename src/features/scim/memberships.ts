import type { PoolClient } from '../../platform/db/pool.js';
import {
  diffViews,
  permissionsView,
  recordAudits,
  type AuditAction,
  type FieldChange,
  type ScimActor,
} from './audit.js';
import { renderUsers } from './user-render.js';
import { USER_COLUMNS, UUID, unique, type UserRow } from './user-rows.js';
import { SCIM_EXTENSION_SCHEMA, type ScimUser } from './schemas.js';

/**
 * Who is in a group, and what a group's change does to its members: every user whose groups or effective
 * permissions a change moved gets one row on its audit trail (join_group, leave_group or group_grants) with the
 * diff, in the transaction of the change.
 */

/**
 * The company's users among `values` (member values from a request), each once. A value that names no user of the
 * company (another company's user, a user deleted since the identity provider read it, not a uuid) is left out:
 * scim-sanity and eventual-consistency provisioning add such members, and refusing them would block the whole push.
 */
export async function companyUsersAmong(
  db: PoolClient,
  companyId: string,
  values: readonly string[],
): Promise<{ ids: string[]; ignored: number }> {
  const candidates = unique(values.filter((v) => UUID.test(v)).map((v) => v.toLowerCase()));
  const { rows } =
    candidates.length === 0
      ? { rows: [] as { id: string }[] }
      : await db.query<{ id: string }>(
          `SELECT id::text FROM dashboard_users WHERE company_id = $1 AND id = ANY($2::uuid[])`,
          [companyId, candidates],
        );
  const found = new Set(rows.map((r) => r.id));
  const ids = candidates.filter((id) => found.has(id));
  return { ids, ignored: unique(values).length - ids.length };
}

export async function memberIds(db: PoolClient, groupId: string): Promise<string[]> {
  const { rows } = await db.query<{ user_id: string }>(
    `SELECT user_id::text FROM scim_group_members WHERE group_id = $1`,
    [groupId],
  );
  return rows.map((r) => r.user_id);
}

/**
 * Makes the group hold exactly `ids` (users of its company), with the display each request entry gave (a member
 * given again without one keeps its own): two set-based statements whatever the sizes.
 */
export async function setMembers(
  db: PoolClient,
  groupId: string,
  ids: readonly string[],
  displays: ReadonlyMap<string, string> = new Map(),
): Promise<void> {
  await db.query(`DELETE FROM scim_group_members WHERE group_id = $1 AND NOT (user_id = ANY($2::uuid[]))`, [
    groupId,
    ids,
  ]);
  await db.query(
    `INSERT INTO scim_group_members (group_id, user_id, display) SELECT $1, m.user_id, m.display FROM unnest($2::uuid[], $3::text[]) AS m(user_id, display)
     ON CONFLICT (group_id, user_id) DO UPDATE SET display = coalesce(EXCLUDED.display, scim_group_members.display)
       WHERE EXCLUDED.display IS DISTINCT FROM scim_group_members.display AND EXCLUDED.display IS NOT NULL`,
    [groupId, ids, ids.map((id) => displays.get(id) ?? null)],
  );
}

/** The display each member entry of a request gave, by user id (lower case, as ids are compared). */
export function displaysOf(members: readonly { value: string; display?: string | null }[]): Map<string, string> {
  const displays = new Map<string, string>();
  for (const m of members) if (m.display != null) displays.set(m.value.toLowerCase(), m.display);
  return displays;
}

/** What a member's trail compares: its groups (by name) and what it may do, own permissions and groups' grants joined. */
function accessView(user: ScimUser): Record<string, unknown> {
  const effective = user[SCIM_EXTENSION_SCHEMA]?.effectivePermissions;
  return { groups: (user.groups ?? []).map((g) => g.display), ...permissionsView('effectivePermissions', effective) };
}

async function accessOf(
  db: PoolClient,
  companyId: string,
  userIds: readonly string[],
  baseUrl: string,
): Promise<Map<string, { groupIds: string[]; view: Record<string, unknown> }>> {
  const { rows } = await db.query<UserRow>(
    `SELECT ${USER_COLUMNS} FROM dashboard_users WHERE company_id = $1 AND id = ANY($2::uuid[])`,
    [companyId, userIds],
  );
  const users = await renderUsers(db, companyId, rows, baseUrl, { effective: true });
  return new Map(users.map((u) => [u.id, { groupIds: (u.groups ?? []).map((g) => g.value), view: accessView(u) }]));
}

/**
 * Runs `write` (which changes the group's row, its members, or deletes it) and audits every user of `affected`
 * whose access it changed. The affected users are locked first, in id order, so that two group changes sharing a
 * member record its access in the order they commit (a user's own PATCH locks only its row: no lock cycle).
 */
export async function auditedGroupChange(
  db: PoolClient,
  companyId: string,
  groupId: string,
  affected: readonly string[],
  actor: ScimActor,
  baseUrl: string,
  write: () => Promise<void>,
): Promise<void> {
  const ids = unique(affected);
  if (ids.length > 0)
    await db.query(`SELECT id FROM dashboard_users WHERE id = ANY($1::uuid[]) ORDER BY id FOR UPDATE`, [ids]);
  const before = ids.length > 0 ? await accessOf(db, companyId, ids, baseUrl) : new Map();
  await write();
  if (ids.length === 0) return;
  const after = await accessOf(db, companyId, ids, baseUrl);
  const entries: { userId: string; action: AuditAction; changes: Record<string, FieldChange> }[] = [];
  for (const id of ids) {
    const was = before.get(id);
    const is = after.get(id);
    if (!was || !is) continue;
    const changes = diffViews(was.view, is.view);
    if (Object.keys(changes).length === 0) continue;
    const wasIn = was.groupIds.includes(groupId);
    const isIn = is.groupIds.includes(groupId);
    entries.push({
      userId: id,
      action: !wasIn && isIn ? 'join_group' : wasIn && !isIn ? 'leave_group' : 'group_grants',
      changes,
    });
  }
  await recordAudits(db, companyId, actor, entries);
}
