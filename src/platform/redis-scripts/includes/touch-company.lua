-- Keeps the company set's own expiry at least one lease ahead (ARGV[2] ms), so an abandoned set disappears by itself.
local ttl = redis.call('PTTL', KEYS[2])
if ttl < tonumber(ARGV[2]) then redis.call('PEXPIRE', KEYS[2], ARGV[2]) end
