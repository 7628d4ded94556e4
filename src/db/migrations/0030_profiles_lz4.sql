-- Storage of the profiles' jsonb collections (a couple of KB a user), tuned for bulk loads and exports.
--
-- lz4 instead of the default pglz: TOAST compresses most profile rows, and pglz was 15% of a bulk COPY's time;
-- lz4 compresses several times faster and decompresses faster for exports, at a similar ratio. Only values written
-- from now on use it; existing ones stay readable.
--
-- No column statistics: segment filters reach into these columns through jsonpath and `->`, whose selectivity the
-- planner estimates without them, while gathering them (sorting sampled jsonb values) was most of ANALYZE's time.
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
