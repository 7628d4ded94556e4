import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { acceptDelete, acceptIdentify, acceptMerge, acceptRemove, acceptRename } from '../features/user-data/accept.js';
import { exportByIdentifiers, MAX_USERS_PER_IDENTIFIER } from '../features/user-data/export-ids.js';
import {
  DeleteBody,
  ExportIdsBody,
  IdentifyBody,
  MAX_USER_DATA_ENTRIES,
  MergeBody,
  RemoveBody,
  RenameBody,
} from '../features/user-data/requests.js';

/**
 * The user-data endpoints of the public API this service follows (docs/user-data.md): export by identifier, delete,
 * identify, merge, and the renaming of external ids. Writes are staged on the durable path of /users/track and
 * applied in acceptance order (src/pipelines/ingest/apply/command-rows.ts); the export reads what is applied.
 */

const Message = z.object({ message: z.string() });
const EntryErrors = z.array(z.tuple([z.number().int(), z.string()])).describe('[index in the request, why]');

export const ExportIdsResponse = z.object({
  users: z
    .array(z.record(z.string(), z.unknown()))
    .describe('One object per user, as a segment export line renders it'),
  invalid_user_ids: z.array(z.string()).optional(),
  truncated_user_ids: z
    .array(z.string())
    .optional()
    .describe(
      `Identifiers (an email address, phone number or device id) that name more than ${MAX_USERS_PER_IDENTIFIER} users: users holds the ${MAX_USERS_PER_IDENTIFIER} most recently updated of each`,
    ),
  message: z.string(),
});

const queued =
  "Accepted means committed: the commands are applied by the ingestion workers within moments, in the order they were accepted relative to the workspace's tracked objects.";

const usersDataRoutes: FastifyPluginAsync = async (base) => {
  exportIdsRoute(base);
  deleteRoute(base);
  identifyRoute(base);
  mergeRoute(base);
  renameRoute(base);
  removeRoute(base);
};

/** POST /users/export/ids: the users named, rendered as segment export lines. */
function exportIdsRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/export/ids',
    {
      config: { permission: 'users.export.ids', rateLimit: RATE_LIMITS.exportIds },
      schema: {
        summary: 'Export users by identifier',
        description:
          `Up to ${MAX_USER_DATA_ENTRIES} external_ids and user_aliases, or one of device_id, service_id, email_address, phone; fields_to_export ` +
          "takes the segment export's field names (default: all). Each user is rendered as a segment export line renders it; identifiers that " +
          `name nobody are listed in invalid_user_ids; one that names more than ${MAX_USERS_PER_IDENTIFIER} users answers the ${MAX_USERS_PER_IDENTIFIER} most recently updated and is listed in truncated_user_ids.`,
        tags: ['users'],
        body: ExportIdsBody,
        response: { 201: ExportIdsResponse },
      },
    },
    async (req, reply) => {
      const text = await exportByIdentifiers(app.ctx.pool, apiKeyOf(req).workspaceId, req.body);
      // Built as JSON text around the lines PostgreSQL wrote (src/features/user-data/export-ids.ts): sent as it is.
      return reply
        .code(201)
        .type('application/json; charset=utf-8')
        .send(text as unknown as z.infer<typeof ExportIdsResponse>);
    },
  );
}

/** POST /users/delete */
function deleteRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/delete',
    {
      config: { permission: 'users.delete', rateLimit: RATE_LIMITS.alias, idempotent: true },
      schema: {
        summary: 'Delete users and erase what is stored about them',
        description:
          `Up to ${MAX_USER_DATA_ENTRIES} users by external_ids, user_aliases, service_ids, email_addresses or phone_numbers (an address or number ` +
          'as a string when it names one user, or {email|phone, prioritization} to choose among several). Each profile is deleted with its ' +
          'aliases, deprecated external ids, and its copies in dead letters and the idempotency cache (docs/privacy.md); a tombstone lists it ' +
          `in the next incremental export's removed parts. deleted counts the identifiers accepted. ${queued}`,
        tags: ['users'],
        body: DeleteBody,
        response: { 202: z.object({ deleted: z.number().int(), message: z.string() }) },
      },
    },
    async (req, reply) => {
      const { status, body } = await acceptDelete(app.ctx, apiKeyOf(req).workspaceId, req.body, req.idempotency);
      return reply.code(status).send(body);
    },
  );
}

