-- One atomic step of the sliding window. KEYS[1] is a hash whose fields are sub-window numbers (floor(t / g)) and
-- values the requests allowed in them. ARGV: limit, window ms, sub-window ms (g), and the time in ms or '' for
-- Redis' own clock (TIME before writes is fine: Redis 7 replicates a script's effects, not the script).
-- Returns {allowed, counted after this request, now ms, ms at which the count next falls enough to matter}.
local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local g = tonumber(ARGV[3])
local now
if ARGV[4] ~= '' then
  now = math.floor(tonumber(ARGV[4]))
else
  local t = redis.call('TIME')
  now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end
local current = math.floor(now / g)
local first = math.floor((now - window) / g)
local flat = redis.call('HGETALL', KEYS[1])
local subs, counts, stale = {}, {}, {}
local count, oldest, newest = 0, nil, current
for i = 1, #flat, 2 do
  local sub = tonumber(flat[i])
  if sub < first then
    stale[#stale + 1] = flat[i]
  else
    local n = tonumber(flat[i + 1])
    subs[#subs + 1] = sub
    counts[sub] = n
    count = count + n
    if oldest == nil or sub < oldest then oldest = sub end
    if sub > newest then newest = sub end
  end
end
if #stale > 0 then redis.call('HDEL', KEYS[1], unpack(stale)) end
local allowed = 0
if count < limit then
  allowed = 1
  count = count + 1
  if counts[current] == nil then
    subs[#subs + 1] = current
    counts[current] = 0
  end
  counts[current] = counts[current] + 1
  if oldest == nil or current < oldest then oldest = current end
  redis.call('HINCRBY', KEYS[1], string.format('%d', current), 1)
  redis.call('PEXPIRE', KEYS[1], (newest + 1) * g + window - now)
end
local at = now + g
local need = count - math.min(count, limit) + 1
if need == 1 and oldest ~= nil then
  at = (oldest + 1) * g + window
elseif count >= need then
  table.sort(subs)
  local gone = 0
  for _, sub in ipairs(subs) do
    gone = gone + counts[sub]
    if gone >= need then
      at = (sub + 1) * g + window
      break
    end
  end
end
return {allowed, count, now, at}
