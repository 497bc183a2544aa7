-- KEYS: the pending set.  ARGV: name, score pairs.
-- Removes each name whose mark still has the score it had when the sweeper read it (an append
-- since has marked it again: it stays).
local removed = 0
for i = 1, #ARGV, 2 do
  local score = redis.call('ZSCORE', KEYS[1], ARGV[i])
  if score and tonumber(score) == tonumber(ARGV[i + 1]) then
    removed = removed + redis.call('ZREM', KEYS[1], ARGV[i])
  end
end
return removed
