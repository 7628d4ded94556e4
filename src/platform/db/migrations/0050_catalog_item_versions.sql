-- Catalog items: ordered writes and byte-order ids.
--
-- Batch replaces are applied later by a worker, and several workers may run at once, so two writes of one item can
-- land out of order. Every accepted write takes a number from catalog_item_version_seq when it is accepted, and a row
-- only ever moves to a higher version: the last write accepted wins, and a retried job changes nothing.
-- A deleted item keeps its row as a tombstone (deleted = true) carrying the version of the delete, so that an older
-- replace still waiting in the queue cannot bring it back.
ALTER TABLE catalog_items
  ADD COLUMN version bigint NOT NULL DEFAULT 0,
  ADD COLUMN deleted boolean NOT NULL DEFAULT false;

-- Ids hold only letters, digits, hyphens and underscores; byte order makes paging by id independent of the
-- database's locale.
ALTER TABLE catalog_items ALTER COLUMN item_id TYPE text COLLATE "C";

CREATE SEQUENCE catalog_item_version_seq;
