import { z } from 'zod';

/** The SCIM 2.0 core User schema URN; every User body must list it in `schemas`. */
export const SCIM_USER_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:User';
export const SCIM_LIST_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:ListResponse';
/**
 * Our extension of the User resource: the spec's department, permissions and lastSignInAt, which the core schema
 * does not define. Responses carry them both at the root (as the spec shows them) and under this URN.
 */
export const SCIM_EXTENSION_SCHEMA = 'urn:ietf:params:scim:schemas:extension:ces:2.0:User';
/** Microsoft Entra ID and Okta send `department` in the enterprise extension; it is read as ours. */
export const SCIM_ENTERPRISE_SCHEMA = 'urn:ietf:params:scim:schemas:extension:enterprise:2.0:User';
export const SCIM_PATCH_SCHEMA = 'urn:ietf:params:scim:api:messages:2.0:PatchOp';

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
  /** Email entries of a user (identity providers send one to three). */
  emails: 10,
  /** Operations of one PATCH request. */
  patchOperations: 100,
  /** Length of a PATCH path. */
  patchPath: 500,
  /** Members of one group (a company's whole dashboard staff fits many times over). */
  groupMembers: 10_000,
  /** Largest `count` a list page returns (RFC 7644 3.4.2.4 lets the provider return fewer than asked). */
  maxCount: 200,
  defaultCount: 100,
} as const;

export const text = (field: string) =>
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
      ctx.addIssue({
        code: 'custom',
        message: 'appGroupPermissions or appGroupPermissionSets is required',
        path: ['appGroupPermissions'],
      });
    }
  });

export const Permissions = z.object(
  {
    companyPermissions: PermissionList('companyPermissions').nullish(),
    appGroup: z
      .array(AppGroup, { error: 'appGroup must be an array' })
      .max(SCIM_LIMITS.appGroups, `appGroup may hold at most ${SCIM_LIMITS.appGroups} entries`)
      .nullish(),
  },
  { error: 'permissions must be an object {companyPermissions, appGroup}' },
);

/** Entra ID sends booleans as the strings "True" and "False". */
export const ScimBoolean = z.union(
  [
    z.boolean(),
    z
      .string()
      .regex(/^(true|false)$/i)
      .transform((v) => v.toLowerCase() === 'true'),
  ],
  {
    error: 'active must be a boolean (true or false)',
  },
);

const Email = z.object(
  {
    value: z
      .string({ error: 'emails[].value must be a string' })
      .trim()
      .max(SCIM_LIMITS.userName, `emails[].value must be at most ${SCIM_LIMITS.userName} characters`)
      .pipe(z.email('emails[].value must be an email address')),
    type: z
      .string({ error: 'emails[].type must be a string' })
      .max(50, 'emails[].type must be at most 50 characters')
      .optional(),
    primary: ScimBoolean.optional(),
  },
  { error: 'each emails entry must be an object {value, type, primary}' },
);

/** RFC 7643 2.4: "primary" is true for at most one value of a multi-valued attribute. */
const Emails = z
  .array(Email, { error: 'emails must be an array' })
  .max(SCIM_LIMITS.emails, `emails may hold at most ${SCIM_LIMITS.emails} entries`)
  .refine(
    (list) => list.filter((e) => e.primary === true).length <= 1,
    'emails may have at most one entry with primary true',
  );

export const ExternalId = z
  .string({ error: 'externalId must be a string' })
  .min(1, 'externalId must not be empty')
  .max(SCIM_LIMITS.text, `externalId must be at most ${SCIM_LIMITS.text} characters`);

/** Our extension in a request: the same department and permissions as at the root (null: unassigned). */
const Extension = z.object(
  { department: text('department').nullish(), permissions: Permissions.nullish() },
  { error: `${SCIM_EXTENSION_SCHEMA} must be an object {department, permissions}` },
);

/** Of the enterprise extension only department is stored; the rest (employeeNumber, manager...) is ignored. */
const Enterprise = z.looseObject(
  { department: text('department').nullish() },
  { error: `${SCIM_ENTERPRISE_SCHEMA} must be an object` },
);

const userFields = {
  schemas: Schemas,
  userName: UserName,
  name: Name,
  displayName: text('displayName').nullish().describe('As the identity provider sends it; null clears it'),
  department: text('department')
    .nullish()
    .describe(
      `Here, in ${SCIM_EXTENSION_SCHEMA} or in the enterprise extension; optional (null: none), a PUT without it keeps it`,
    ),
  permissions: Permissions.nullish().describe(
    `Here or in ${SCIM_EXTENSION_SCHEMA}; optional (null: none of its own), a PUT without it keeps it`,
  ),
  active: ScimBoolean.optional().describe('Default true on create; a PUT or PATCH without it leaves it as it is'),
  externalId: ExternalId.nullish().describe("The identity provider's id for the user; null clears it"),
  emails: Emails.nullish(),
  [SCIM_EXTENSION_SCHEMA]: Extension.optional(),
  [SCIM_ENTERPRISE_SCHEMA]: Enterprise.optional(),
};

type UserFieldsInput = z.infer<z.ZodObject<typeof userFields>>;

/**
 * department and permissions may be at the root (as the spec shows them) or in our extension; department also in
 * the enterprise extension, where Entra ID and Okta map it. The root wins, then ours, then the enterprise one.
 * Both are optional (RFC 7643 leaves them out of the core): undefined is "not given", null is "none".
 */
