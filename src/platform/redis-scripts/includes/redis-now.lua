-- now: Redis' own clock in ms, so that processes on machines with skewed clocks agree on lease expiry.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
