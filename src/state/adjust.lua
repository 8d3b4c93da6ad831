-- Gives units back to a GCRA limit (ARGV[3] = 'back') or charges them past
-- it (ARGV[3] = 'charge'). KEYS[1] is the limit, ARGV[1] its units per
-- minute, ARGV[2] the units; the value is as take.lua keeps it.
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local delta = 60000000 / tonumber(ARGV[1]) * tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1]) or '0')
if tat < now then tat = now end
if ARGV[3] == 'back' then tat = tat - delta else tat = tat + delta end
if tat <= now then
  redis.call('DEL', KEYS[1])
  return 0
end
redis.call('SET', KEYS[1], string.format('%.0f', tat), 'PX', math.ceil((tat - now) / 1000) + 1)
return 0
