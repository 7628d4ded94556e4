\timing on
CREATE TEMP TABLE m (export_id int, random_bucket int, profile_ids bigint[], PRIMARY KEY (export_id, random_bucket));
-- 1M members over 10,000 buckets (100 a bucket: a 1M-member segment), ids spread like a 100M-profile table
INSERT INTO m SELECT 1, b, array_agg(id ORDER BY id) FROM (SELECT (g * 97)::bigint AS id, (g % 10000) AS b FROM generate_series(1, 1000000) g) s GROUP BY b;
SELECT pg_total_relation_size('m') AS bytes_100_per_bucket, pg_total_relation_size('m') / 1000000.0 AS bytes_per_member;
-- the next export: 2% left, 2% joined
INSERT INTO m SELECT 2, b, array_agg(id ORDER BY id) FROM (SELECT (g * 97)::bigint AS id, (g % 10000) AS b FROM generate_series(20001, 1020000) g) s GROUP BY b;
SELECT pg_total_relation_size('m') / 2000000.0 AS bytes_per_member_both;
-- diff: leavers and joiners over all buckets
SELECT count(*) FROM ((SELECT unnest(profile_ids) FROM m WHERE export_id = 1) EXCEPT ALL (SELECT unnest(profile_ids) FROM m WHERE export_id = 2)) d;
SELECT count(*) FROM (SELECT o.id FROM (SELECT unnest(profile_ids) id FROM m WHERE export_id = 1) o LEFT JOIN (SELECT unnest(profile_ids) id FROM m WHERE export_id = 2) n ON n.id = o.id WHERE n.id IS NULL) d;
CREATE TEMP TABLE d (export_id int, random_bucket int, profile_ids bigint[], PRIMARY KEY (export_id, random_bucket));
-- dense buckets: 1M members in 200 buckets (5,000 a bucket: a 50M-member segment's density)
INSERT INTO d SELECT 1, b, array_agg(id ORDER BY id) FROM (SELECT (g * 97)::bigint AS id, (g % 200) AS b FROM generate_series(1, 1000000) g) s GROUP BY b;
SELECT pg_total_relation_size('d') / 1000000.0 AS bytes_per_member_dense;
