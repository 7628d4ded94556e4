import type { PoolClient } from '../../platform/db/pool.js';
import type { ScimPermissions } from './permissions-view.js';
import type { ScimUser } from './schemas.js';

/**
 * Who made a change: the SCIM token (id and name) and the X-Request-Origin the identity provider sent; a workspace
 * file's apply, which changes a group's role, has no token (null).
 */
export interface ScimActor {
  tokenId: string | null;
  tokenName: string;
  origin: string;
}

/**
 * deactivate and reactivate are updates that change `active` (whatever else they change); join_group, leave_group
 * and group_grants are what a group's change did to a member (its groups, its effective permissions).
 */
export type AuditAction =
  'create' | 'update' | 'delete' | 'deactivate' | 'reactivate' | 'join_group' | 'leave_group' | 'group_grants';
export type FieldChange = { from: unknown; to: unknown };

/**
 * A user as flat "field -> value" pairs, so that a diff names what changed: `department`,
 * `permissions.companyPermissions`, `permissions.appGroup[Marketing]`. Workspaces are keyed by name (what an admin
 * reads); ids and sign-in times are left out since they are not edited through SCIM.
 */
export function auditView(user: ScimUser): Record<string, unknown> {
  const view: Record<string, unknown> = {
    userName: user.userName,
    displayName: user.displayName ?? null,
    active: user.active,
    externalId: user.externalId ?? null,
    emails: user.emails ?? [],
    'name.givenName': user.name.givenName,
    'name.familyName': user.name.familyName,
    department: user.department ?? null,
    ...permissionsView('permissions', user.permissions),
  };
  return view;
}

/**
 * Permissions as flat pairs under `prefix`: `<prefix>.companyPermissions` and one `<prefix>.appGroup[<workspace
 * name>]` per workspace, without the ids the server filled in.
 */
export function permissionsView(prefix: string, permissions: ScimPermissions | undefined): Record<string, unknown> {
  const view: Record<string, unknown> = { [`${prefix}.companyPermissions`]: permissions?.companyPermissions ?? null };
  for (const g of permissions?.appGroup ?? []) {
    const { appGroupId: _id, appGroupName, team, ...rest } = g;
    view[`${prefix}.appGroup[${appGroupName}]`] = {
      ...rest,
      ...(team ? { team: team.map(({ teamId: _t, ...t }) => t) } : {}),
    };
  }
  return view;
}

/** The fields whose values differ; absent on one side means null there. */
export function diffViews(
  before: Record<string, unknown> | null,
  after: Record<string, unknown> | null,
): Record<string, FieldChange> {
  const changes: Record<string, FieldChange> = {};
  const keys = new Set([...Object.keys(before ?? {}), ...Object.keys(after ?? {})]);
  for (const key of keys) {
    const from = before?.[key] ?? null;
    const to = after?.[key] ?? null;
    if (JSON.stringify(from) !== JSON.stringify(to)) changes[key] = { from, to };
  }
  return changes;
}

const ORIGIN_MAX = 255;

/** Appends one row to the audit trail, in the caller's transaction so that a change and its record commit together. */
export async function recordAudit(
  db: PoolClient,
  companyId: string,
  userId: string,
  actor: ScimActor,
  action: AuditAction,
  changes: Record<string, FieldChange>,
): Promise<void> {
  const origin = actor.origin.slice(0, ORIGIN_MAX);
  await db.query(
    `INSERT INTO dashboard_user_audit (company_id, dashboard_user_id, actor, action, changes, scim_token_id, request_origin)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [companyId, userId, `${actor.tokenName} (${origin})`, action, JSON.stringify(changes), actor.tokenId, origin],
  );
}

/** One audit row for each of several users (a group's change), in one statement. */
export async function recordAudits(
  db: PoolClient,
  companyId: string,
  actor: ScimActor,
  entries: readonly { userId: string; action: AuditAction; changes: Record<string, FieldChange> }[],
): Promise<void> {
  if (entries.length === 0) return;
  const origin = actor.origin.slice(0, ORIGIN_MAX);
  await db.query(
    `INSERT INTO dashboard_user_audit (company_id, dashboard_user_id, actor, action, changes, scim_token_id, request_origin)
     SELECT $1, e.user_id, $2, e.action, e.changes, $3, $4
       FROM unnest($5::uuid[], $6::text[], $7::jsonb[]) AS e(user_id, action, changes)`,
    [
      companyId,
      `${actor.tokenName} (${origin})`,
      actor.tokenId,
      origin,
      entries.map((e) => e.userId),
      entries.map((e) => e.action),
      entries.map((e) => JSON.stringify(e.changes)),
    ],
  );
}

/** Appends one row to a group's trail, in the caller's transaction. */
export async function recordGroupAudit(
  db: PoolClient,
  companyId: string,
  groupId: string,
  actor: ScimActor,
  action: 'create' | 'update' | 'delete',
  changes: Record<string, FieldChange>,
): Promise<void> {
  const origin = actor.origin.slice(0, ORIGIN_MAX);
  await db.query(
    `INSERT INTO scim_group_audit (company_id, group_id, actor, action, changes, scim_token_id, request_origin)
     VALUES ($1, $2, $3, $4, $5, $6, $7)`,
    [companyId, groupId, `${actor.tokenName} (${origin})`, action, JSON.stringify(changes), actor.tokenId, origin],
  );
}
