import type { Pool, PoolClient } from '../../platform/db/pool.js';
import { parseCatalogFields, type CatalogDefinition } from './fields.js';
import type { ValidItem } from './validate.js';

type Db = Pool | PoolClient;

/** A catalog item as the API returns it: `id` first, then its fields. */
export type CatalogItem = { id: string } & Record<string, unknown>;

/** The catalog of a workspace by name, or undefined. Names are matched exactly (case-sensitive). */
export async function findCatalog(db: Db, workspaceId: string, name: string): Promise<CatalogDefinition | undefined> {
  const { rows } = await db.query<{ id: string; name: string; fields: unknown }>(
    `SELECT id, name, fields FROM catalogs WHERE workspace_id = $1 AND name = $2`,
    [workspaceId, name],
  );
  const row = rows[0];
  if (!row) return undefined;
  return { id: row.id, name: row.name, fields: parseCatalogFields(row.fields) };
}

/** Takes the next write version: writes accepted later always carry a higher one. */
export async function nextVersion(db: Db): Promise<number> {
  const { rows } = await db.query<{ v: number }>(`SELECT nextval('catalog_item_version_seq') AS v`);
  return rows[0]!.v;
}

/**
 * Creates or replaces items at a version, in one statement. A row already at a higher version (a later write, or
 * this same write applied before a retry) is left alone. Returns the ids written.
 */
export async function upsertItems(db: Db, catalogId: string, version: number, items: ValidItem[]): Promise<string[]> {
  if (items.length === 0) return [];
  const { rows } = await db.query<{ item_id: string }>(
    `INSERT INTO catalog_items AS ci (catalog_id, item_id, data, version, deleted)
     SELECT $1, i.id, i.data, $2, false
       FROM jsonb_to_recordset($3::jsonb) AS i(id text, data jsonb)
     ON CONFLICT (catalog_id, item_id) DO UPDATE
        SET data = EXCLUDED.data, version = EXCLUDED.version, deleted = false, updated_at = now(),
            created_at = CASE WHEN ci.deleted THEN now() ELSE ci.created_at END
      WHERE ci.version < EXCLUDED.version
     RETURNING item_id`,
    [catalogId, version, JSON.stringify(items)],
  );
  return rows.map((r) => r.item_id);
}

/**
 * Creates an item unless a live one exists. Returns false when it exists; a tombstone at a higher version means a
 * delete accepted after this create, so the create counts as done and the item stays deleted.
 */
export async function insertItem(db: Db, catalogId: string, version: number, item: ValidItem): Promise<boolean> {
  const { rows } = await db.query<{ outcome: string }>(
    `WITH ins AS (
       INSERT INTO catalog_items AS ci (catalog_id, item_id, data, version, deleted)
       VALUES ($1, $2, $3::jsonb, $4, false)
       ON CONFLICT (catalog_id, item_id) DO UPDATE
          SET data = EXCLUDED.data, version = EXCLUDED.version, deleted = false, updated_at = now(), created_at = now()
        WHERE ci.deleted AND ci.version < EXCLUDED.version
       RETURNING 'created'::text AS outcome)
     SELECT outcome FROM ins
     UNION ALL
     SELECT CASE WHEN deleted THEN 'superseded' ELSE 'exists' END FROM catalog_items
      WHERE catalog_id = $1 AND item_id = $2 AND NOT EXISTS (SELECT 1 FROM ins)`,
    [catalogId, item.id, JSON.stringify(item.data), version],
  );
  // No row at all: a concurrent create committed first (its row is outside this statement's snapshot).
  const outcome = rows[0]?.outcome;
  return outcome === 'created' || outcome === 'superseded';
}

/** Marks items deleted at a version (keeping a tombstone that outranks older queued writes). Returns the ids deleted. */
export async function deleteItems(db: Db, catalogId: string, version: number, ids: string[]): Promise<string[]> {
  if (ids.length === 0) return [];
  const { rows } = await db.query<{ item_id: string }>(
    `INSERT INTO catalog_items AS ci (catalog_id, item_id, data, version, deleted)
     SELECT $1, id, '{}'::jsonb, $2, true FROM unnest($3::text[]) AS id
     ON CONFLICT (catalog_id, item_id) DO UPDATE
        SET data = '{}'::jsonb, version = EXCLUDED.version, deleted = true, updated_at = now()
      WHERE ci.version < EXCLUDED.version
     RETURNING item_id`,
    [catalogId, version, ids],
  );
  return rows.map((r) => r.item_id);
}

/** True when the item exists and is not deleted. */
export async function itemExists(db: Db, catalogId: string, itemId: string): Promise<boolean> {
  const { rowCount } = await db.query(
    `SELECT 1 FROM catalog_items WHERE catalog_id = $1 AND item_id = $2 AND NOT deleted`,
    [catalogId, itemId],
  );
  return (rowCount ?? 0) > 0;
}

export async function getItem(db: Db, catalogId: string, itemId: string): Promise<CatalogItem | undefined> {
  const { rows } = await db.query<{ data: Record<string, unknown> }>(
    `SELECT data FROM catalog_items WHERE catalog_id = $1 AND item_id = $2 AND NOT deleted`,
    [catalogId, itemId],
  );
  const row = rows[0];
  return row ? { id: itemId, ...row.data } : undefined;
}

/** Up to `limit` live items with ids after `after`, in id (byte) order. */
export async function listItemsAfter(
  db: Db,
  catalogId: string,
  after: string | undefined,
  limit: number,
): Promise<CatalogItem[]> {
  const { rows } = await db.query<{ item_id: string; data: Record<string, unknown> }>(
    `SELECT item_id, data FROM catalog_items
      WHERE catalog_id = $1 AND NOT deleted AND ($2::text IS NULL OR item_id > $2)
      ORDER BY item_id
      LIMIT $3`,
    [catalogId, after ?? null, limit],
  );
  return rows.map((r) => ({ id: r.item_id, ...r.data }));
}
