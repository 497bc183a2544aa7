-- KEYS: head, history.  ARGV: entry JSON, its version, entries kept.
-- Best effort after a commit: recorded only while the head is at that version or later (not
-- into a selector deleted, or deleted and created anew, since), newest first, capped.
local version = redis.call('HGET', KEYS[1], 'version')
if not version or tonumber(version) < tonumber(ARGV[2]) then
  return 0
end
redis.call('LPUSH', KEYS[2], ARGV[1])
redis.call('LTRIM', KEYS[2], 0, tonumber(ARGV[3]) - 1)
return 1
