-- KEYS: head, alerts.  ARGV: the alert's id, its JSON, the most alerts a selector may have.
-- Only for a selector that exists (a creation racing a delete leaves no alert behind).
-- Replies 'OK', 'NOTFOUND' or 'FULL'.
if redis.call('EXISTS', KEYS[1]) == 0 then
  return 'NOTFOUND'
end
if redis.call('HLEN', KEYS[2]) >= tonumber(ARGV[3]) then
  return 'FULL'
end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
return 'OK'
