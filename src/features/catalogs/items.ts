import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import { AppError, badRequest } from '../../platform/errors.js';
import type { Logger } from '../../platform/logger.js';
import { enqueueCatalogBatch, type CatalogBatchPayload } from '../../platform/queues/catalog-batch.js';
import type { Queues } from '../../platform/queues/index.js';
import { queueRecorded } from '../../platform/queues/queue-recorded.js';
import { recordBatch } from './batches.js';
import { arbitraryError, catalogNotFound, CatalogErrors, itemNotFound } from './errors.js';
import type { CatalogDefinition } from './fields.js';
import {
  deleteItems,
  findCatalog,
  getItem,
  insertItem,
  itemExists,
  listItemsAfter,
  nextVersion,
  upsertItems,
  type CatalogItem,
} from './store.js';
import { isPlausibleId, validateBatchDelete, validateBatchReplace, validateSingle } from './validate.js';

/** Items per page of the list endpoint (as the public API pages them). */
export const ITEMS_PAGE_SIZE = 50;

/** What accepting a batch needs: the record, the queue, and a log for a batch recorded but not queued. */
export interface AcceptBatchDeps {
  pool: Pool;
  queues: Queues;
  log: Pick<Logger, 'warn'>;
}

/** Our own refusals pass through; anything else is the spec's arbitrary-error (logged with its cause by the handler). */
async function guarded<T>(fn: () => Promise<T>): Promise<T> {
  try {
    return await fn();
  } catch (err) {
    if (err instanceof AppError) throw err;
    throw arbitraryError(err);
  }
}

async function requireCatalog(pool: Pool, workspaceId: string, name: string): Promise<CatalogDefinition> {
  const catalog = await findCatalog(pool, workspaceId, name);
  if (!catalog) throw catalogNotFound(name);
  return catalog;
}

/**
 * Batch replace: validates the whole request, records it in PostgreSQL (src/features/catalogs/batches.ts), then queues
 * it; no item is written here. Resolves once the batch is recorded, so a 202 means it will be applied, even if Redis is
 * away (the reconciler queues it then). A refused request records nothing.
 */
export async function acceptBatchReplace(
  deps: AcceptBatchDeps,
  workspaceId: string,
  catalogName: string,
  body: unknown,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  const { pool } = deps;
  const catalog = await guarded(() => findCatalog(pool, workspaceId, catalogName));
  const items = validateBatchReplace(body, catalog, catalogName);
  await accept(
    deps,
    { op: 'replace', workspaceId, catalogId: catalog!.id, version: await guarded(() => nextVersion(pool)), items },
    onRecorded,
  );
}

/** Batch delete: the same contract as batch replace. Ids that name no item are ignored when the job runs. */
export async function acceptBatchDelete(
  deps: AcceptBatchDeps,
  workspaceId: string,
  catalogName: string,
  body: unknown,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  const { pool } = deps;
  const catalog = await guarded(() => findCatalog(pool, workspaceId, catalogName));
  const ids = validateBatchDelete(body, catalog, catalogName);
  await accept(
    deps,
    { op: 'delete', workspaceId, catalogId: catalog!.id, version: await guarded(() => nextVersion(pool)), ids },
    onRecorded,
  );
}

/** Runs in the transaction that records a batch (an Idempotency-Key answers there). */
export type OnBatchRecorded = (db: PoolClient) => Promise<void>;

/** Records the batch (and the caller's answer) in one transaction, then queues it. */
async function accept(
  deps: AcceptBatchDeps,
  payload: CatalogBatchPayload,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  await guarded(() =>
    withTransaction(deps.pool, async (client) => {
      await recordBatch(client, payload);
      await onRecorded?.(client);
    }),
  );
  await queueRecorded(deps.log, 'catalog batch', { version: payload.version }, () =>
    enqueueCatalogBatch(deps.queues, payload),
  );
}

/** Single replace (PUT): creates the item when missing, replaces it whole otherwise. */
export async function replaceItem(
  pool: Pool,
  workspaceId: string,
  catalogName: string,
  itemId: string,
  body: unknown,
): Promise<void> {
  const catalog = await guarded(() => findCatalog(pool, workspaceId, catalogName));
  const item = validateSingle(body, itemId, catalog, catalogName);
  await guarded(async () => {
    const version = await nextVersion(pool);
    await upsertItems(pool, catalog!.id, version, [item]);
  });
}

