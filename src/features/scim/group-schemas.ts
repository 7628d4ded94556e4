import { z } from 'zod';
import { ExternalId, Permissions, PermissionsOut, SCIM_LIMITS, text } from './schemas.js';

/** RFC 7643 4.2: the core Group schema, and our extension carrying the group's role (the permissions it grants). */
export const SCIM_GROUP_SCHEMA = 'urn:ietf:params:scim:schemas:core:2.0:Group';
export const SCIM_GROUP_EXTENSION_SCHEMA = 'urn:ietf:params:scim:schemas:extension:ces:2.0:Group';

/**
 * A member in a request: `value` is a user's id; `display` is kept as sent (RFC 7643 2.4 makes it immutable, set by
 * the client), the member's userName when none is sent; `$ref` is what a response shows and is ignored; `type` may
 * say "User" (nested groups are not supported).
 */
const MemberRef = z.object(
  {
    value: z
      .string({ error: 'members[].value must be a string (a user id)' })
      .min(1, 'members[].value must not be empty')
      .max(SCIM_LIMITS.text),
    type: z
      .string({ error: 'members[].type must be a string' })
      .refine((t) => t.toLowerCase() === 'user', 'members[].type must be "User": a group holds users, not groups')
      .optional(),
    display: text('members[].display').nullish(),
  },
  { error: 'each members entry must be an object {value}' },
);
export const Members = z
  .array(MemberRef, { error: 'members must be an array' })
  .max(SCIM_LIMITS.groupMembers, `members may hold at most ${SCIM_LIMITS.groupMembers} entries`);

const GroupExtension = z.object(
  { permissions: Permissions.nullish().describe('What the group grants its members; null: nothing') },
  { error: `${SCIM_GROUP_EXTENSION_SCHEMA} must be an object {permissions}` },
);

const GroupSchemas = z
  .array(z.string().max(SCIM_LIMITS.text), { error: 'schemas must be an array of strings' })
  .max(10, 'schemas may list at most 10 URNs')
  .refine((s) => s.includes(SCIM_GROUP_SCHEMA), `schemas must contain ${SCIM_GROUP_SCHEMA}`);

/**
 * A Group body (POST and PUT). Attributes this service does not store are ignored, as for users. A PUT that omits
 * members or the extension keeps them (Okta renames with a PUT of displayName alone); `members: []` empties the
 * group and `permissions: null` takes its role away.
 */
export const ScimGroupBody = z
  .object({
    schemas: GroupSchemas,
    displayName: text('displayName').describe('Unique in the company, ignoring letter case'),
    externalId: ExternalId.nullish().describe("The identity provider's id for the group; null clears it"),
    members: Members.nullish(),
    [SCIM_GROUP_EXTENSION_SCHEMA]: GroupExtension.nullish(),
  })
  .transform(({ [SCIM_GROUP_EXTENSION_SCHEMA]: extension, ...rest }) => ({
    ...rest,
    permissions: extension === null ? null : extension?.permissions,
  }));
export type ScimGroupBody = z.output<typeof ScimGroupBody>;

// `$ref` passes through the loose object: as a declared property OpenAPI tooling would read it as a schema reference.
const Member = z
  .looseObject({ value: z.string(), display: z.string(), type: z.literal('User') })
  .describe("Also `$ref`: the member's URI");

export const ScimGroup = z.object({
  schemas: z.array(z.string()),
  id: z.string(),
  externalId: z.string().optional(),
  displayName: z.string(),
  members: z.array(Member).optional().describe('Absent when the group has none'),
  [SCIM_GROUP_EXTENSION_SCHEMA]: z
    .object({ permissions: PermissionsOut })
    .optional()
    .describe('Absent when the group grants nothing'),
  meta: z.object({
    resourceType: z.literal('Group'),
    created: z.string(),
    lastModified: z.string(),
    location: z.string(),
  }),
});
export type ScimGroup = z.infer<typeof ScimGroup>;
