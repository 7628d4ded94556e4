import { withTransaction, type Pool, type PoolClient } from '../../platform/db/pool.js';
import type { Logger } from '../../platform/logger.js';
import type { CatalogBatchPayload } from '../../platform/queues/catalog-batch.js';
import { applyFieldChange } from './field-changes.js';
import { parseCatalogFields, type CatalogFieldType } from './fields.js';
import { createItems, editItems, keepCatalogFields } from './item-edits.js';
import { applySelectionChange } from './selections.js';
import { deleteItems, upsertItems } from './store.js';

const markApplied = (client: PoolClient, version: number) =>
  client.query('UPDATE catalog_batches SET applied_at = now() WHERE version = $1 AND applied_at IS NULL', [version]);

/** Item writes keep only the fields the catalog has now: a field deleted since the request was accepted is dropped. */
const current = (items: Array<{ id: string; data: Record<string, unknown> }>, fields: Map<string, CatalogFieldType>) =>
  items.map((i) => ({ id: i.id, data: keepCatalogFields(i.data, fields) }));

/** Applies one change and says how many rows (items, fields or selections) it changed. */
async function applyChange(
  client: PoolClient,
  payload: CatalogBatchPayload,
  fields: Map<string, CatalogFieldType>,
): Promise<number> {
  const { catalogId, version } = payload;
  switch (payload.op) {
    case 'replace':
      return (await upsertItems(client, catalogId, version, current(payload.items, fields))).length;
    case 'create':
      return (await createItems(client, catalogId, version, current(payload.items, fields))).length;
    case 'update':
      return (await editItems(client, catalogId, version, payload.edits, fields)).length;
    case 'delete':
      return (await deleteItems(client, catalogId, version, payload.ids)).length;
    case 'add_fields':
    case 'delete_field':
      return applyFieldChange(client, payload);
    case 'create_selection':
    case 'delete_selection':
      return applySelectionChange(client, payload);
  }
}

/** True when the change's record says it was applied; the record's row stays locked until the transaction ends. */
async function alreadyApplied(client: PoolClient, version: number): Promise<boolean> {
  const { rows } = await client.query<{ applied: boolean }>(
    `SELECT applied_at IS NOT NULL AS applied FROM catalog_batches WHERE version = $1 FOR UPDATE`,
    [version],
  );
  return rows[0]?.applied ?? false;
}

/**
 * Applies a queued change in one transaction and marks it applied there, so that it is applied exactly once: a job
 * run again after a crash either finds its transaction rolled back (and applies it whole) or committed (its record
 * says applied: nothing is done; two runs at once wait on the record's lock). A catalog deleted since the request
 * was accepted takes its items with it, so the change is dropped.
 */
export async function applyBatch(pool: Pool, payload: CatalogBatchPayload, log: Logger): Promise<{ written: number }> {
  return withTransaction(pool, async (client) => {
    if (await alreadyApplied(client, payload.version)) {
      log.info({ version: payload.version, op: payload.op }, 'catalog batch already applied');
      return { written: 0 };
    }
    // A field change rewrites the definition: it locks the catalog for itself (taking a shared lock first and then an
    // exclusive one would deadlock two field changes); item writes share it.
    const lock = payload.op === 'add_fields' || payload.op === 'delete_field' ? 'FOR UPDATE' : 'FOR SHARE';
    const { rows } = await client.query<{ fields: unknown }>(
      `SELECT fields FROM catalogs WHERE id = $1 AND workspace_id = $2 ${lock}`,
      [payload.catalogId, payload.workspaceId],
    );
    if (!rows[0]) {
      log.warn(
        { catalogId: payload.catalogId, version: payload.version, op: payload.op },
        'catalog gone before its batch ran: batch dropped',
      );
      await markApplied(client, payload.version);
      return { written: 0 };
    }
    const written = await applyChange(client, payload, parseCatalogFields(rows[0].fields));
    // Applied, in the same transaction: the reconciler never queues it again.
    await markApplied(client, payload.version);
    log.info(
      { catalogId: payload.catalogId, op: payload.op, version: payload.version, written },
      'catalog batch applied',
    );
    return { written };
  });
}
