-- KEYS: a stream's head, attachments, detaching.  ARGV: selector, its incarnation.
-- The first step of a detach, in the stream's slot: chooses the cut (the stream's newest
-- entry now) and moves the selector's attachment to the detaching ones with it, so that no
-- entry appended from here on is answered or marked as the selector's, while the log it may
-- still replay stays held (RELEASE reads both). Answers {'OK', cut}; a detach begun before
-- (the same incarnation) answers its cut again. 'NOTATTACHED' when the selector (of that
-- incarnation) is attached no more.
local detaching = redis.call('HGET', KEYS[3], ARGV[1])
if detaching then
  local incarnation, cut = string.match(detaching, '^(%S+) %S+ %S+ %S+ (%S+)$')
  if incarnation == ARGV[2] then
    return {'OK', cut}
  end
end
local value = redis.call('HGET', KEYS[2], ARGV[1])
if not value or string.match(value, '^(%S+) ') ~= ARGV[2] then
  return {'NOTATTACHED'}
end
local cut = redis.call('HGET', KEYS[1], 'last_id') or '0-0'
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('HSET', KEYS[3], ARGV[1], value .. ' ' .. cut)
return {'OK', cut}
