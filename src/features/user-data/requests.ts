import { z } from 'zod';
import { EXPORT_FIELDS } from '../../pipelines/exports/request/request-body.js';
import { identifierString, UserAlias } from '../../profiles/validation/validate-rules.js';
import { PRIORITIZATIONS, type UserRef } from '../../profiles/lookup.js';
import type { UserDataCommand } from '../../profiles/commands/apply-commands.js';

/**
 * The bodies of the user-data endpoints, as the public API documents them (docs/user-data.md names the page each
 * follows), and what each becomes: a list of commands to stage, or the references to look up. `braze_id` is
 * `service_id` here, as everywhere in this service.
 */

/** Per request, as the public API limits each of these endpoints. */
export const MAX_USER_DATA_ENTRIES = 50;

const TOO_MANY_IDS = 'The max number of external_ids and aliases per request was exceeded';

/** An external_id: a string, or an integer (edX's client sends its numeric user ids as numbers), kept as text. */
const ExternalId = (field: string) =>
  z
    .union(
      [
        identifierString(field),
        z
          .number({ error: `'${field}' must be a string` })
          .int(`'${field}' must be a string`)
          .safe(`'${field}' must be a string`),
      ],
      {
        error: `'${field}' must be a string`,
      },
    )
    .transform(String);

const Prioritization = (field: string) =>
  z
    .array(z.enum(PRIORITIZATIONS, { error: `'${field}' entries must be one of ${PRIORITIZATIONS.join(', ')}` }), {
      error: `'${field}' must be an array`,
    })
    .min(1, `'${field}' must not be empty`)
    .max(PRIORITIZATIONS.length, `'${field}' may list at most ${PRIORITIZATIONS.length} entries`)
    .refine(
      (p) => !(p.includes('identified') && p.includes('unidentified')),
      `'${field}' may hold only one of identified and unidentified`,
    )
    .refine((p) => new Set(p).size === p.length, `'${field}' lists an entry twice`);

const Email = (field: string) =>
  identifierString(field).regex(/^[^\s@]+@[^\s@]+$/, `'${field}' must be an email address`);
const Phone = (field: string) =>
  identifierString(field).regex(
    /^\+[1-9][0-9]{1,14}$/,
    `'${field}' must be an E.164 phone number such as +15555550123`,
  );

const aliasRef = (a: { alias_label: string; alias_name: string }): UserRef => ({
  kind: 'user_alias',
  label: a.alias_label,
  name: a.alias_name,
});

const list = <T extends z.ZodType>(field: string, item: T) =>
  z
    .array(item, { error: `'${field}' must be an array` })
    .max(MAX_USER_DATA_ENTRIES, `'${field}' may hold at most ${MAX_USER_DATA_ENTRIES} entries`);

// ---------------------------------------------------------------------------------------------------------------
// POST /users/export/ids

export const ExportIdsBody = z
  .object({
    external_ids: list('external_ids', ExternalId('external_ids[]')).optional(),
    user_aliases: list('user_aliases', UserAlias).optional(),
    device_id: identifierString('device_id').optional(),
    service_id: identifierString('service_id').optional(),
    email_address: Email('email_address').optional(),
    phone: Phone('phone').optional(),
    fields_to_export: z
      .array(
        z.enum(EXPORT_FIELDS, {
          error: `fields_to_export entries must be fields of the user export record: ${EXPORT_FIELDS.join(', ')}`,
        }),
        {
          error: 'fields_to_export must be an array of field names',
        },
      )
      .min(1, 'fields_to_export must name at least one field')
      .optional(),
  })
  .superRefine((b, ctx) => {
    if ((b.external_ids?.length ?? 0) + (b.user_aliases?.length ?? 0) > MAX_USER_DATA_ENTRIES)
      ctx.addIssue({ code: 'custom', message: TOO_MANY_IDS });
    const singles = (['device_id', 'email_address', 'phone'] as const).filter((k) => b[k] !== undefined);
    if (singles.length > 1)
      ctx.addIssue({
        code: 'custom',
        message: `only one of device_id, email_address and phone may be given; got ${singles.join(' and ')}`,
      });
    const any =
      (b.external_ids?.length ?? 0) +
      (b.user_aliases?.length ?? 0) +
      singles.length +
      (b.service_id !== undefined ? 1 : 0);
    if (any === 0)
      ctx.addIssue({
        code: 'custom',
        message: 'name at least one user: external_ids, user_aliases, device_id, service_id, email_address or phone',
      });
  });
export type ExportIdsBody = z.infer<typeof ExportIdsBody>;

