import { z } from 'zod';

/**
 * The allowed department and permission strings. The spec does not list them ("not shown"); these defaults are the
 * public API's own SCIM strings (its "SCIM API objects and appendix"), so identity-provider mappings written for it
 * work unchanged. A company extends them through the workspace file (`companies.settings.scim`).
 */
export const DEFAULT_DEPARTMENTS = ['agency', 'bi', 'c_suite', 'engineering', 'finance', 'marketing', 'pm'] as const;

export const DEFAULT_COMPANY_PERMISSIONS = ['admin', 'manage_company_settings', 'add_remove_app_groups'] as const;

export const DEFAULT_WORKSPACE_PERMISSIONS = [
  'admin',
  'basic_access',
  'approve_deny_campaigns',
  'send_campaigns_canvases',
  'publish_cards',
  'edit_segments',
  'export_user_data',
  'view_pii',
  'view_user_profile',
  'manage_dashboard_users',
  'manage_media_library',
  'view_usage_data',
  'import_update_user_data',
  'view_billing_details',
  'dev_console',
  'launch_content_blocks',
  'manage_external_integrations',
  'manage_apps',
  'manage_teams',
  'manage_events_attributes_purchases',
  'manage_tags',
  'manage_email_settings',
  'manage_subscription_groups',
  'manage_approval_settings',
  'manage_catalogs_dashboard_permission',
] as const;

export const DEFAULT_TEAM_PERMISSIONS = [
  'admin',
  'basic_access',
  'approve_deny_campaigns',
  'send_campaigns_canvases',
  'publish_cards',
  'edit_segments',
  'export_user_data',
  'view_user_profile',
  'manage_dashboard_users',
  'manage_media_library',
] as const;

const Name = z.string().min(1).max(255);
const NameList = z.array(Name).max(1000);

/**
 * `companies.settings.scim`, written by the workspace file. `permissions` as a plain list extends every level
 * (company, workspace, team); as an object it extends each level separately.
 */
export const ScimCompanySettings = z.object({
  departments: NameList.optional(),
  permissions: z
    .union([
      NameList,
      z.object({ company: NameList.optional(), workspace: NameList.optional(), team: NameList.optional() }).strict(),
    ])
    .optional(),
});
export type ScimCompanySettings = z.infer<typeof ScimCompanySettings>;

export interface AllowedStrings {
  departments: ReadonlySet<string>;
  company: ReadonlySet<string>;
  workspace: ReadonlySet<string>;
  team: ReadonlySet<string>;
}

/** The defaults plus a company's extensions; `settings` is the whole `companies.settings` value. */
export function allowedStrings(settings: unknown): AllowedStrings {
  const raw = (settings as { scim?: unknown } | null | undefined)?.scim;
  // The workspace file validates with ScimCompanySettings before writing; a hand-edited row that does not parse
  // falls back to the defaults rather than locking every identity provider out.
  const parsed = ScimCompanySettings.safeParse(raw ?? {});
  const ext = parsed.success ? parsed.data : {};
  const perms = ext.permissions;
  const all = Array.isArray(perms) ? perms : [];
  const level = (key: 'company' | 'workspace' | 'team') => (Array.isArray(perms) ? [] : (perms?.[key] ?? []));
  return {
    departments: new Set([...DEFAULT_DEPARTMENTS, ...(ext.departments ?? [])]),
    company: new Set([...DEFAULT_COMPANY_PERMISSIONS, ...all, ...level('company')]),
    workspace: new Set([...DEFAULT_WORKSPACE_PERMISSIONS, ...all, ...level('workspace')]),
    team: new Set([...DEFAULT_TEAM_PERMISSIONS, ...all, ...level('team')]),
  };
}
