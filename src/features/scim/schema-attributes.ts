import { SCIM_EXTENSION_SCHEMA, SCIM_LIMITS } from './schemas.js';

/**
 * The attributes of the resources this service serves, as RFC 7643 7 describes them: what /Schemas publishes, what
 * the request bodies are read against (attribute names in any letter case), and what the suites check.
 */

/** The values RFC 7643 (2.2, 2.3, 7) allows for each attribute characteristic. */
export const SCIM_ATTRIBUTE_TYPES = [
  'string',
  'boolean',
  'decimal',
  'integer',
  'dateTime',
  'binary',
  'reference',
  'complex',
] as const;
export const SCIM_MUTABILITIES = ['readOnly', 'readWrite', 'immutable', 'writeOnly'] as const;
export const SCIM_RETURNED = ['always', 'never', 'default', 'request'] as const;
export const SCIM_UNIQUENESS = ['none', 'server', 'global'] as const;

/** An attribute definition of a schema resource (RFC 7643 7). */
export interface ScimAttribute {
  name: string;
  type: (typeof SCIM_ATTRIBUTE_TYPES)[number];
  multiValued: boolean;
  description: string;
  required: boolean;
  caseExact: boolean;
  mutability: (typeof SCIM_MUTABILITIES)[number];
  returned: (typeof SCIM_RETURNED)[number];
  uniqueness: (typeof SCIM_UNIQUENESS)[number];
  canonicalValues?: string[];
  referenceTypes?: string[];
  subAttributes?: ScimAttribute[];
}

type Characteristics = Omit<ScimAttribute, 'name' | 'type' | 'description'>;

/** One attribute with RFC 7643 2.2's defaults (single-valued, optional, case-insensitive, readWrite, default, none). */
export function attr(
  name: string,
  type: ScimAttribute['type'],
  description: string,
  over: Partial<Characteristics> = {},
): ScimAttribute {
  return {
    name,
    type,
    multiValued: false,
    description,
    required: false,
    caseExact: false,
    mutability: 'readWrite',
    returned: 'default',
    uniqueness: 'none',
    ...over,
  };
}

export const complex = (
  name: string,
  description: string,
  subAttributes: ScimAttribute[],
  over: Partial<Characteristics> = {},
) => attr(name, 'complex', description, { ...over, subAttributes });

const permissionList = (name: string, what: string) =>
  attr(
    name,
    'string',
    `${what}: at most ${SCIM_LIMITS.permissions} strings of 1 to ${SCIM_LIMITS.text} characters, from the allowed list (docs/scim.md).`,
    {
      multiValued: true,
      caseExact: true,
    },
  );

const textNote = `1 to ${SCIM_LIMITS.text} characters`;

/** The sub-attributes of a permissions value (a user's own, a group's grants, a user's effective permissions). */
function permissionSubAttributes(): ScimAttribute[] {
  return [
    permissionList('companyPermissions', 'Company-level permissions'),
    complex(
      'appGroup',
      `One entry per workspace (at most ${SCIM_LIMITS.appGroups}), named by appGroupName or by the appGroupId a response returned. It carries appGroupPermissions (with team) or appGroupPermissionSets, never both.`,
      [
        attr(
          'appGroupId',
          'string',
          'The workspace id; in a request it may name the workspace instead of appGroupName (both must then agree).',
          { caseExact: true },
        ),
        attr('appGroupName', 'string', `The workspace name, ${textNote}; responses show its current name.`),
        permissionList('appGroupPermissions', 'Workspace permissions'),
        complex(
          'appGroupPermissionSets',
          'Exactly one permission set, named by appGroupPermissionSetName.',
          [attr('appGroupPermissionSetName', 'string', `The permission set's name, ${textNote}.`, { required: true })],
          { multiValued: true },
        ),
        complex(
          'team',
          `Teams of the workspace (at most ${SCIM_LIMITS.teams}), named by teamName or by the teamId a response returned.`,
          [
            attr(
              'teamId',
              'string',
              'The team id; in a request it may name the team instead of teamName (both must then agree).',
              { caseExact: true },
            ),
            attr('teamName', 'string', `The team name, ${textNote}; responses show its current name.`),
            permissionList(
              'teamPermissions',
              'Team permissions (required in each team entry of a request, may be empty)',
            ),
          ],
          { multiValued: true },
        ),
      ],
      { multiValued: true },
    ),
  ];
}

export const permissionsAttribute = (description: string, over: Partial<Characteristics> = {}) =>
  complex('permissions', description, permissionSubAttributes(), over);

/**
 * department, permissions and lastSignInAt, as both the core schema (at the root, where the API spec shows them) and
 * our extension define them. `where` ends each description: where else the attribute is found.
 */
export function dashboardAttributes(where: string): ScimAttribute[] {
  return [
    attr(
      'department',
      'string',
      `The user's department, one of the company's allowed departments (docs/scim.md), ${textNote}. Optional: a user may have none (absent, or null in a request); given at the root, in ${SCIM_EXTENSION_SCHEMA} or in the enterprise extension. ${where}`,
      {
        caseExact: true,
      },
    ),
    permissionsAttribute(
      `What the user may do in the dashboard, of its own (its groups may grant more). Optional: absent, or null in a request, is none of its own; given at the root or in ${SCIM_EXTENSION_SCHEMA}. ${where}`,
    ),
    attr(
      'lastSignInAt',
      'dateTime',
      `Last successful sign-in to the dashboard (UTC); null until the user signs in. ${where}`,
      { mutability: 'readOnly' },
    ),
  ];
}

