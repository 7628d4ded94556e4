import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import type { PoolClient } from '../platform/db/pool.js';
import type { ZodTypeProvider } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { MAX_VALUE_NESTING } from '../platform/lib/storable.js';
import { RATE_LIMITS } from '../platform/auth/rate-limit.js';
import {
  acceptBatchCreate,
  acceptBatchDelete,
  acceptBatchReplace,
  acceptBatchUpdate,
  createItem,
  editItem,
  deleteItem,
  ITEMS_PAGE_SIZE,
  listItems,
  readItem,
  replaceItem,
} from '../features/catalogs/items.js';
import {
  BatchEditBody,
  BatchItemsBody,
  DeleteItemsBody,
  SingleEditBody,
  ItemId,
  MAX_BATCH_ITEMS,
  MAX_ID_LENGTH,
  MAX_ITEM_CHARS,
  SingleItemBody,
} from '../features/catalogs/item-bodies.js';
import { apiKeyOf } from '../platform/http/principals.js';
import { MessageResponse, documentedBody } from '../platform/http/schemas.js';

const ItemObject = z.record(z.string(), z.unknown());
const CatalogParams = z.object({ catalog_name: z.string().describe('Name of the catalog') });
// The path's id is taken as any string: one that breaks the id rules answers with the catalog error ids.
const ItemParams = CatalogParams.extend({ item_id: z.string().describe(ItemId.description!) });

export const ItemsResponse = z.object({
  items: z.array(ItemObject.and(z.object({ id: z.string() }))),
  message: z.string(),
});
export const ItemsListQuery = z.object({
  cursor: z.string().optional().describe('Opaque cursor from the Link header of the previous page'),
});

/**
 * Bodies are checked by the catalog domain, not by the route schema, so that every malformed body answers with the
 * spec's error ids (item-array-invalid, items-missing-ids, ...) rather than a generic schema error. The API reference
 * shows the schemas of catalogs/item-bodies.ts, on which that validation is built.
 */

const limitsNote = `Items: ids of letters, digits, - and _ up to ${MAX_ID_LENGTH} characters; at most ${MAX_ITEM_CHARS} characters of JSON each; values nested at most ${MAX_VALUE_NESTING} levels. Errors use the catalog error body and list every problem found.`;

const sync = { rateLimit: RATE_LIMITS.catalogSync, errorFormat: 'catalog' } as const;
const async = { rateLimit: RATE_LIMITS.catalogAsync, errorFormat: 'catalog', idempotent: true } as const;

/** An Idempotency-Key of a batch request answers in the transaction that records the batch. */
const accepted = async (req: FastifyRequest, db: PoolClient) =>
  req.idempotency?.answer(db, 202, { message: 'success' });

const catalogsRoutes: FastifyPluginAsync = async (base) => {
  replaceItemsRoute(base);
  createItemsRoute(base);
  editItemsRoute(base);
  deleteItemsRoute(base);
  listItemsRoute(base);
  replaceItemRoute(base);
  createItemRoute(base);
  getItemRoute(base);
  deleteItemRoute(base);
  editItemRoute(base);
};

const arrayOperatorsNote =
  'On a field of type array, `{"$add": [...], "$remove": [...]}` in place of a value removes, then appends, those strings.';

/** POST /catalogs/:catalog_name/items: a batch of creates, applied by a worker. */
function createItemsRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/catalogs/:catalog_name/items',
    {
      config: { permission: 'catalogs.add_items', ...async },
      schema: {
        summary: 'Create catalog items (asynchronous)',
        description: `Validates the whole request, queues it, and answers 202; a worker then creates every item that does not exist, in one transaction (an item that exists is left as it is). Up to ${MAX_BATCH_ITEMS} items, each with an id. ${limitsNote}`,
        tags: ['catalogs'],
        params: CatalogParams,
        body: documentedBody(BatchItemsBody),
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      const deps = { pool: app.ctx.pool, queues: app.ctx.queues, log: req.log };
      await acceptBatchCreate(deps, apiKeyOf(req).workspaceId, req.params.catalog_name, req.body, (db) =>
        accepted(req, db),
      );
      return reply.code(202).send({ message: 'success' });
    },
  );
}

/** PATCH /catalogs/:catalog_name/items: a batch of edits, applied by a worker. */
function editItemsRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.patch(
    '/catalogs/:catalog_name/items',
    {
      config: { permission: 'catalogs.update_items', ...async },
      schema: {
        summary: 'Edit catalog items (asynchronous)',
        description: `Validates the whole request, queues it, and answers 202; a worker then edits every item that exists, in one transaction: the fields sent are set, the others kept; ids that name no item are ignored. ${arrayOperatorsNote} Up to ${MAX_BATCH_ITEMS} items. ${limitsNote}`,
        tags: ['catalogs'],
        params: CatalogParams,
        body: documentedBody(BatchEditBody),
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      const deps = { pool: app.ctx.pool, queues: app.ctx.queues, log: req.log };
      await acceptBatchUpdate(deps, apiKeyOf(req).workspaceId, req.params.catalog_name, req.body, (db) =>
        accepted(req, db),
      );
      return reply.code(202).send({ message: 'success' });
    },
  );
}

/** PATCH /catalogs/:catalog_name/items/:item_id */
function editItemRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.patch(
    '/catalogs/:catalog_name/items/:item_id',
    {
      config: { permission: 'catalogs.update_item', ...sync },
      schema: {
        summary: 'Edit one catalog item',
        description: `Synchronous. items holds exactly one item object without an id: the fields sent are set, the others kept. ${arrayOperatorsNote} An item that does not exist is item-not-found. ${limitsNote}`,
        tags: ['catalogs'],
        params: ItemParams,
        body: documentedBody(SingleEditBody),
        response: { 200: MessageResponse },
      },
    },
    async (req) => {
      await editItem(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.catalog_name, req.params.item_id, req.body);
      return { message: 'success' };
    },
  );
}

