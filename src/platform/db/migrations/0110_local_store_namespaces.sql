-- The built-in local store gives each workspace a directory of its own, `<LOCAL_STORE_DIR>/local/<company id>/
-- <workspace id>/`, and every key of a request resolves inside it (src/platform/storage/local-store.ts). Before, the store was
-- one namespace for every company: a key of another tenant's export or import file could be imported, and a
-- rejects file written beside it.
--
-- Exports to the local store recorded before keep their files where they are, at keys relative to the store's shared
-- root: they are marked here and read from there (their keys come from these rows, never from a request), so their
-- download links keep working.
ALTER TABLE exports ADD COLUMN local_shared_root boolean NOT NULL DEFAULT false;
UPDATE exports SET local_shared_root = true WHERE destination = 'local';

-- An import of the local store that had not finished named a key of the shared root, which may be another tenant's
-- file: it is not resumed. Its file stays where it was; move it into the workspace's directory and start it again.
UPDATE imports
   SET status = 'failed', finished_at = now(), updated_at = now(),
       error = 'not resumed after the upgrade that gave each workspace its own directory of the local store: move the file into the workspace''s directory and start the import again'
 WHERE store = 'local' AND status IN ('queued', 'running');
