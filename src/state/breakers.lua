-- One replica's breaker news for every provider, and the cluster's view
-- of each. For provider i, KEYS[2i-1] is its opening (the key lives as long
-- as the opening does) and KEYS[2i] its half-open probe (the holding
-- replica's id, or 'closed' once a probe succeeded). ARGV[1] is this
-- replica's id; ARGV[2i] its action for provider i (read, open, closed or
-- claim) and ARGV[2i+1] that action's milliseconds. Returns, for each
-- provider, the opening's milliseconds left (0: not open) and the probe
-- (0 free, 1 this replica's, 2 another's, 3 closed).
local me = ARGV[1]
local out = {}
for i = 1, #KEYS / 2 do
  local opening, probe = KEYS[2 * i - 1], KEYS[2 * i]
  local action, ms = ARGV[2 * i], tonumber(ARGV[2 * i + 1])
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
  local left = redis.call('PTTL', opening)
  if left < 0 then left = 0 end
  local holder = redis.call('GET', probe)
  local state = 0
  if holder == 'closed' then state = 3 elseif holder == me then state = 1 elseif holder then state = 2 end
  out[2 * i - 1] = left
  out[2 * i] = state
end
return out
