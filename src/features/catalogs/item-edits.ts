import type { PoolClient } from '../../platform/db/pool.js';
import type { ItemEdit } from '../../platform/queues/catalog-batch.js';
import type { CatalogFieldType } from './fields.js';
import type { ValidItem } from './validate.js';

/**
 * Edits and creates of items, as the batch job and the single edit apply them.
 *
 * An edit is applied to the item as it is when the edit runs, whatever the version of its last write: edits are
 * changes, not states, and one that skipped items written by a later-accepted request would lose its `$add` when
 * workers run batches out of order (a batch retried after a crash runs after those queued behind it). It is applied
 * once because its batch is marked applied in the same transaction (apply-batch.ts); the item's version only moves
 * up, so that an older queued replace still cannot overwrite a newer write.
 */

/** The fields of an item that its catalog still has (a field deleted after the write was accepted is dropped). */
export function keepCatalogFields(
  data: Record<string, unknown>,
  fields: Map<string, CatalogFieldType>,
): Record<string, unknown> {
  return Object.fromEntries(Object.entries(data).filter(([k]) => fields.has(k)));
}

/** An item's data after an edit: fields sent replace theirs; array fields lose `remove` values, then gain `add`. */
export function editedData(
  current: Record<string, unknown>,
  edit: ItemEdit,
  fields: Map<string, CatalogFieldType>,
): Record<string, unknown> {
  const next: Record<string, unknown> = { ...current, ...edit.data };
  for (const [field, ops] of Object.entries(edit.arrays)) {
    const before = Array.isArray(next[field]) ? (next[field] as unknown[]) : [];
    const removed = new Set(ops.remove);
    next[field] = [...before.filter((v) => !removed.has(v as string)), ...ops.add];
  }
  return keepCatalogFields(next, fields);
}

/** Applies edits to the live items they name, in two statements; ids without a live item are skipped. */
export async function editItems(
  db: PoolClient,
  catalogId: string,
  version: number,
  edits: ItemEdit[],
  fields: Map<string, CatalogFieldType>,
): Promise<string[]> {
  const { rows } = await db.query<{ item_id: string; data: Record<string, unknown> }>(
    `SELECT item_id, data FROM catalog_items
      WHERE catalog_id = $1 AND item_id = ANY($2::text[]) AND NOT deleted
      ORDER BY item_id
      FOR UPDATE`,
    [catalogId, edits.map((e) => e.id)],
  );
  const current = new Map(rows.map((r) => [r.item_id, r.data]));
  const changed = edits
    .filter((e) => current.has(e.id))
    .map((e) => ({ id: e.id, data: editedData(current.get(e.id)!, e, fields) }));
  if (changed.length === 0) return [];
  const updated = await db.query<{ item_id: string }>(
    `UPDATE catalog_items AS ci SET data = u.data, version = GREATEST(ci.version, $2), updated_at = now()
       FROM jsonb_to_recordset($3::jsonb) AS u(id text, data jsonb)
      WHERE ci.catalog_id = $1 AND ci.item_id = u.id
      RETURNING ci.item_id`,
    [catalogId, version, JSON.stringify(changed)],
  );
  return updated.rows.map((r) => r.item_id);
}

/**
 * Creates the items that have no live row; a live item is left as it is, and a tombstone of a later delete wins (as
 * for the single create, store.ts insertItem).
 */
export async function createItems(
  db: PoolClient,
  catalogId: string,
  version: number,
  items: ValidItem[],
): Promise<string[]> {
  const { rows } = await db.query<{ item_id: string }>(
    `INSERT INTO catalog_items AS ci (catalog_id, item_id, data, version, deleted)
     SELECT $1, i.id, i.data, $2, false FROM jsonb_to_recordset($3::jsonb) AS i(id text, data jsonb)
     ON CONFLICT (catalog_id, item_id) DO UPDATE
        SET data = EXCLUDED.data, version = EXCLUDED.version, deleted = false, updated_at = now(), created_at = now()
      WHERE ci.deleted AND ci.version < EXCLUDED.version
     RETURNING item_id`,
    [catalogId, version, JSON.stringify(items)],
  );
  return rows.map((r) => r.item_id);
}
