-- Storage of the profiles' jsonb collections (a couple of KB a user), tuned for bulk loads and exports.
-- (Every statement is idempotent: a database that applied this file under its first name, 0030_profiles_lz4.sql,
-- applies it again harmlessly.)
--
-- Rows stay inline and uncompressed up to 4 KB instead of 2 KB: a typical profile is 1.5-3 KB, and compressing or
-- moving it out of line cost 13% of a bulk COPY's PostgreSQL time and costs every export a decompression per
-- column. The price is disk: such rows take their full size rather than about two thirds of it.
--
-- lz4 instead of the default pglz for the rows that are still compressed: pglz was 15% of a bulk COPY's time; lz4
-- compresses several times faster and decompresses faster for exports, at a similar ratio. Only values written
-- from now on use it; existing ones stay readable.
--
-- No column statistics: segment filters reach into these columns through jsonpath and `->`, whose selectivity the
-- planner estimates without them, while gathering them (sorting sampled jsonb values) was most of ANALYZE's time.
ALTER TABLE profiles SET (toast_tuple_target = 4080);

ALTER TABLE profiles
  ALTER COLUMN custom_attributes SET COMPRESSION lz4, ALTER COLUMN custom_attributes SET STATISTICS 0,
  ALTER COLUMN user_aliases SET COMPRESSION lz4, ALTER COLUMN user_aliases SET STATISTICS 0,
  ALTER COLUMN devices SET COMPRESSION lz4, ALTER COLUMN devices SET STATISTICS 0,
  ALTER COLUMN push_tokens SET COMPRESSION lz4, ALTER COLUMN push_tokens SET STATISTICS 0,
  ALTER COLUMN apps SET COMPRESSION lz4, ALTER COLUMN apps SET STATISTICS 0,
  ALTER COLUMN custom_events SET COMPRESSION lz4, ALTER COLUMN custom_events SET STATISTICS 0,
  ALTER COLUMN purchases SET COMPRESSION lz4, ALTER COLUMN purchases SET STATISTICS 0,
  ALTER COLUMN campaigns_received SET COMPRESSION lz4, ALTER COLUMN campaigns_received SET STATISTICS 0,
  ALTER COLUMN canvases_received SET COMPRESSION lz4, ALTER COLUMN canvases_received SET STATISTICS 0,
  ALTER COLUMN cards_clicked SET COMPRESSION lz4, ALTER COLUMN cards_clicked SET STATISTICS 0,
  ALTER COLUMN attribute_times SET COMPRESSION lz4, ALTER COLUMN attribute_times SET STATISTICS 0;