export const readOnly = (a: ScimAttribute): ScimAttribute => ({
  ...a,
  mutability: 'readOnly',
  ...(a.subAttributes ? { subAttributes: a.subAttributes.map(readOnly) } : {}),
});

export const userAttributes: ScimAttribute[] = [
  attr('id', 'string', 'The id the service gave the user (a uuid); unique, never reassigned.', {
    caseExact: true,
    mutability: 'readOnly',
    returned: 'always',
    uniqueness: 'server',
  }),
  attr(
    'externalId',
    'string',
    `The identity provider's id for the user, ${textNote}; absent when none was given, null in a request clears it.`,
    { caseExact: true },
  ),
  attr(
    'userName',
    'string',
    `The user's email address, at most ${SCIM_LIMITS.userName} characters; unique in the company ignoring letter case. Set by the create; a PUT or PATCH may repeat it, not change it.`,
    {
      required: true,
      mutability: 'immutable',
      uniqueness: 'server',
    },
  ),
  complex(
    'name',
    "The user's name.",
    [
      attr('givenName', 'string', `Given name, ${textNote}.`, { required: true }),
      attr('familyName', 'string', `Family name, ${textNote}.`, { required: true }),
    ],
    { required: true },
  ),
  attr(
    'displayName',
    'string',
    `The name to show, as the identity provider sent it, ${textNote}; absent when none was given.`,
  ),
  attr(
    'active',
    'boolean',
    'Whether the account is active. Required so that it is never removed (every user is active or not; a remove could only guess which): a create that omits it makes the user active, a PUT that omits it keeps it.',
    { required: true },
  ),
  complex(
    'emails',
    `Email addresses of the user, at most ${SCIM_LIMITS.emails}.`,
    [
      attr('value', 'string', `An email address, at most ${SCIM_LIMITS.userName} characters.`, { required: true }),
      attr('type', 'string', 'A label: work, home or other.', { canonicalValues: ['work', 'home', 'other'] }),
      attr('primary', 'boolean', 'Whether this is the primary address.'),
    ],
    { multiValued: true },
  ),
  readOnly(
    complex(
      'groups',
      'The groups the user belongs to (RFC 7643 4.1.2): read-only here, changed through /Groups. Absent when none.',
      [
        attr('value', 'string', "The group's id.", { caseExact: true }),
        attr('$ref', 'reference', "The group's URI.", { referenceTypes: ['Group'] }),
        attr('display', 'string', "The group's displayName."),
        attr('type', 'string', 'Always direct: groups do not nest here.', { canonicalValues: ['direct'] }),
      ],
      { multiValued: true },
    ),
  ),
  ...dashboardAttributes(
    `Also in ${SCIM_EXTENSION_SCHEMA}, with the same value (the root is kept for compatibility with the API spec).`,
  ),
];

/** Only in our extension, and only when asked for (`attributes=...:effectivePermissions`): computed, not stored. */
export const effectivePermissionsAttribute = readOnly(
  complex(
    'effectivePermissions',
    'What the user may do: its own permissions plus what each of its groups grants, joined per workspace and team; a workspace lists the strings of its permission sets among appGroupPermissions. Returned only when `attributes` names it.',
    permissionSubAttributes(),
    {
      returned: 'request',
    },
  ),
);

export const groupAttributes: ScimAttribute[] = [
  attr('id', 'string', 'The id the service gave the group (a uuid); unique, never reassigned.', {
    caseExact: true,
    mutability: 'readOnly',
    returned: 'always',
    uniqueness: 'server',
  }),
  attr(
    'externalId',
    'string',
    `The identity provider's id for the group, ${textNote}; absent when none was given, null in a request clears it.`,
    { caseExact: true },
  ),
  attr(
    'displayName',
    'string',
    `The group's name, ${textNote}; unique in the company ignoring letter case (identity providers match pushed groups by it).`,
    {
      required: true,
      uniqueness: 'server',
    },
  ),
  complex(
    'members',
    `The users in the group, at most ${SCIM_LIMITS.groupMembers}; absent when none. A value naming no user of the company is ignored.`,
    [
      attr('value', 'string', "The member's user id.", { caseExact: true, mutability: 'immutable' }),
      attr('$ref', 'reference', "The member's URI.", { referenceTypes: ['User'], mutability: 'immutable' }),
      attr(
        'display',
        'string',
        `A name to show, as the identity provider sent it (RFC 7643 2.4: immutable), ${textNote}; the member's userName when none was sent.`,
        { mutability: 'immutable' },
      ),
      attr('type', 'string', 'User: groups hold users only.', { canonicalValues: ['User'], mutability: 'immutable' }),
    ],
    { multiValued: true },
  ),
];

export const groupExtensionAttributes: ScimAttribute[] = [
  permissionsAttribute(
    "The group's role: what it grants each member, in the shape of a user's permissions (workspace permissions, teams, or a permission set of the workspace file's permission_sets). Optional: absent, or null in a request, grants nothing.",
  ),
];
