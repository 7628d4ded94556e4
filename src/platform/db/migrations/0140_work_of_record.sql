-- PostgreSQL is the record of every piece of work; what Redis holds (jobs, locks, schedulers) is rebuilt from these
-- rows by the reconciler (src/runtime/reconcile/) when Redis loses it. What this adds to make that possible:

-- An export's shards as they were cut when it was requested (random_bucket values per shard), so that the shard
-- jobs of an export can be queued again exactly as they were; and a shard's end, recorded with its last parts and
-- tail, so that only unfinished shards are queued again and the finishing job can tell all shards ended.
ALTER TABLE exports ADD COLUMN shard_buckets integer;
CREATE TABLE export_shards_done (
  export_id uuid NOT NULL REFERENCES exports(id) ON DELETE CASCADE,
  shard     integer NOT NULL,
  users     bigint NOT NULL,
  done_at   timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (export_id, shard)
);
-- Users written so far, as shown by the status read: it only grows (a retried shard first removes its own parts, so
-- counting the parts in the store alone went backwards).
ALTER TABLE exports ADD COLUMN users_progress bigint NOT NULL DEFAULT 0;
-- The export callback: delivered, or given up; the reconciler queues it again while it is neither.
ALTER TABLE exports ADD COLUMN callback_state text CHECK (callback_state IN ('pending', 'delivered', 'abandoned'));
-- The address clients reach the API at, as the API that accepted the export knew it: workers build the callback's
-- download link from it (a worker process has no API port of its own).
ALTER TABLE exports ADD COLUMN public_base_url text;

-- One queued or running export per segment, held by PostgreSQL itself, so that losing Redis (and the lock it held)
-- cannot let a second export of a running segment in. Exports left running by earlier versions in twos are failed
-- first, all but the newest.
UPDATE exports e SET status = 'failed', finished_at = now(), error = 'superseded by a newer export of the same segment'
 WHERE status IN ('queued', 'running')
   AND EXISTS (SELECT 1 FROM exports n WHERE n.segment_id = e.segment_id AND n.status IN ('queued', 'running') AND n.created_at > e.created_at);
CREATE UNIQUE INDEX exports_one_unfinished_per_segment ON exports (segment_id) WHERE status IN ('queued', 'running');
CREATE INDEX exports_unfinished ON exports (company_id) WHERE status IN ('queued', 'running');

-- Asynchronous catalog batches, recorded before the 202 that accepts them and marked applied in the transaction that
-- applies them; the reconciler queues again those still waiting when their job is gone. `version` is the batch's
-- place among every write of the same items (catalog_item_version_seq).
CREATE TABLE catalog_batches (
  version      bigint PRIMARY KEY,
  workspace_id uuid NOT NULL REFERENCES workspaces(id) ON DELETE CASCADE,
  catalog_id   uuid NOT NULL,
  op           text NOT NULL CHECK (op IN ('replace', 'delete')),
  payload      jsonb NOT NULL,
  created_at   timestamptz NOT NULL DEFAULT now(),
  applied_at   timestamptz
);
CREATE INDEX catalog_batches_waiting ON catalog_batches (created_at) WHERE applied_at IS NULL;

-- Imports run by the bulk-import workers (true), or in the foreground by `ces import` (false): only the former are
-- queued again by the reconciler; a foreground run interrupted is resumed by `ces import --resume`.
ALTER TABLE imports ADD COLUMN via_queue boolean NOT NULL DEFAULT true;

-- The reconciler's last pass, so that of many worker processes one passes per interval.
CREATE TABLE reconciler_state (
  id          boolean PRIMARY KEY DEFAULT true CHECK (id),
  last_pass_at timestamptz NOT NULL
);
