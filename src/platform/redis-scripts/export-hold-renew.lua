-- Extends both holds of a live export; re-takes a lapsed segment lock nobody else took.
-- KEYS[1]: the segment's lock (the export id, with a lease); KEYS[2]: the company's running exports (ids by lease expiry).
-- ARGV: the export id, the lease in ms. Returns 1, or 0 when another export holds the segment.
--- @include "redis-now"
local holder = redis.call('GET', KEYS[1])
local ok = 1
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
elseif not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
else
  ok = 0
end
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
--- @include "touch-company"
return ok
