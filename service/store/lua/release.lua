-- KEYS: a stream's attachments, log, head.
-- ARGV: selector, its incarnation, the cursor of its last checkpoint, or '' to detach it
-- (a selector deleted or detached: it holds nothing back any more).
-- Moves the selector's released cursor forward (never back; only for the incarnation that
-- attached), then trims the log through the lowest released cursor of every attachment: no
-- attached selector ever needs an entry at or before its own checkpoint's cursor. A stream
-- without attachments trims nothing. Answers {'OK', the id the log is trimmed through}.
-- uses: int, stream_ids
local value = redis.call('HGET', KEYS[1], ARGV[1])
if value then
  local incarnation, start, released, at = string.match(value, '^(%S+) (%S+) (%S+) (%S+)$')
  if incarnation == ARGV[2] then
    if ARGV[3] == '' then
      redis.call('HDEL', KEYS[1], ARGV[1])
    elseif cmp_id(ARGV[3], released) > 0 then
      redis.call('HSET', KEYS[1], ARGV[1],
                 incarnation .. ' ' .. start .. ' ' .. ARGV[3] .. ' ' .. at)
    end
  end
end
local trimmed = redis.call('HGET', KEYS[3], 'trimmed')
if not trimmed then
  return {'NOTFOUND'}
end
local lowest = nil
for _, v in ipairs(redis.call('HVALS', KEYS[1])) do
  local released = string.match(v, '^%S+ %S+ (%S+) %S+$')
  if lowest == nil or cmp_id(released, lowest) < 0 then
    lowest = released
  end
end
if lowest ~= nil and cmp_id(lowest, trimmed) > 0 then
  local ms, seq = string.match(lowest, '^(%d+)-(%d+)$')
  redis.call('XTRIM', KEYS[2], 'MINID', ms .. '-' .. int_str(tonumber(seq) + 1))
  redis.call('HSET', KEYS[3], 'trimmed', lowest)
  trimmed = lowest
end
return {'OK', trimmed}
