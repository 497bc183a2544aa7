-- KEYS: a set of marks (selectors scored by when to look at them: the outboxes).
-- ARGV: name, the score it had when read, its new score ('' to remove it).
-- Moves (or removes) a mark only if nobody marked it since it was read: a mark set meanwhile
-- (a new event queued) stays as it is. Replies 1 if changed, 0 if not.
local score = redis.call('ZSCORE', KEYS[1], ARGV[1])
if not score or tonumber(score) ~= tonumber(ARGV[2]) then
  return 0
end
if ARGV[3] == '' then
  redis.call('ZREM', KEYS[1], ARGV[1])
else
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
end
return 1
