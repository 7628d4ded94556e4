-- A staged row's payload (a request's objects of one partition, 2-10 KB of JSON) is compressed as it is stored:
-- with lz4, as the profiles' collections are (0030), instead of the default pglz, which was PostgreSQL's largest
-- single cost of a staging insert (pglz_compress, about 1% of the machine at 450 requests/s; lz4 inserted these
-- rows in half the time at a similar size). Rows staged before keep pglz and stay readable.
ALTER TABLE ingest_staging ALTER COLUMN payload SET COMPRESSION lz4;
