import { z } from 'zod';

/** The SCIM 2.0 core User schema URN; every User body must list it in `schemas`. */
export const SCIM_USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const SCIM_LIST_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';

/**
 * Size limits of a User body. The spec gives none; these are generous for any real directory and keep one body far
 * below the request size limit. docs/scim.md lists them.
 */
export const SCIM_LIMITS = {
  /** RFC 5321 caps a usable address at 254 characters. */
  userName: 254,
  /** givenName, familyName, department, workspace/team/permission-set names, each permission string. */
  text: 255,
  /** Entries of companyPermissions, appGroupPermissions and teamPermissions. */
  permissions: 100,
  /** Workspace entries in permissions.appGroup. */
  appGroups: 500,
  /** Team entries of one workspace entry. */
  teams: 100,
  /** Length of a `filter` query parameter. */
  filter: 1000,
  /** Largest `count` a list page returns (RFC 7644 3.4.2.4 lets the provider return fewer than asked). */
  maxCount: 200,
  defaultCount: 100,
} as const;

const text = (field: string) =>
  z
    .string({ error: `${field} must be a string` })
    .min(1, `${field} must not be empty`)
    .max(SCIM_LIMITS.text, `${field} must be at most ${SCIM_LIMITS.text} characters`);

const PermissionList = (field: string) =>
  z
    .array(text('each permission'), { error: `${field} must be an array of strings` })
    .max(SCIM_LIMITS.permissions, `${field} may hold at most ${SCIM_LIMITS.permissions} permissions`);

const Schemas = z
  .array(z.string().max(SCIM_LIMITS.text), { error: 'schemas must be an array of strings' })
  .max(10, 'schemas may list at most 10 URNs')
  .refine((s) => s.includes(SCIM_USER_SCHEMA), `schemas must contain ${SCIM_USER_SCHEMA}`);

const UserName = z
  .string({ error: 'userName must be a string' })
  .trim()
  .max(SCIM_LIMITS.userName, `userName must be at most ${SCIM_LIMITS.userName} characters`)
  .pipe(z.email('userName must be an email address'));

const Name = z.object(
  { givenName: text('name.givenName'), familyName: text('name.familyName') },
  { error: 'name must be an object {givenName, familyName}' },
);

/** A workspace or team may be named, or given by the id a previous response returned (a GET echoed into a PUT). */
const Team = z
  .object(
    {
      teamName: text('teamName').nullish(),
      teamId: text('teamId').nullish(),
      teamPermissions: PermissionList('teamPermissions'),
    },
    { error: 'each team entry must be an object' },
  )
  .refine((t) => t.teamName != null || t.teamId != null, { message: 'teamName is required', path: ['teamName'] });

const PermissionSetRef = z.object(
  { appGroupPermissionSetName: text('appGroupPermissionSetName') },
  { error: 'each appGroupPermissionSets entry must be an object {appGroupPermissionSetName}' },
);

const AppGroup = z
  .object(
    {
      appGroupName: text('appGroupName').nullish(),
      appGroupId: text('appGroupId').nullish(),
      appGroupPermissions: PermissionList('appGroupPermissions').nullish(),
      appGroupPermissionSets: z
        .array(PermissionSetRef, { error: 'appGroupPermissionSets must be an array' })
        .length(1, 'appGroupPermissionSets must hold exactly one permission set')
        .nullish(),
      team: z
        .array(Team, { error: 'team must be an array' })
        .max(SCIM_LIMITS.teams, `team may hold at most ${SCIM_LIMITS.teams} entries`)
        .nullish(),
    },
    { error: 'each appGroup entry must be an object' },
  )
  .superRefine((g, ctx) => {
    if (g.appGroupName == null && g.appGroupId == null) {
      ctx.addIssue({ code: 'custom', message: 'appGroupName is required', path: ['appGroupName'] });
    }
    const sets = g.appGroupPermissionSets != null;
    const direct = g.appGroupPermissions != null || g.team != null;
    if (sets && direct) {
      ctx.addIssue({
        code: 'custom',
        message: 'a workspace entry carries either appGroupPermissions (with team) or appGroupPermissionSets, not both',
        path: ['appGroupPermissionSets'],
      });
    } else if (!sets && g.appGroupPermissions == null) {
      ctx.addIssue({ code: 'custom', message: 'appGroupPermissions or appGroupPermissionSets is required', path: ['appGroupPermissions'] });
    }
  });

const Permissions = z.object(
  {
    companyPermissions: PermissionList('companyPermissions').nullish(),
    appGroup: z
      .array(AppGroup, { error: 'appGroup must be an array' })
      .max(SCIM_LIMITS.appGroups, `appGroup may hold at most ${SCIM_LIMITS.appGroups} entries`)
      .nullish(),
  },
  { error: 'permissions must be an object {companyPermissions, appGroup}' },
);

/**
 * POST body. Unknown attributes (active, emails, externalId, enterprise extensions...) are ignored rather than
 * refused: identity providers send their whole mapping and RFC 7644 lets a provider drop what it does not store.
 */
export const ScimUserCreate = z.object({
  schemas: Schemas,
  userName: UserName,
  name: Name,
  department: text('department'),
  permissions: Permissions,
});
export type ScimUserCreate = z.infer<typeof ScimUserCreate>;

/** PUT body: userName may be repeated (it must then be the same address) but not changed. */
export const ScimUserReplace = ScimUserCreate.extend({ userName: UserName.optional() });
export type ScimUserReplace = z.infer<typeof ScimUserReplace>;
export type ScimPermissionsInput = z.infer<typeof Permissions>;

const TeamOut = z.object({ teamId: z.string(), teamName: z.string(), teamPermissions: z.array(z.string()) });
const AppGroupOut = z.object({
  appGroupId: z.string(),
  appGroupName: z.string(),
  appGroupPermissions: z.array(z.string()).optional(),
  team: z.array(TeamOut).optional(),
  appGroupPermissionSets: z.array(z.object({ appGroupPermissionSetName: z.string() })).optional(),
});

export const ScimUser = z.object({
  schemas: z.array(z.string()),
  id: z.string(),
  userName: z.string(),
  name: z.object({ givenName: z.string(), familyName: z.string() }),
  department: z.string(),
  lastSignInAt: z.string().nullable().describe('Last successful sign-in (UTC); null until the user signs in'),
  permissions: z.object({ companyPermissions: z.array(z.string()), appGroup: z.array(AppGroupOut) }),
  meta: z.object({ resourceType: z.literal('User'), created: z.string(), lastModified: z.string(), location: z.string() }),
});
export type ScimUser = z.infer<typeof ScimUser>;

export const ScimListResponse = z.object({
  schemas: z.array(z.string()),
  totalResults: z.number().int(),
  startIndex: z.number().int(),
  itemsPerPage: z.number().int(),
  Resources: z.array(ScimUser),
});
export type ScimListResponse = z.infer<typeof ScimListResponse>;