function foldExtensions<T extends Partial<UserFieldsInput>>(input: T) {
  const { [SCIM_EXTENSION_SCHEMA]: ours, [SCIM_ENTERPRISE_SCHEMA]: enterprise, ...rest } = input;
  const department =
    rest.department !== undefined
      ? rest.department
      : ours?.department !== undefined
        ? ours.department
        : enterprise?.department;
  const permissions = rest.permissions !== undefined ? rest.permissions : ours?.permissions;
  return { ...rest, department, permissions };
}

/**
 * POST body. Attributes this service does not store (displayName, phoneNumbers, the rest of the enterprise
 * extension...) are ignored rather than refused: identity providers send their whole mapping and RFC 7644 lets a
 * provider drop what it does not store.
 */
export const ScimUserCreate = z.object(userFields).transform(foldExtensions);
export type ScimUserCreate = z.output<typeof ScimUserCreate>;

/** PUT body: userName may be repeated (it must then be the same address) but not changed. */
export const ScimUserReplace = z.object({ ...userFields, userName: UserName.optional() }).transform(foldExtensions);
export type ScimUserReplace = z.output<typeof ScimUserReplace>;
export type ScimPermissionsInput = z.infer<typeof Permissions>;

/** RFC 7644 3.5.2: a PatchOp message. `op` is matched in any letter case (Entra ID sends "Replace"). */
export const ScimPatch = z.object({
  schemas: z
    .array(z.string().max(SCIM_LIMITS.text), { error: 'schemas must be an array of strings' })
    .max(10, 'schemas may list at most 10 URNs')
    .refine((s) => s.includes(SCIM_PATCH_SCHEMA), `schemas must contain ${SCIM_PATCH_SCHEMA}`),
  Operations: z
    .array(
      z.object(
        {
          op: z
            .string({ error: 'op must be add, remove or replace' })
            .transform((op) => op.toLowerCase())
            .pipe(z.enum(['add', 'remove', 'replace'], { error: 'op must be add, remove or replace' })),
          path: z
            .string({ error: 'path must be a string' })
            .min(1, 'path must not be empty')
            .max(SCIM_LIMITS.patchPath, `path must be at most ${SCIM_LIMITS.patchPath} characters`)
            .optional(),
          value: z.unknown().optional(),
        },
        { error: 'each operation must be an object {op, path, value}' },
      ),
      { error: 'Operations must be an array' },
    )
    .min(1, 'Operations must hold at least one operation')
    .max(SCIM_LIMITS.patchOperations, `Operations may hold at most ${SCIM_LIMITS.patchOperations} operations`),
});
export type ScimPatch = z.output<typeof ScimPatch>;
export type ScimPatchOperation = ScimPatch['Operations'][number];

const TeamOut = z.object({ teamId: z.string(), teamName: z.string(), teamPermissions: z.array(z.string()) });
const AppGroupOut = z.object({
  appGroupId: z.string(),
  appGroupName: z.string(),
  appGroupPermissions: z.array(z.string()).optional(),
  team: z.array(TeamOut).optional(),
  appGroupPermissionSets: z.array(z.object({ appGroupPermissionSetName: z.string() })).optional(),
});

export const PermissionsOut = z.object({ companyPermissions: z.array(z.string()), appGroup: z.array(AppGroupOut) });
const LastSignInAt = z.string().nullable().describe('Last successful sign-in (UTC); null until the user signs in');

export const ScimUser = z.object({
  schemas: z.array(z.string()),
  id: z.string(),
  externalId: z.string().optional().describe('Absent when the identity provider gave none'),
  userName: z.string(),
  displayName: z.string().optional().describe('Absent when the identity provider gave none'),
  name: z.object({ givenName: z.string(), familyName: z.string() }),
  active: z.boolean().describe('false: deactivated by the identity provider (see docs/scim.md)'),
  emails: z
    .array(z.object({ value: z.string(), type: z.string().optional(), primary: z.boolean().optional() }))
    .optional()
    .describe('Absent when empty'),
  groups: z
    // `$ref` passes through the loose object: as a declared property OpenAPI tooling would read it as a schema
    // reference.
    .array(
      z
        .looseObject({ value: z.string(), display: z.string(), type: z.literal('direct') })
        .describe("Also `$ref`: the group's URI"),
    )
    .optional()
    .describe('The groups the user belongs to (read-only; change them through /Groups); absent when none'),
  department: z.string().optional().describe('Absent when the user has none'),
  lastSignInAt: LastSignInAt,
  permissions: PermissionsOut.optional().describe(
    'Absent when the user has none of its own (its groups may grant some)',
  ),
  [SCIM_EXTENSION_SCHEMA]: z
    .object({
      department: z.string().optional(),
      permissions: PermissionsOut.optional(),
      lastSignInAt: z.string().optional(),
      effectivePermissions: PermissionsOut.optional().describe(
        "Its own permissions plus its groups' grants; only when `attributes` names it",
      ),
    })
    .optional()
    .describe('Absent when none of its attributes has a value'),
  meta: z.object({
    resourceType: z.literal('User'),
    created: z.string(),
    lastModified: z.string(),
    location: z.string(),
  }),
});
export type ScimUser = z.infer<typeof ScimUser>;

/**
 * A user as GET returns it: whole, or narrowed by `attributes` / `excludedAttributes` to any part of it (sub-attributes
 * too) with id and schemas always there.
 */
export const ScimUserProjected = z.union([
  ScimUser,
  z
    .looseObject({ schemas: z.array(z.string()), id: z.string() })
    .describe('The user narrowed by attributes or excludedAttributes'),
]);

export const ScimListResponse = z.object({
  schemas: z.array(z.string()),
  totalResults: z.number().int(),
  startIndex: z.number().int(),
  itemsPerPage: z.number().int(),
  Resources: z.array(ScimUserProjected),
});
export type ScimListResponse = z.infer<typeof ScimListResponse>;