/** POST /users/identify */
function identifyRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/identify',
    {
      config: { permission: 'users.identify', rateLimit: RATE_LIMITS.alias, idempotent: true },
      schema: {
        summary: 'Identify alias-only, email-only or phone-only users',
        description:
          'aliases_to_identify, emails_to_identify and phone_numbers_to_identify (with prioritization), at most ' +
          `${MAX_USER_DATA_ENTRIES} in all. An unidentified profile takes the external_id, or is merged into the profile that has it ` +
          `(unless that profile already has an alias of the same label). ${queued}`,
        tags: ['users'],
        body: IdentifyBody,
        response: { 201: z.object({ aliases_processed: z.number().int(), message: z.string() }) },
      },
    },
    async (req, reply) => {
      const { status, body } = await acceptIdentify(app.ctx, apiKeyOf(req).workspaceId, req.body, req.idempotency);
      return reply.code(status).send(body);
    },
  );
}

/** POST /users/merge */
function mergeRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/merge',
    {
      config: { permission: 'users.merge', rateLimit: RATE_LIMITS.alias, idempotent: true },
      schema: {
        summary: 'Merge users',
        description:
          `Up to ${MAX_USER_DATA_ENTRIES} merge_updates, each identifier_to_merge into identifier_to_keep (external_id, user_alias, or email or phone ` +
          "with prioritization), by the public API's field rules (docs/user-data.md); the merged profile is then deleted. " +
          queued,
        tags: ['users'],
        body: MergeBody,
        response: { 202: Message },
      },
    },
    async (req, reply) => {
      const { status, body } = await acceptMerge(app.ctx, apiKeyOf(req).workspaceId, req.body, req.idempotency);
      return reply.code(status).send(body);
    },
  );
}

/** POST /users/external_ids/rename */
function renameRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/external_ids/rename',
    {
      config: { permission: 'users.external_ids.rename', rateLimit: RATE_LIMITS.externalIds, idempotent: true },
      schema: {
        summary: 'Rename external ids',
        description:
          `Up to ${MAX_USER_DATA_ENTRIES} {current_external_id, new_external_id}: the user gets the new primary id and keeps the old one as ` +
          'deprecated, which goes on naming them until removed. Each entry stands alone: external_ids lists the current ids of those accepted, ' +
          `rename_errors the others with why. ${queued}`,
        tags: ['users'],
        body: RenameBody,
        response: {
          202: z.object({ message: z.string(), external_ids: z.array(z.string()), rename_errors: EntryErrors }),
        },
      },
    },
    async (req, reply) => {
      const { status, body } = await acceptRename(app.ctx, apiKeyOf(req).workspaceId, req.body, req.idempotency);
      return reply.code(status).send(body);
    },
  );
}

/** POST /users/external_ids/remove */
function removeRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/users/external_ids/remove',
    {
      config: { permission: 'users.external_ids.remove', rateLimit: RATE_LIMITS.externalIds, idempotent: true },
      schema: {
        summary: 'Remove deprecated external ids',
        description: `Up to ${MAX_USER_DATA_ENTRIES} deprecated external ids; a primary id is refused (removal_errors). ${queued}`,
        tags: ['users'],
        body: RemoveBody,
        response: {
          202: z.object({ message: z.string(), removed_ids: z.array(z.string()), removal_errors: EntryErrors }),
        },
      },
    },
    async (req, reply) => {
      const { status, body } = await acceptRemove(app.ctx, apiKeyOf(req).workspaceId, req.body, req.idempotency);
      return reply.code(status).send(body);
    },
  );
}

export default usersDataRoutes;