/** The references an export-by-identifier request names, in its order. */
export function exportIdsRefs(b: ExportIdsBody): UserRef[] {
  return [
    ...(b.external_ids ?? []).map((value): UserRef => ({ kind: 'external_id', value })),
    ...(b.user_aliases ?? []).map(aliasRef),
    ...(b.service_id !== undefined ? [{ kind: 'service_id' as const, value: b.service_id }] : []),
    ...(b.email_address !== undefined ? [{ kind: 'email' as const, value: b.email_address }] : []),
    ...(b.phone !== undefined ? [{ kind: 'phone' as const, value: b.phone }] : []),
    ...(b.device_id !== undefined ? [{ kind: 'device_id' as const, value: b.device_id }] : []),
  ];
}

// ---------------------------------------------------------------------------------------------------------------
// POST /users/delete

const EmailToDelete = z.union(
  [
    Email('email_addresses[]'),
    z.object({ email: Email('email_addresses[].email'), prioritization: Prioritization('prioritization') }).strict(),
  ],
  {
    error: "each of 'email_addresses' must be an address, or an object {email, prioritization}",
  },
);
const PhoneToDelete = z.union(
  [
    Phone('phone_numbers[]'),
    z.object({ phone: Phone('phone_numbers[].phone'), prioritization: Prioritization('prioritization') }).strict(),
  ],
  {
    error: "each of 'phone_numbers' must be an E.164 number, or an object {phone, prioritization}",
  },
);

export const DeleteBody = z
  .object({
    external_ids: list('external_ids', ExternalId('external_ids[]')).optional(),
    user_aliases: list('user_aliases', UserAlias).optional(),
    service_ids: list('service_ids', identifierString('service_ids[]')).optional(),
    email_addresses: list('email_addresses', EmailToDelete).optional(),
    phone_numbers: list('phone_numbers', PhoneToDelete).optional(),
  })
  .superRefine((b, ctx) => {
    const n =
      (b.external_ids?.length ?? 0) +
      (b.user_aliases?.length ?? 0) +
      (b.service_ids?.length ?? 0) +
      (b.email_addresses?.length ?? 0) +
      (b.phone_numbers?.length ?? 0);
    if (n === 0)
      ctx.addIssue({
        code: 'custom',
        message:
          'name at least one user to delete: external_ids, user_aliases, service_ids, email_addresses or phone_numbers',
      });
    if (n > MAX_USER_DATA_ENTRIES)
      ctx.addIssue({ code: 'custom', message: `a request may delete at most ${MAX_USER_DATA_ENTRIES} users` });
  });
export type DeleteBody = z.infer<typeof DeleteBody>;

export function deleteCommands(b: DeleteBody): UserDataCommand[] {
  const targets: UserRef[] = [
    ...(b.external_ids ?? []).map((value): UserRef => ({ kind: 'external_id', value })),
    ...(b.user_aliases ?? []).map(aliasRef),
    ...(b.service_ids ?? []).map((value): UserRef => ({ kind: 'service_id', value })),
    ...(b.email_addresses ?? []).map((e): UserRef =>
      typeof e === 'string'
        ? { kind: 'email', value: e }
        : { kind: 'email', value: e.email, prioritization: e.prioritization },
    ),
    ...(b.phone_numbers ?? []).map((p): UserRef =>
      typeof p === 'string'
        ? { kind: 'phone', value: p }
        : { kind: 'phone', value: p.phone, prioritization: p.prioritization },
    ),
  ];
  return targets.map((target) => ({ kind: 'delete', target }));
}

// ---------------------------------------------------------------------------------------------------------------
// POST /users/alias/new

export const AliasNewBody = z.object({
  user_aliases: z
    .array(
      z
        .object({
          external_id: ExternalId('user_aliases[].external_id').optional(),
          alias_name: identifierString('alias_name'),
          alias_label: identifierString('alias_label'),
        })
        .strict(),
      { error: 'user_aliases is required: an array of {alias_name, alias_label, external_id (optional)} objects' },
    )
    .min(1, 'user_aliases must hold at least one alias')
    .max(MAX_USER_DATA_ENTRIES, `user_aliases may hold at most ${MAX_USER_DATA_ENTRIES} aliases`),
});

export const aliasNewCommands = (b: z.infer<typeof AliasNewBody>): UserDataCommand[] =>
  b.user_aliases.map((a) => ({
    kind: 'alias_new',
    ...(a.external_id !== undefined ? { externalId: a.external_id } : {}),
    label: a.alias_label,
    name: a.alias_name,
  }));

// ---------------------------------------------------------------------------------------------------------------
// POST /users/identify

