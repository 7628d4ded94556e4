import type { Pool, PoolClient } from '../../platform/db/pool.js';

/** A dashboard user as stored (`dashboard_users`), and how its permissions are kept. */

export type Db = Pool | PoolClient;

export const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

export const unique = (values: readonly string[]) => [...new Set(values)];

/**
 * How permissions are stored: by workspace, team and permission-set id, so that a renamed workspace shows its new
 * name and a deleted one drops out of the user's permissions instead of naming something that no longer exists.
 */
export interface StoredAppGroup {
  workspaceId: string;
  permissions?: string[];
  teams?: { teamId: string; permissions: string[] }[];
  permissionSetIds?: string[];
}
export interface StoredPermissions {
  companyPermissions: string[];
  appGroup: StoredAppGroup[];
}

/** An email entry as the identity provider sent it (RFC 7643 4.1.2). */
export interface StoredEmail {
  value: string;
  type?: string;
  primary?: boolean;
}

export interface UserRow {
  id: string;
  user_name: string;
  given_name: string;
  family_name: string;
  /** null: none (RFC 7643 unassigned). */
  department: string | null;
  /** null: none of its own; `{companyPermissions: [], appGroup: []}` is assigned and empty. */
  permissions: StoredPermissions | null;
  display_name: string | null;
  last_sign_in_at: Date | null;
  active: boolean;
  external_id: string | null;
  emails: StoredEmail[];
  created_at: Date;
  updated_at: Date;
}

export const USER_COLUMNS =
  'id::text, user_name, display_name, given_name, family_name, department, permissions, last_sign_in_at, active, external_id, emails, created_at, updated_at';
