-- Gives units back to GCRA limits, or charges them past them: for limit i,
-- KEYS[i] is the limit, ARGV[3i-2] its units per minute, ARGV[3i-1] the
-- units, ARGV[3i] 'back' or 'charge'. Values are as take.lua keeps them.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
for i, key in ipairs(KEYS) do
  local delta = 60000000 / tonumber(ARGV[3 * i - 2]) * tonumber(ARGV[3 * i - 1])
  local tat = tonumber(redis.call('GET', key) or '0')
  if tat < now then tat = now end
  if ARGV[3 * i] == 'back' then tat = tat - delta else tat = tat + delta end
  if tat <= now then
    redis.call('DEL', key)
  else
    redis.call('SET', key, string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
  end
end
return 0
