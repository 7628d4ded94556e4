import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import type { PoolClient } from '../platform/db/pool.js';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import {
  CatalogView,
  createCatalog,
  CreateCatalogBody,
  deleteCatalog,
  listCatalogs,
} from '../features/catalogs/definitions.js';
import { acceptAddFields, acceptDeleteField, AddFieldsBody } from '../features/catalogs/field-changes.js';
import { acceptCreateSelection, acceptDeleteSelection, CreateSelectionBody } from '../features/catalogs/selections.js';
import { MAX_CATALOG_FIELDS } from '../features/catalogs/field-rules.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { MessageResponse, documentedBody } from '../platform/http/schemas.js';

/**
 * The catalogs themselves (list, create, delete: synchronous), their fields and their selections (asynchronous: 202,
 * applied by the catalog-batch worker). Bodies are checked by the catalog domain so that every refusal carries the
 * public API's error ids; the schemas shown in the reference are the ones that validation is built on.
 */

const CatalogParams = z.object({ catalog_name: z.string().describe('Name of the catalog') });
const FieldParams = CatalogParams.extend({ field_name: z.string().describe('Name of the field') });
const SelectionParams = CatalogParams.extend({ selection_name: z.string().describe('Name of the selection') });
const CatalogsResponse = z.object({ catalogs: z.array(CatalogView), message: z.string() });

const sync = { rateLimit: RATE_LIMITS.catalogSync, errorFormat: 'catalog' } as const;
const schemaChange = {
  rateLimit: RATE_LIMITS.catalogFieldsSelections,
  errorFormat: 'catalog',
  idempotent: true,
} as const;

const accepted = async (req: FastifyRequest, db: PoolClient) =>
  req.idempotency?.answer(db, 202, { message: 'success' });

const catalogLifecycleRoutes: FastifyPluginAsync = async (base) => {
  catalogRoutes(base);
  fieldRoutes(base);
  selectionRoutes(base);
};

/** GET /catalogs, POST /catalogs, DELETE /catalogs/:catalog_name */
function catalogRoutes(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/catalogs',
    {
      config: { permission: 'catalogs.get', ...sync },
      schema: {
        summary: 'List catalogs',
        description: 'Every catalog of the workspace, `id` first among its fields, with its count of items.',
        tags: ['catalogs'],
        response: { 200: CatalogsResponse },
      },
    },
    async (req) => ({ catalogs: await listCatalogs(app.ctx.pool, apiKeyOf(req).workspaceId), message: 'success' }),
  );
  app.post(
    '/catalogs',
    {
      config: { permission: 'catalogs.create', ...sync },
      schema: {
        summary: 'Create a catalog',
        description: `One catalog a request; its first field is \`{"name": "id", "type": "string"}\`; at most ${MAX_CATALOG_FIELDS} fields. Answers 201 with the catalog as GET /catalogs lists it.`,
        tags: ['catalogs'],
        body: documentedBody(CreateCatalogBody),
        response: { 201: CatalogsResponse },
      },
    },
    async (req, reply) => {
      const catalog = await createCatalog(app.ctx.pool, apiKeyOf(req).workspaceId, req.body);
      return reply.code(201).send({ catalogs: [catalog], message: 'success' });
    },
  );
  app.delete(
    '/catalogs/:catalog_name',
    {
      config: { permission: 'catalogs.delete', ...sync },
      schema: {
        summary: 'Delete a catalog',
        description: 'Deletes the catalog with its items and selections at once; its changes still queued are dropped.',
        tags: ['catalogs'],
        params: CatalogParams,
        response: { 200: MessageResponse },
      },
    },
    async (req) => {
      await deleteCatalog(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.catalog_name);
      return { message: 'success' };
    },
  );
}

/** POST /catalogs/:catalog_name/fields, DELETE /catalogs/:catalog_name/fields/:field_name */
function fieldRoutes(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/catalogs/:catalog_name/fields',
    {
      config: { permission: 'catalogs.create_fields', ...schemaChange },
      schema: {
        summary: 'Add catalog fields (asynchronous)',
        description:
          'Validates the fields, queues them and answers 202; a worker then adds them to the catalog. Items can use a field once it is added.',
        tags: ['catalogs'],
        params: CatalogParams,
        body: documentedBody(AddFieldsBody),
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      const deps = { pool: app.ctx.pool, queues: app.ctx.queues, log: req.log };
      await acceptAddFields(deps, apiKeyOf(req).workspaceId, req.params.catalog_name, req.body, (db) =>
        accepted(req, db),
      );
      return reply.code(202).send({ message: 'success' });
    },
  );
  app.delete(
    '/catalogs/:catalog_name/fields/:field_name',
    {
      config: { permission: 'catalogs.delete_fields', ...schemaChange },
      schema: {
        summary: 'Delete a catalog field (asynchronous)',
        description:
          'Queues the deletion and answers 202; a worker then removes the field from the catalog and from every item. A field a selection uses cannot be deleted; `id` cannot be deleted.',
        tags: ['catalogs'],
        params: FieldParams,
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      const deps = { pool: app.ctx.pool, queues: app.ctx.queues, log: req.log };
      const { catalog_name: catalog, field_name: field } = req.params;
      await acceptDeleteField(deps, apiKeyOf(req).workspaceId, catalog, field, (db) => accepted(req, db));
      return reply.code(202).send({ message: 'success' });
    },
  );
}

/** POST /catalogs/:catalog_name/selections, DELETE /catalogs/:catalog_name/selections/:selection_name */
function selectionRoutes(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/catalogs/:catalog_name/selections',
    {
      config: { permission: 'catalogs.create_selection', ...schemaChange },
      schema: {
        summary: 'Create a catalog selection (asynchronous)',
        description:
          'Validates the selection (filters by field type, results_limit, sort), queues it and answers 202; a worker then stores it.',
        tags: ['catalogs'],
        params: CatalogParams,
        body: documentedBody(CreateSelectionBody),
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      const deps = { pool: app.ctx.pool, queues: app.ctx.queues, log: req.log };
      await acceptCreateSelection(deps, apiKeyOf(req).workspaceId, req.params.catalog_name, req.body, (db) =>
        accepted(req, db),
      );
      return reply.code(202).send({ message: 'success' });
    },
  );
  app.delete(
    '/catalogs/:catalog_name/selections/:selection_name',
    {
      config: { permission: 'catalogs.delete_selection', ...schemaChange },
      schema: {
        summary: 'Delete a catalog selection (asynchronous)',
        description: 'Queues the deletion and answers 202; a worker then removes the selection.',
        tags: ['catalogs'],
        params: SelectionParams,
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      const deps = { pool: app.ctx.pool, queues: app.ctx.queues, log: req.log };
      const { catalog_name: catalog, selection_name: name } = req.params;
      await acceptDeleteSelection(deps, apiKeyOf(req).workspaceId, catalog, name, (db) => accepted(req, db));
      return reply.code(202).send({ message: 'success' });
    },
  );
}

export default catalogLifecycleRoutes;
