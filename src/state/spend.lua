-- Adds spend to scopes and reads each scope's spend over the last minute,
-- hour and day, sliding: each window is cut into 60 slices of Redis's
-- clock and summed over the last 61 (what it counts covers the whole
-- window that ends now, as the replicas' own windows do). KEYS[i] is a
-- scope (slice keys are it, the window's slice length and the slice's
-- number); ARGV[i] the USD to add to it, '0' for none. Each slice key
-- expires once it has left its window. Returns, per scope, its three
-- totals as text (a number would lose its fraction).
local t = redis.call('TIME')
local now_ms = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local slices = {1000, 60000, 1440000}
local out = {}
for i, scope in ipairs(KEYS) do
  local usd = tonumber(ARGV[i])
  for w, slice in ipairs(slices) do
    local head = math.floor(now_ms / slice)
    if usd > 0 then
      local key = scope .. ':' .. slice .. ':' .. head
      redis.call('INCRBYFLOAT', key, ARGV[i])
      redis.call('PEXPIRE', key, slice * 62)
    end
    local names = {}
    for s = head - 60, head do
      names[#names + 1] = scope .. ':' .. slice .. ':' .. s
    end
    local sum = 0
    for _, value in ipairs(redis.call('MGET', unpack(names))) do
      if value then sum = sum + tonumber(value) end
    end
    out[#out + 1] = string.format('%.17g', sum)
  end
end
return out