export const IdentifyBody = z
  .object({
    aliases_to_identify: list(
      'aliases_to_identify',
      z.object({ external_id: ExternalId('aliases_to_identify[].external_id'), user_alias: UserAlias }).strict(),
    ).optional(),
    emails_to_identify: list(
      'emails_to_identify',
      z
        .object({
          external_id: ExternalId('emails_to_identify[].external_id'),
          email: Email('emails_to_identify[].email'),
          prioritization: Prioritization('prioritization'),
        })
        .strict(),
    ).optional(),
    phone_numbers_to_identify: list(
      'phone_numbers_to_identify',
      z
        .object({
          external_id: ExternalId('phone_numbers_to_identify[].external_id'),
          phone: Phone('phone_numbers_to_identify[].phone'),
          prioritization: Prioritization('prioritization'),
        })
        .strict(),
    ).optional(),
  })
  .superRefine((b, ctx) => {
    const n =
      (b.aliases_to_identify?.length ?? 0) +
      (b.emails_to_identify?.length ?? 0) +
      (b.phone_numbers_to_identify?.length ?? 0);
    if (n === 0)
      ctx.addIssue({
        code: 'custom',
        message: 'one of aliases_to_identify, emails_to_identify or phone_numbers_to_identify is required',
      });
    if (n > MAX_USER_DATA_ENTRIES)
      ctx.addIssue({ code: 'custom', message: `a request may identify at most ${MAX_USER_DATA_ENTRIES} users` });
  });

export function identifyCommands(b: z.infer<typeof IdentifyBody>): UserDataCommand[] {
  return [
    ...(b.aliases_to_identify ?? []).map((a): UserDataCommand => ({
      kind: 'identify',
      externalId: a.external_id,
      target: { kind: 'user_alias', label: a.user_alias.alias_label, name: a.user_alias.alias_name },
    })),
    ...(b.emails_to_identify ?? []).map((e): UserDataCommand => ({
      kind: 'identify',
      externalId: e.external_id,
      target: { kind: 'email', value: e.email, prioritization: e.prioritization },
    })),
    ...(b.phone_numbers_to_identify ?? []).map((p): UserDataCommand => ({
      kind: 'identify',
      externalId: p.external_id,
      target: { kind: 'phone', value: p.phone, prioritization: p.prioritization },
    })),
  ];
}

// ---------------------------------------------------------------------------------------------------------------
// POST /users/merge: the public API's own error messages, word for word.

const IDENTIFIER_SHAPE =
  "identifiers must be objects with an 'external_id' property that is a string, 'user_alias' property that is an object, 'email' property that is a string, or 'phone' property that is a string";

const MergeIdentifier = z.union(
  [
    z.object({ external_id: ExternalId('external_id') }).strict(),
    z.object({ user_alias: UserAlias }).strict(),
    z.object({ email: Email('email'), prioritization: Prioritization('prioritization') }).strict(),
    z.object({ phone: Phone('phone'), prioritization: Prioritization('prioritization') }).strict(),
  ],
  { error: IDENTIFIER_SHAPE },
);
type MergeIdentifier = z.infer<typeof MergeIdentifier>;

export const MergeBody = z.object({
  merge_updates: z
    .array(
      z.strictObject(
        { identifier_to_merge: MergeIdentifier, identifier_to_keep: MergeIdentifier },
        {
          error: (issue) =>
            issue.code === 'unrecognized_keys'
              ? "'merge_updates' must only have 'identifier_to_merge' and 'identifier_to_keep'"
              : "'merge_updates' must be an array of objects",
        },
      ),
      { error: "'merge_updates' must be an array of objects" },
    )
    .min(1, "'merge_updates' must be an array of objects")
    .max(MAX_USER_DATA_ENTRIES, `a single request may not contain more than ${MAX_USER_DATA_ENTRIES} merge updates`),
});

function mergeRef(i: MergeIdentifier): UserRef {
  if ('external_id' in i) return { kind: 'external_id', value: i.external_id };
  if ('user_alias' in i) return aliasRef(i.user_alias);
  if ('email' in i) return { kind: 'email', value: i.email, prioritization: i.prioritization };
  return { kind: 'phone', value: i.phone, prioritization: i.prioritization };
}

export const mergeCommands = (b: z.infer<typeof MergeBody>): UserDataCommand[] =>
  b.merge_updates.map((u) => ({
    kind: 'merge',
    merge: mergeRef(u.identifier_to_merge),
    keep: mergeRef(u.identifier_to_keep),
  }));

// ---------------------------------------------------------------------------------------------------------------
// POST /users/external_ids/rename and /remove

export const RenameBody = z.object({
  external_id_renames: z
    .array(
      z
        .object({
          current_external_id: ExternalId('current_external_id'),
          new_external_id: ExternalId('new_external_id'),
        })
        .strict(),
      {
        error: 'external_id_renames is required: an array of {current_external_id, new_external_id} objects',
      },
    )
    .min(1, 'external_id_renames must hold at least one rename')
    .max(MAX_USER_DATA_ENTRIES, `external_id_renames may hold at most ${MAX_USER_DATA_ENTRIES} renames`),
});

export const RemoveBody = z.object({
  external_ids: z
    .array(ExternalId('external_ids[]'), { error: 'external_ids is required: an array of deprecated external IDs' })
    .min(1, 'external_ids must hold at least one external ID')
    .max(MAX_USER_DATA_ENTRIES, `external_ids may hold at most ${MAX_USER_DATA_ENTRIES} external IDs`),
});
