-- Lets go of an export's holds (the segment lock only if it is still this export's).
-- KEYS[1]: the segment's lock (the export id, with a lease); KEYS[2]: the company's running exports (ids by lease expiry).
-- ARGV: the export id.
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
redis.call('ZREM', KEYS[2], ARGV[1])
return 1
