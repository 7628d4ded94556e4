import { loadReferenceNames, renderEffective, renderPermissions } from './permissions-view.js';
import { SCIM_EXTENSION_SCHEMA, SCIM_USER_SCHEMA, type ScimUser } from './schemas.js';
import type { Db, StoredPermissions, UserRow } from './user-rows.js';

/** From stored dashboard users to SCIM User resources, references shown by their current names. */

export interface RenderOptions {
  /** Add `effectivePermissions` to our extension (RFC 7643 `returned: request`: only when `attributes` names it). */
  effective?: boolean;
}

/** A group a user belongs to, with what it grants. */
export interface UserGroup {
  userId: string;
  id: string;
  displayName: string;
  grants: StoredPermissions | null;
}

/** The groups of each user, by name; one query for all rows. */
export async function groupsOfUsers(db: Db, userIds: readonly string[]): Promise<Map<string, UserGroup[]>> {
  const byUser = new Map<string, UserGroup[]>();
  if (userIds.length === 0) return byUser;
  const { rows } = await db.query<UserGroup>(
    `SELECT m.user_id::text AS "userId", g.id::text AS id, g.display_name AS "displayName", g.grants
       FROM scim_group_members m JOIN scim_groups g ON g.id = m.group_id
      WHERE m.user_id = ANY($1::uuid[])
      ORDER BY lower(g.display_name), g.id`,
    [userIds],
  );
  for (const r of rows) byUser.set(r.userId, [...(byUser.get(r.userId) ?? []), r]);
  return byUser;
}

/** Turns stored rows into SCIM representations, naming workspaces, teams, sets and groups in one lookup for all rows. */
export async function renderUsers(
  db: Db,
  companyId: string,
  rows: UserRow[],
  baseUrl: string,
  options: RenderOptions = {},
): Promise<ScimUser[]> {
  // Sequential on purpose: db may be a transaction's client, which runs one query at a time.
  const groups = await groupsOfUsers(
    db,
    rows.map((r) => r.id),
  );
  const stored = rows.flatMap((r) => (r.permissions ? [r.permissions] : []));
  if (options.effective) for (const list of groups.values()) for (const g of list) if (g.grants) stored.push(g.grants);
  const names = await loadReferenceNames(db, companyId, stored);
  return rows.map((r) => {
    const permissions = r.permissions === null ? undefined : renderPermissions(r.permissions, names);
    const lastSignInAt = r.last_sign_in_at ? r.last_sign_in_at.toISOString() : null;
    const memberOf = groups.get(r.id) ?? [];
    const effective = options.effective
      ? renderEffective([r.permissions, ...memberOf.map((g) => g.grants)], names)
      : undefined;
    // RFC 7643 2.5: an unassigned attribute is left out (null and [] mean the same); the root lastSignInAt stays, null,
    // because the spec's responses always show it.
    const extension = {
      ...(r.department === null ? {} : { department: r.department }),
      ...(permissions ? { permissions } : {}),
      ...(lastSignInAt === null ? {} : { lastSignInAt }),
      ...(effective ? { effectivePermissions: effective } : {}),
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
      ...(memberOf.length === 0
        ? {}
        : {
            groups: memberOf.map((g) => ({
              value: g.id,
              display: g.displayName,
              $ref: `${baseUrl}/scim/v2/Groups/${g.id}`,
              type: 'direct' as const,
            })),
          }),
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

export async function renderOne(
  db: Db,
  companyId: string,
  row: UserRow,
  baseUrl: string,
  options: RenderOptions = {},
): Promise<ScimUser> {
  const [user] = await renderUsers(db, companyId, [row], baseUrl, options);
  return user!;
}
