-- Takes the segment lock and a company slot for an export, atomically, or says which limit refused.
-- KEYS[1]: the segment's lock (the export id, with a lease); KEYS[2]: the company's running exports (ids by lease expiry).
-- ARGV: the export id, the lease in ms, the company's cap. Returns {0, ''} taken, {1, holder} segment busy,
-- {2, running} company at its cap.
--- @include "redis-now"
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return {1, holder} end
redis.call('ZREMRANGEBYSCORE', KEYS[2], '-inf', now)
local running = redis.call('ZCARD', KEYS[2])
if not redis.call('ZSCORE', KEYS[2], ARGV[1]) and running >= tonumber(ARGV[3]) then return {2, tostring(running)} end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], now + tonumber(ARGV[2]), ARGV[1])
--- @include "touch-company"
return {0, ''}
