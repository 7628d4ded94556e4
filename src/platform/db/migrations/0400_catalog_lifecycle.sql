-- Catalog lifecycle through the API (issue 44, 1): catalogs created and deleted, fields added and removed, items
-- created and edited in bulk, selections created and deleted.
--
-- Every asynchronous catalog change is work of record like the item batches before it: recorded in catalog_batches
-- before the 202, marked applied in the transaction that applies it, queued again by the reconciler when Redis lost
-- its job. The new kinds of change only widen the op check.
ALTER TABLE catalog_batches DROP CONSTRAINT catalog_batches_op_check;
ALTER TABLE catalog_batches ADD CONSTRAINT catalog_batches_op_check CHECK (
  op IN ('replace', 'delete', 'create', 'update', 'add_fields', 'delete_field', 'create_selection', 'delete_selection')
);

-- A selection: a named filter, sort and limit over a catalog's items, as the public API's selection object says it.
CREATE TABLE catalog_selections (
  catalog_id  uuid NOT NULL REFERENCES catalogs(id) ON DELETE CASCADE,
  name        text NOT NULL,
  definition  jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (catalog_id, name)
);
