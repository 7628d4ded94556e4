import { withTransaction, type Pool } from '../../platform/db/pool.js';
import { badRequest } from '../../platform/errors.js';
import { acceptChange, type AcceptBatchDeps, type OnBatchRecorded } from './batches.js';
import { catalogNotFound, CatalogErrors, guarded, itemNotFound } from './errors.js';
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
import { editItems } from './item-edits.js';
import { isPlausibleId, validateBatchDelete, validateBatchReplace, validateSingle } from './validate.js';
import { validateBatchEdit, validateSingleEdit } from './validate-edit.js';

/** Items per page of the list endpoint (as the public API pages them). */
export const ITEMS_PAGE_SIZE = 50;

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
  await acceptChange(
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
  await acceptChange(
    deps,
    { op: 'delete', workspaceId, catalogId: catalog!.id, version: await guarded(() => nextVersion(pool)), ids },
    onRecorded,
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

/** Batch create (POST): the contract of batch replace; items that already exist are left as they are. */
export async function acceptBatchCreate(
  deps: AcceptBatchDeps,
  workspaceId: string,
  catalogName: string,
  body: unknown,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  const { pool } = deps;
  const catalog = await guarded(() => findCatalog(pool, workspaceId, catalogName));
  const items = validateBatchReplace(body, catalog, catalogName);
  const version = await guarded(() => nextVersion(pool));
  await acceptChange(deps, { op: 'create', workspaceId, catalogId: catalog!.id, version, items }, onRecorded);
}

/** Batch edit (PATCH): fields sent are set, `$add`/`$remove` edit array fields; ids that name no item are ignored. */
export async function acceptBatchUpdate(
  deps: AcceptBatchDeps,
  workspaceId: string,
  catalogName: string,
  body: unknown,
  onRecorded?: OnBatchRecorded,
): Promise<void> {
  const { pool } = deps;
  const catalog = await guarded(() => findCatalog(pool, workspaceId, catalogName));
  const edits = validateBatchEdit(body, catalog, catalogName);
  const version = await guarded(() => nextVersion(pool));
  await acceptChange(deps, { op: 'update', workspaceId, catalogId: catalog!.id, version, edits }, onRecorded);
}

/** Single edit (PATCH .../items/{id}): applied at once; item-not-found when there is no such item. */
export async function editItem(
  pool: Pool,
  workspaceId: string,
  catalogName: string,
  itemId: string,
  body: unknown,
): Promise<void> {
  const catalog = await guarded(() => findCatalog(pool, workspaceId, catalogName));
  const edit = validateSingleEdit(body, itemId, catalog, catalogName);
  await guarded(() =>
    withTransaction(pool, async (client) => {
      if (!(await itemExists(client, catalog!.id, itemId))) throw itemNotFound(itemId);
      await editItems(client, catalog!.id, await nextVersion(client), [edit], catalog!.fields);
    }),
  );
}
