-- One replica's news for every provider, and the cluster's view of each.
-- For provider i, KEYS[3i-2] is its breaker's opening (the key lives as
-- long as the opening does), KEYS[3i-1] its half-open probe (the holding
-- replica's id, or 'closed' once a probe succeeded) and KEYS[3i] its
-- Retry-After cooldown (living as long as the cooldown). ARGV[1] is this
-- replica's id; for provider i, ARGV[3i-1] is its breaker's action (read,
-- open, closed or claim), ARGV[3i] that action's milliseconds, and
-- ARGV[3i+1] the milliseconds of a cooldown it was asked for (0: none).
-- Returns, for each provider, the opening's milliseconds left (0: not
-- open), the probe (0 free, 1 this replica's, 2 another's, 3 closed) and
-- the cooldown's milliseconds left (0: none).
local me = ARGV[1]
local out = {}
for i = 1, #KEYS / 3 do
  local opening, probe, cooldown = KEYS[3 * i - 2], KEYS[3 * i - 1], KEYS[3 * i]
  local action, ms, cool = ARGV[3 * i - 1], tonumber(ARGV[3 * i]), tonumber(ARGV[3 * i + 1])
  if action == 'open' then
    if redis.call('PTTL', opening) < ms then
      redis.call('SET', opening, '1', 'PX', ms)
    end
    redis.call('DEL', probe)
  elseif action == 'closed' then
    redis.call('DEL', opening)
    redis.call('SET', probe, 'closed', 'PX', ms)
  elseif action == 'claim' and redis.call('EXISTS', opening) == 0 then
    redis.call('SET', probe, me, 'NX', 'PX', ms)
  end
  if cool > 0 and redis.call('PTTL', cooldown) < cool then
    redis.call('SET', cooldown, '1', 'PX', cool)
  end
  local left = redis.call('PTTL', opening)
  if left < 0 then left = 0 end
  local holder = redis.call('GET', probe)
  local state = 0
  if holder == 'closed' then state = 3 elseif holder == me then state = 1 elseif holder then state = 2 end
  local cooling = redis.call('PTTL', cooldown)
  if cooling < 0 then cooling = 0 end
  out[3 * i - 2] = left
  out[3 * i - 1] = state
  out[3 * i] = cooling
end
return out
