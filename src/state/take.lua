-- Takes units from every GCRA limit, or from none when one has no room.
-- KEYS[i] is limit i; ARGV[2i-1] its units per minute, ARGV[2i] the units
-- to take. A limit's value is its theoretical arrival time, in microseconds
-- of this server's clock (so replicas' clocks never matter), and the key
-- expires once that time has passed. Returns {0, 0} when every limit was
-- taken from, or {i, wait_ms} when limit i had no room for wait_ms more.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local window = 60000000
local after = {}
for i, key in ipairs(KEYS) do
  local interval = window / tonumber(ARGV[2 * i - 1])
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  after[i] = tat + interval * tonumber(ARGV[2 * i])
  if after[i] > now + window then
    return {i, math.ceil((after[i] - now - window) / 1000)}
  end
end
for i, key in ipairs(KEYS) do
  redis.call('SET', key, string.format('%.0f', after[i]), 'PX', math.ceil((after[i] - now) / 1000) + 1)
end
return {0, 0}
