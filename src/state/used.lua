-- Reads how much of each GCRA limit is in use: KEYS[i] is limit i, whose
-- value is its theoretical arrival time in microseconds of this server's
-- clock (see take.lua). The part of it still ahead of now, over the
-- one-minute window, is the share in use: 0 when idle, 1 when full, more
-- when usage was charged past the limit. Returns each share as text.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = 60000000
local out = {}
for i, key in ipairs(KEYS) do
  local ahead = tonumber(redis.call('GET', key) or '0') - now
  if ahead < 0 then ahead = 0 end
  out[i] = string.format('%.6f', ahead / window)
end
return out
