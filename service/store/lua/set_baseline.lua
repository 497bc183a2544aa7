-- KEYS: head, baseline.  ARGV: the baseline JSON, its version, the incarnation it belongs to,
-- 'auto' (written only if there is none yet) or 'pin' (replaces it).
-- Written only while the head is of that incarnation and at that version or later: a
-- selector deleted, or created anew under its name, never gets another's baseline (a
-- monitor of the earlier one may still be running). Replies 1 if written, 0 if not.
local head = redis.call('HMGET', KEYS[1], 'version', 'incarnation')
if not head[1] or (head[2] or '') ~= ARGV[3] or tonumber(head[1]) < tonumber(ARGV[2]) then
  return 0
end
if ARGV[4] == 'auto' and redis.call('EXISTS', KEYS[2]) == 1 then
  return 0
end
redis.call('SET', KEYS[2], ARGV[1])
return 1