/** Single create (POST): like replace, but an item that already exists is refused with item-already-exists. */
export async function createItem(
  pool: Pool,
  workspaceId: string,
  catalogName: string,
  itemId: string,
  body: unknown,
): Promise<void> {
  const catalog = await guarded(() => findCatalog(pool, workspaceId, catalogName));
  const item = validateSingle(body, itemId, catalog, catalogName);
  const created = await guarded(async () => insertItem(pool, catalog!.id, await nextVersion(pool), item));
  if (!created) {
    const errors = new CatalogErrors();
    errors.add('item-already-exists', 'The item already exists', ['id'], [itemId]);
    throw errors.toAppError();
  }
}

export async function readItem(
  pool: Pool,
  workspaceId: string,
  catalogName: string,
  itemId: string,
): Promise<CatalogItem> {
  return guarded(async () => {
    const catalog = await requireCatalog(pool, workspaceId, catalogName);
    const item = isPlausibleId(itemId) ? await getItem(pool, catalog.id, itemId) : undefined;
    if (!item) throw itemNotFound(itemId);
    return item;
  });
}

/** Deletes one item now; an item that does not exist is item-not-found. */
export async function deleteItem(pool: Pool, workspaceId: string, catalogName: string, itemId: string): Promise<void> {
  return guarded(async () => {
    const catalog = await requireCatalog(pool, workspaceId, catalogName);
    if (!isPlausibleId(itemId) || !(await itemExists(pool, catalog.id, itemId))) throw itemNotFound(itemId);
    await deleteItems(pool, catalog.id, await nextVersion(pool), [itemId]);
  });
}

export interface ItemsPage {
  items: CatalogItem[];
  /** Opaque cursor of the next page; absent on the last. */
  next?: string;
}

const encodeCursor = (lastId: string) => Buffer.from(lastId, 'utf8').toString('base64url');

function decodeCursor(cursor: string): string {
  const id = Buffer.from(cursor, 'base64url').toString('utf8');
  // Only a cursor we issued decodes to an id and encodes back to itself.
  if (!isPlausibleId(id) || encodeCursor(id) !== cursor)
    throw badRequest('cursor is not valid: pass the cursor of a Link header unchanged');
  return id;
}

/** One page of a catalog's items in id order, with the cursor of the next page. */
export async function listItems(
  pool: Pool,
  workspaceId: string,
  catalogName: string,
  cursor: string | undefined,
): Promise<ItemsPage> {
  const after = cursor === undefined || cursor === '' ? undefined : decodeCursor(cursor);
  return guarded(async () => {
    const catalog = await requireCatalog(pool, workspaceId, catalogName);
    const rows = await listItemsAfter(pool, catalog.id, after, ITEMS_PAGE_SIZE + 1);
    const items = rows.slice(0, ITEMS_PAGE_SIZE);
    return rows.length > ITEMS_PAGE_SIZE ? { items, next: encodeCursor(items[items.length - 1]!.id) } : { items };
  });
}

/**
 * Applies a queued batch in one transaction. Safe to run twice: rows only move to higher versions. A catalog deleted
 * since the request was accepted takes its items with it, so the batch is dropped.
 */
export async function applyBatch(pool: Pool, payload: CatalogBatchPayload, log: Logger): Promise<{ written: number }> {
  return withTransaction(pool, async (client) => {
    const { rowCount } = await client.query(`SELECT 1 FROM catalogs WHERE id = $1 AND workspace_id = $2 FOR SHARE`, [
      payload.catalogId,
      payload.workspaceId,
    ]);
    if (!rowCount) {
      log.warn(
        { catalogId: payload.catalogId, version: payload.version },
        'catalog gone before its batch ran: batch dropped',
      );
      await client.query('UPDATE catalog_batches SET applied_at = now() WHERE version = $1 AND applied_at IS NULL', [
        payload.version,
      ]);
      return { written: 0 };
    }
    const written =
      payload.op === 'replace'
        ? await upsertItems(client, payload.catalogId, payload.version, payload.items)
        : await deleteItems(client, payload.catalogId, payload.version, payload.ids);
    // Applied, in the same transaction: the reconciler never queues it again.
    await client.query('UPDATE catalog_batches SET applied_at = now() WHERE version = $1 AND applied_at IS NULL', [
      payload.version,
    ]);
    const total = payload.op === 'replace' ? payload.items.length : payload.ids.length;
    log.info(
      { catalogId: payload.catalogId, op: payload.op, version: payload.version, items: total, written: written.length },
      'catalog batch applied',
    );
    return { written: written.length };
  });
}