/** PUT /catalogs/:catalog_name/items: a batch of creates and replaces, applied by a worker. */
function replaceItemsRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.put(
    '/catalogs/:catalog_name/items',
    {
      config: { permission: 'catalogs.replace_items', ...async },
      schema: {
        summary: 'Create or replace catalog items (asynchronous)',
        description: `Validates the whole request, queues it, and answers 202; a worker then creates or replaces every item in one transaction. Up to ${MAX_BATCH_ITEMS} items, each with an id. ${limitsNote}`,
        tags: ['catalogs'],
        params: CatalogParams,
        body: documentedBody(BatchItemsBody),
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      await acceptBatchReplace(
        { pool: app.ctx.pool, queues: app.ctx.queues, log: req.log },
        apiKeyOf(req).workspaceId,
        req.params.catalog_name,
        req.body,
        (db) => accepted(req, db),
      );
      return reply.code(202).send({ message: 'success' });
    },
  );
}

/** DELETE /catalogs/:catalog_name/items: a batch of deletes, applied by a worker. */
function deleteItemsRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.delete(
    '/catalogs/:catalog_name/items',
    {
      config: { permission: 'catalogs.delete_items', ...async },
      schema: {
        summary: 'Delete catalog items (asynchronous)',
        description: `Validates the ids, queues the delete and answers 202; ids that name no item are ignored. Up to ${MAX_BATCH_ITEMS} items.`,
        tags: ['catalogs'],
        params: CatalogParams,
        body: documentedBody(DeleteItemsBody),
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      await acceptBatchDelete(
        { pool: app.ctx.pool, queues: app.ctx.queues, log: req.log },
        apiKeyOf(req).workspaceId,
        req.params.catalog_name,
        req.body,
        (db) => accepted(req, db),
      );
      return reply.code(202).send({ message: 'success' });
    },
  );
}

/** GET /catalogs/:catalog_name/items: one page of items, with a Link to the next. */
function listItemsRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/catalogs/:catalog_name/items',
    {
      config: { permission: 'catalogs.get_items', ...sync },
      schema: {
        summary: 'List catalog items',
        description: `${ITEMS_PAGE_SIZE} items a page in id order. When more follow, a relative \`Link: </catalogs/{name}/items?cursor=...>; rel="next"\` header names the next page.`,
        tags: ['catalogs'],
        params: CatalogParams,
        querystring: ItemsListQuery,
        response: { 200: ItemsResponse },
      },
    },
    async (req, reply) => {
      const name = req.params.catalog_name;
      const page = await listItems(app.ctx.pool, apiKeyOf(req).workspaceId, name, req.query.cursor);
      if (page.next)
        reply.header('Link', `</catalogs/${encodeURIComponent(name)}/items?cursor=${page.next}>; rel="next"`);
      return { items: page.items, message: 'success' };
    },
  );
}

/** PUT /catalogs/:catalog_name/items/:item_id */
function replaceItemRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.put(
    '/catalogs/:catalog_name/items/:item_id',
    {
      config: { permission: 'catalogs.replace_item', ...sync },
      schema: {
        summary: 'Create or replace one catalog item',
        description: `Synchronous. items holds exactly one item object without an id (the id is the path's). An item that does not exist is created; one that exists is replaced whole. ${limitsNote}`,
        tags: ['catalogs'],
        params: ItemParams,
        body: documentedBody(SingleItemBody),
        response: { 200: MessageResponse },
      },
    },
    async (req) => {
      await replaceItem(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.catalog_name, req.params.item_id, req.body);
      return { message: 'success' };
    },
  );
}

/** POST /catalogs/:catalog_name/items/:item_id */
function createItemRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/catalogs/:catalog_name/items/:item_id',
    {
      config: { permission: 'catalogs.create_item', ...sync },
      schema: {
        summary: 'Create one catalog item',
        description: `Synchronous. Like the PUT, but an item that already exists is refused with item-already-exists. ${limitsNote}`,
        tags: ['catalogs'],
        params: ItemParams,
        body: documentedBody(SingleItemBody),
        response: { 201: MessageResponse },
      },
    },
    async (req, reply) => {
      await createItem(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.catalog_name, req.params.item_id, req.body);
      return reply.code(201).send({ message: 'success' });
    },
  );
}

/** GET /catalogs/:catalog_name/items/:item_id */
function getItemRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/catalogs/:catalog_name/items/:item_id',
    {
      config: { permission: 'catalogs.get_item', ...sync },
      schema: {
        summary: 'Get one catalog item',
        tags: ['catalogs'],
        params: ItemParams,
        response: { 200: ItemsResponse },
      },
    },
    async (req) => {
      const item = await readItem(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.catalog_name, req.params.item_id);
      return { items: [item], message: 'success' };
    },
  );
}

/** DELETE /catalogs/:catalog_name/items/:item_id */
function deleteItemRoute(base: FastifyInstance): void {
  const app = base.withTypeProvider<ZodTypeProvider>();
  app.delete(
    '/catalogs/:catalog_name/items/:item_id',
    {
      config: { permission: 'catalogs.delete_item', ...sync },
      schema: {
        summary: 'Delete one catalog item',
        description: 'Synchronous: the item is gone when the answer arrives. 202 as the public API answers it.',
        tags: ['catalogs'],
        params: ItemParams,
        response: { 202: MessageResponse },
      },
    },
    async (req, reply) => {
      await deleteItem(app.ctx.pool, apiKeyOf(req).workspaceId, req.params.catalog_name, req.params.item_id);
      return reply.code(202).send({ message: 'success' });
    },
  );
}

export default catalogsRoutes;
